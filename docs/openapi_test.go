package docs

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestOpenAPIJSONConverts(t *testing.T) {
	b, err := OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	paths, _ := doc["paths"].(map[string]any)
	link, _ := paths["/v1/links"].(map[string]any)
	post, _ := link["post"].(map[string]any)
	resp, _ := post["responses"].(map[string]any)
	if doc["openapi"] != "3.1.0" || resp["201"] == nil {
		t.Fatalf("converted document lacks openapi 3.1.0 or POST /v1/links 201: %.300s", b)
	}
}

// An unquoted status key (200:) is an integer key in YAML; the
// conversion refuses it rather than guessing.
func TestJSONValueRefusesNonStringKeys(t *testing.T) {
	_, err := jsonValue(map[string]any{"responses": map[any]any{200: "ok"}}, "")
	if err == nil || !strings.Contains(err.Error(), "quote it") {
		t.Fatalf("got %v; want a refusal of the integer key", err)
	}
	v, err := jsonValue(map[any]any{"a": []any{map[any]any{"b": 1}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(v); string(b) != `{"a":[{"b":1}]}` {
		t.Fatalf("got %s", b)
	}
}
