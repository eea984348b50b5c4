package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Region slots are claimed explicitly. A voter that forms the cluster
// claims its own region; an edge started with another --region serves but
// generates no codes, and claims nothing, until `waymark regions add`.
// Flags work before and after the positional argument.
func TestE2ERegionsClaimedExplicitly(t *testing.T) {
	c := newCluster(t)
	_, e1, key := c.voterAndEdge("eu", "alice")

	regions := func(via string) []map[string]any {
		out, errOut, code := runCLI(t, c.env(via), "regions", "list", "-format", "json")
		if code != 0 {
			t.Fatalf("regions list: exit %d %s", code, errOut)
		}
		var rs []map[string]any
		if err := json.Unmarshal([]byte(out), &rs); err != nil {
			t.Fatalf("regions list output: %v: %s", err, out)
		}
		return rs
	}
	if rs := regions("v1"); len(rs) != 1 || rs[0]["name"] != "us" {
		t.Fatalf("regions after bootstrap: got %v; want only us", rs)
	}

	// The edge of an unclaimed region refuses to generate codes, clearly.
	e1url := "http://" + e1.http + "/v1/links"
	waitFor(t, "e1 to know the owner", 20*time.Second, func() bool {
		return do(t, "POST", e1url, key, `{"url":"https://dest.example/a"}`).status != 401
	})
	r := do(t, "POST", e1url, key, `{"url":"https://dest.example/a"}`)
	if r.status != 503 || !strings.Contains(string(r.body), "waymark regions add") || !strings.Contains(string(r.body), "was not made") {
		t.Fatalf("create in an unclaimed region: got %d %s; want 503 naming `waymark regions add`", r.status, r.body)
	}
	if !strings.Contains(e1.logs(), "region is not claimed") {
		t.Errorf("e1 did not log that its region is not claimed")
	}
	if rs := regions("v1"); len(rs) != 1 {
		t.Fatalf("regions after refused creates: got %v; want only us (no slot claimed by a create)", rs)
	}

	// The operator claims it through the edge; flags after the name.
	out, errOut, code := runCLI(t, c.env("e1"), "regions", "add", "eu", "-format", "json")
	if code != 0 || !strings.Contains(out, `"claimed": true`) || !strings.Contains(out, `"slot": 1`) {
		t.Fatalf("regions add eu: exit %d %s %s", code, out, errOut)
	}
	out, _, code = runCLI(t, c.env("v1"), "regions", "add", "-format", "json", "eu")
	if code != 0 || !strings.Contains(out, `"claimed": false`) {
		t.Fatalf("regions add eu again: exit %d %s; want claimed false", code, out)
	}
	if out, _, code := runCLI(t, c.env("v1"), "regions", "add", "bad name"); code != 1 || out != "" {
		t.Errorf("regions add with a space: exit %d %q; want 1", code, out)
	}
	out, _, code = runCLI(t, c.env("v1"), "regions", "list")
	if code != 0 || !strings.Contains(out, "eu") || !strings.Contains(out, "us") {
		t.Fatalf("regions list table: exit %d\n%s", code, out)
	}
	r = do(t, "POST", e1url, key, `{"url":"https://dest.example/b"}`)
	if r.status != 201 {
		t.Fatalf("create after the claim: got %d %s", r.status, r.body)
	}
}
