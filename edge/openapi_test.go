package edge

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/waymark/waymark/docs"
	"github.com/waymark/waymark/edge/problem"
)

// TestOpenAPIServedMatchesYAML checks that GET /openapi.json on a real
// listener is docs/openapi.yaml: both are loaded by kin-openapi's own
// loader (its YAML path, not ours) and must give the same document.
func TestOpenAPIServedMatchesYAML(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do("GET", "/openapi.json", "", "")
	if r.status != 200 || r.get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %q", r.status, r.get("Content-Type"))
	}
	if !json.Valid(r.body) {
		t.Fatalf("/openapi.json is not JSON: %.200s", r.body)
	}
	fromYAML, err := openapi3.NewLoader().LoadFromData(docs.OpenAPIYAML)
	if err != nil {
		t.Fatalf("cannot load docs/openapi.yaml: %v", err)
	}
	if err := fromYAML.Validate(context.Background()); err != nil {
		t.Fatalf("docs/openapi.yaml is not a valid description: %v", err)
	}
	served, err := openapi3.NewLoader().LoadFromData(r.body)
	if err != nil {
		t.Fatalf("cannot load /openapi.json: %v", err)
	}
	a, _ := json.Marshal(fromYAML)
	b, _ := json.Marshal(served)
	var av, bv any
	json.Unmarshal(a, &av)
	json.Unmarshal(b, &bv)
	if !reflect.DeepEqual(av, bv) {
		t.Fatalf("/openapi.json differs from docs/openapi.yaml")
	}
	if served.OpenAPI != "3.1.0" || served.Paths.Find("/v1/links/{code}") == nil {
		t.Fatalf("served description: openapi %q, /v1/links/{code} %v", served.OpenAPI, served.Paths.Find("/v1/links/{code}"))
	}
	if r := e.do("POST", "/openapi.json", "", "{}"); r.status != 405 || r.get("Allow") != "GET, HEAD" {
		t.Fatalf("POST /openapi.json: %d Allow %q", r.status, r.get("Allow"))
	}
}

// TestOpenAPIProblemTypes checks the problem schemas of the description
// against the catalogue: every type a ProblemNNN schema allows exists,
// with that status and (where the schema fixes one) that title.
func TestOpenAPIProblemTypes(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPIYAML)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for name, ref := range doc.Components.Schemas {
		if !strings.HasPrefix(name, "Problem") || name == "Problem" {
			continue
		}
		props := ref.Value.AllOf[1].Value.Properties
		status := int(props["status"].Value.Const.(float64))
		typ := props["type"].Value
		types := typ.Enum
		if typ.Const != nil {
			types = []any{typ.Const}
		}
		if len(types) == 0 {
			t.Fatalf("%s allows any type", name)
		}
		for _, v := range types {
			n := strings.TrimPrefix(v.(string), "/problems/")
			pt, ok := problem.Lookup(n)
			if !ok {
				t.Errorf("%s: type %q is not in the catalogue", name, n)
				continue
			}
			if pt.Status != status {
				t.Errorf("%s: type %q has status %d in the catalogue", name, n, pt.Status)
			}
			if title := props["title"]; title != nil && title.Value.Const != nil && title.Value.Const != pt.Title {
				t.Errorf("%s: title %v; the catalogue says %q", name, title.Value.Const, pt.Title)
			}
			checked++
		}
	}
	if checked < 15 {
		t.Fatalf("only %d problem types checked", checked)
	}
}
