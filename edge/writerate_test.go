package edge

import "testing"

// A write rate under 0.5/s still lets one write through (the bucket
// holds at least one token), then refuses with 429 and Retry-After.
func TestSlowWriteRateAllowsOneWrite(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.WriteRate = 0.1 })
	if r := e.do("POST", "/v1/sites", keyAlice, `{"domain":"slow.example"}`); r.status != 201 {
		t.Fatalf("first write: %d %s", r.status, r.body)
	}
	r := e.do("POST", "/v1/sites", keyAlice, `{"domain":"slower.example"}`)
	if r.status != 429 || r.problem(t).Type != "/problems/rate-limited" || r.get("Retry-After") != "10" {
		t.Fatalf("second write: %d Retry-After %q %s", r.status, r.get("Retry-After"), r.body)
	}
}
