package edge

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDecodeBulk checks the call-level refusals and one item's fields.
func TestDecodeBulk(t *testing.T) {
	for body, want := range map[string]string{
		``:                         "empty",
		`[]`:                       "must be a JSON object",
		`{"links":{}}`:             `"links" is required and must be an array`,
		`{"links":[]}`:             `"links" is empty`,
		`{"links":[],"extra":1}`:   `unknown field "extra"`,
		`{"links":[{"url":"x"},]}`: "not valid JSON",
	} {
		if _, _, err := decodeBulk([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v; want an error with %q", body, err, want)
		}
	}
	many := `{"links":[` + strings.Repeat(`{"url":"https://e/"},`, maxBulkItems) + `{"url":"https://e/"}]}`
	if _, tooMany, err := decodeBulk([]byte(many)); !tooMany || err == nil {
		t.Fatalf("%d items: tooMany %v, %v; want refused as too many", maxBulkItems+1, tooMany, err)
	}
	items, _, err := decodeBulk([]byte(`{"links":[{"url":"https://e/a","alias":"a-b","external_id":"src:1","redirect":301,"forward_query":false},{"url":"https://e/b","external_id":""}]}`))
	if err != nil || len(items) != 2 {
		t.Fatalf("got %d items, %v", len(items), err)
	}
	req, ext, err := decodeBulkItem(items[0])
	if err != nil || req.URL != "https://e/a" || req.Alias != "a-b" || ext != "src:1" || req.Redirect != 301 || !req.NoForwardQuery {
		t.Fatalf("item 0: %+v %q %v", req, ext, err)
	}
	if _, _, err := decodeBulkItem(items[1]); err == nil || !strings.Contains(err.Error(), "external_id") {
		t.Fatalf("item 1: got %v; want an empty external_id refused", err)
	}
	if _, _, err := decodeBulkItem(json.RawMessage(`{"url":"https://e/","external_id":"` + strings.Repeat("x", 257) + `"}`)); err == nil {
		t.Fatal("a 257-byte external_id was accepted")
	}
}

// FuzzDecodeBulk: any body decodes to at most maxBulkItems items or an
// error, and every item decodes to a request (a redirect set, an external
// id within bounds) or an error,
// without a panic.
func FuzzDecodeBulk(f *testing.F) {
	f.Add([]byte(`{"links":[{"url":"https://e/a","alias":"a-b","external_id":"src:1"},{"url":"ftp://x"},{"nope":1}]}`))
	f.Add([]byte(`{"links":[{"url":"https://e/a","expires_at":"2030-01-02T15:04:05Z","click_limit":3,"redirect":308,"forward_query":true}]}`))
	f.Add([]byte(`{"links":null}`))
	f.Add([]byte(`{"links":[1,"a",null,[]]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		items, tooMany, err := decodeBulk(body)
		if err != nil {
			if len(items) != 0 {
				t.Fatalf("error %v with %d items", err, len(items))
			}
			return
		}
		if tooMany || len(items) == 0 || len(items) > maxBulkItems {
			t.Fatalf("accepted %d items (tooMany %v)", len(items), tooMany)
		}
		for _, raw := range items {
			req, ext, err := decodeBulkItem(raw)
			if err == nil && (len(ext) > 256 || req.Redirect == 0) {
				t.Fatalf("item %s accepted as %+v %q", raw, req, ext)
			}
		}
	})
}
