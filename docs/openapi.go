// Package docs owns the checked-in OpenAPI description of the public API
// (openapi.yaml) and its JSON form, which the edge serves at
// /openapi.json. It imports nothing of Waymark's, so any package may use
// it.
package docs

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	yaml "go.yaml.in/yaml/v4"
)

// OpenAPIYAML is docs/openapi.yaml as checked in.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

// OpenAPIJSON returns the description as JSON, converted from the YAML
// once per process.
func OpenAPIJSON() ([]byte, error) { return openAPIJSON() }

var openAPIJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(OpenAPIYAML, &doc); err != nil {
		return nil, fmt.Errorf("cannot parse docs/openapi.yaml: %w", err)
	}
	doc, err := jsonValue(doc, "")
	if err != nil {
		return nil, fmt.Errorf("cannot convert docs/openapi.yaml to JSON: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("cannot convert docs/openapi.yaml to JSON: %w", err)
	}
	return b, nil
})

// jsonValue turns a decoded YAML value into one encoding/json accepts:
// maps keyed by strings only (JSON object keys are strings; a YAML key
// such as 200 must be quoted in the file, so an unquoted one is an
// error rather than a silent conversion).
func jsonValue(v any, at string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			c, err := jsonValue(e, at+"/"+k)
			if err != nil {
				return nil, err
			}
			v[k] = c
		}
		return v, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			s, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("key %v under %q is not a string; quote it", k, at)
			}
			c, err := jsonValue(e, at+"/"+s)
			if err != nil {
				return nil, err
			}
			out[s] = c
		}
		return out, nil
	case []any:
		for i, e := range v {
			c, err := jsonValue(e, fmt.Sprintf("%s/%d", at, i))
			if err != nil {
				return nil, err
			}
			v[i] = c
		}
		return v, nil
	}
	return v, nil
}
