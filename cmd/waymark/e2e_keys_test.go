package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2EKeys runs three voters and an edge as real processes and drives
// issue 12's scoped API keys through them: keys made by the operator CLI
// and by the public API, scope refusals on every node (a links:read key
// cannot create a link, a stats:read key reads stats but not links), the
// last-used time flushed through the log, and revocations timed on every
// node until each answers 401.
func TestE2EKeys(t *testing.T) {
	c := newCluster(t)
	// A one-second flush so last_used_at shows within the test.
	all := c.threeVotersAndEdge([]string{"--key-use-flush", "1s"}, "--key-use-flush", "1s")
	base := func(n string) string { return "http://" + c.nodes[n].http }
	// Stats are answered on the aggregator (v1) and proxied by e1, the
	// one node given --aggregator-url; v2 and v3 have none.
	statsNodes := []string{"v1", "e1"}
	aliceID, alice := createOwnerJSON(t, c, "v2", "alice")
	_, bob := createOwnerJSON(t, c, "v3", "bob")
	r := do(t, "POST", base("v1")+"/v1/links", alice, `{"url":"https://alice.example/one"}`)
	if r.status != 201 {
		t.Fatalf("alice's create with the key of `owners create`: %d %s", r.status, r.body)
	}
	code := r.json(t)["code"].(string)

	// makeKey makes a key through the public API of node with the key
	// `by`, retrying while the cluster answers 503.
	makeKey := func(t *testing.T, node, by, body string) (secret, id string) {
		t.Helper()
		var r response
		waitFor(t, "a key create to be accepted", 30*time.Second, func() bool {
			r = do(t, "POST", base(node)+"/v1/keys", by, body)
			return r.status != 503
		})
		if r.status != 201 {
			t.Fatalf("POST /v1/keys %s through %s: %d %s", body, node, r.status, r.body)
		}
		m := r.json(t)
		return m["key"].(string), m["id"].(string)
	}
	// answers waits until key gets status for method path on every node:
	// a key made through one node is found on the others (applied, or
	// asked of the leader).
	answers := func(t *testing.T, nodes []string, key, method, path, body string, status int) {
		t.Helper()
		for _, n := range nodes {
			waitFor(t, fmt.Sprintf("%s %s on %s to answer %d", method, path, n, status), 10*time.Second, func() bool {
				return do(t, method, base(n)+path, key, body).status == status
			})
		}
	}

	t.Run("operator CLI", func(t *testing.T) {
		// Flags after the subcommand, scopes repeated and comma-separated.
		out, errOut, exit := runCLI(t, c.env("e1"), "keys", "create", "--owner", aliceID, "--name", "ci deploy", "--scope", "links:read", "--scope", "stats:read,links:write")
		secret := strings.TrimSpace(out)
		if exit != 0 || !strings.HasPrefix(secret, "wm_") || len(secret) != 51 {
			t.Fatalf("keys create: exit %d %q %s", exit, out, errOut)
		}
		answers(t, all, secret, "POST", "/v1/links", `{"url":"https://alice.example/ci"}`, 201)
		answers(t, all, secret, "GET", "/v1/keys", "", 403) // no keys:write

		var keys []struct {
			ID     string   `json:"id"`
			Name   string   `json:"name"`
			Scopes []string `json:"scopes"`
			Owner  string   `json:"owner"`
		}
		// v3 lists from its own replica: wait until it applied the key.
		waitFor(t, "keys list on v3 to show the new key", 10*time.Second, func() bool {
			out, errOut, exit = runCLI(t, c.env("v3"), "keys", "list", "--owner", aliceID, "-format", "json")
			if exit != 0 || json.Unmarshal([]byte(out), &keys) != nil {
				t.Fatalf("keys list: exit %d %s %s", exit, out, errOut)
			}
			return len(keys) == 2
		})
		byName := map[string][]string{}
		for _, k := range keys {
			byName[k.Name] = k.Scopes
			if k.Owner != aliceID {
				t.Errorf("key %s lists owner %q; want %s", k.ID, k.Owner, aliceID)
			}
		}
		if len(keys) != 2 || len(byName["default"]) != 6 || strings.Join(byName["ci deploy"], ",") != "links:read,links:write,stats:read" {
			t.Fatalf("keys list: %s", out)
		}
		out, _, exit = runCLI(t, c.env("v1"), "keys", "list", "--owner", aliceID)
		if exit != 0 || !strings.Contains(out, "ci deploy") || !strings.Contains(out, "LAST USED") {
			t.Fatalf("keys list table: exit %d\n%s", exit, out)
		}
		// Bad command lines and unknown ids.
		if _, _, exit := runCLI(t, c.env("v1"), "keys", "create", "--owner", aliceID, "--name", "x", "--scope", "links:admin"); exit != 2 {
			t.Errorf("keys create with an unknown scope: exit %d; want 2", exit)
		}
		if _, _, exit := runCLI(t, c.env("v1"), "keys", "create", "--owner", aliceID, "--name", "x"); exit != 2 {
			t.Errorf("keys create without a scope: exit %d; want 2", exit)
		}
		if _, errOut, exit := runCLI(t, c.env("v1"), "keys", "create", "--owner", "nobody", "--name", "x", "--scope", "links:read"); exit != 1 || !strings.Contains(errOut, "404") {
			t.Errorf("keys create for an unknown owner: exit %d %s; want 1 and a 404", exit, errOut)
		}
		if _, errOut, exit := runCLI(t, c.env("v1"), "keys", "revoke", "0123456789abcdef"); exit != 1 || !strings.Contains(errOut, "404") {
			t.Errorf("keys revoke of an unknown id: exit %d %s; want 1 and a 404", exit, errOut)
		}
		// The admin API refuses what the CLI would not send.
		tok := readKey(t, filepath.Join(c.nodes["v2"].dataDir, "operator-token"))
		admin := "http://" + c.nodes["v2"].admin
		for body, want := range map[string]int{
			`{"owner":"` + aliceID + `","name":"x","scopes":["links:read"],"extra":1}`: 400,
			`{"owner":"` + aliceID + `","name":"x","scopes":[]}`:                       400,
			`{"name":"x","scopes":["links:read"]}`:                                     400,
			`{"owner":"` + aliceID + `","name":"","scopes":["links:read"]}`:            400,
		} {
			if r := do(t, "POST", admin+"/v1/keys", tok, body); r.status != want {
				t.Errorf("admin POST /v1/keys %s: %d %s; want %d", body, r.status, r.body, want)
			}
		}
		if r := do(t, "GET", admin+"/v1/keys", tok, ""); r.status != 400 {
			t.Errorf("admin GET /v1/keys without an owner: %d; want 400", r.status)
		}
		if r := do(t, "POST", admin+"/v1/keys", "wrong-token", `{"owner":"`+aliceID+`","name":"x","scopes":["links:read"]}`); r.status != 401 {
			t.Errorf("admin POST /v1/keys with a wrong token: %d; want 401", r.status)
		}
	})

	t.Run("scope refusals", func(t *testing.T) {
		reader, _ := makeKey(t, "v3", alice, `{"name":"reader","scopes":["links:read"]}`)
		stats, _ := makeKey(t, "e1", alice, `{"name":"stats","scopes":["stats:read"]}`)
		answers(t, all, reader, "GET", "/v1/links/"+code, "", 200)
		answers(t, statsNodes, stats, "GET", "/v1/links/"+code+"/stats", "", 200)
		for _, n := range all {
			r := do(t, "POST", base(n)+"/v1/links", reader, `{"url":"https://alice.example/refused"}`)
			if r.status != 403 || !strings.Contains(string(r.body), "/problems/insufficient-scope") || !strings.Contains(string(r.body), "links:write") {
				t.Errorf("%s: a links:read key creating a link: %d %s; want 403 insufficient-scope naming links:write", n, r.status, r.body)
			}
			if r := do(t, "GET", base(n)+"/v1/links", stats, ""); r.status != 403 || !strings.Contains(string(r.body), "links:read") {
				t.Errorf("%s: a stats:read key listing links: %d %s; want 403 naming links:read", n, r.status, r.body)
			}
			// Refused on every node, before any aggregator is asked.
			if r := do(t, "GET", base(n)+"/v1/links/"+code+"/stats", reader, ""); r.status != 403 {
				t.Errorf("%s: a links:read key reading stats: %d %s; want 403", n, r.status, r.body)
			}
			if r := do(t, "POST", base(n)+"/v1/keys", reader, `{"name":"x","scopes":["links:read"]}`); r.status != 403 {
				t.Errorf("%s: a key without keys:write making a key: %d; want 403", n, r.status)
			}
		}
		// keys:write cannot grant more than its own scopes.
		maker, _ := makeKey(t, "v1", alice, `{"name":"maker","scopes":["keys:write","links:read"]}`)
		answers(t, all, maker, "GET", "/v1/keys", "", 200)
		r := do(t, "POST", base("e1")+"/v1/keys", maker, `{"name":"more","scopes":["links:write"]}`)
		if r.status != 403 || !strings.Contains(string(r.body), "links:write") {
			t.Fatalf("a grant beyond the key's scopes: %d %s; want 403 naming links:write", r.status, r.body)
		}
		makeKey(t, "e1", maker, `{"name":"sub","scopes":["links:read"]}`)
		// Another owner cannot see or revoke alice's keys.
		r = do(t, "GET", base("v2")+"/v1/keys", bob, "")
		if r.status != 200 || strings.Contains(string(r.body), "reader") {
			t.Fatalf("bob's key list: %d %s", r.status, r.body)
		}
	})

	t.Run("last used", func(t *testing.T) {
		t0 := time.Now().UTC()
		used, usedID := makeKey(t, "v2", alice, `{"name":"used","scopes":["links:read"]}`)
		answers(t, all, used, "GET", "/v1/links", "", 200) // a use on every node
		var last string
		waitFor(t, "last_used_at in GET /v1/keys", 20*time.Second, func() bool {
			r := do(t, "GET", base("v3")+"/v1/keys", alice, "")
			var list struct {
				Keys []struct {
					ID         string  `json:"id"`
					LastUsedAt *string `json:"last_used_at"`
				} `json:"keys"`
			}
			json.Unmarshal(r.body, &list)
			for _, k := range list.Keys {
				if k.ID == usedID && k.LastUsedAt != nil {
					last = *k.LastUsedAt
					return true
				}
			}
			return false
		})
		at, err := time.Parse(time.RFC3339, last)
		if err != nil || at.Second() != 0 || at.Before(t0.Truncate(time.Minute)) || at.After(time.Now()) {
			t.Fatalf("last_used_at %q: want a whole minute between %v and now (%v)", last, t0.Truncate(time.Minute), err)
		}
		t.Logf("last_used_at %s (key made at %s)", last, t0.Format(time.RFC3339))
	})

	t.Run("revocation", func(t *testing.T) {
		unauthorized := func(key string) func(string) bool {
			return func(n string) bool { return do(t, "GET", base(n)+"/v1/links", key, "").status == 401 }
		}
		var times []time.Duration
		via := []string{"e1", "v1", "v2", "v3", "e1", "v3", "v2", "v1", "e1", "v3"}
		for round, node := range via {
			secret, id := makeKey(t, all[round%len(all)], alice, fmt.Sprintf(`{"name":"round %d","scopes":["links:read"]}`, round))
			// Every node has the key cached before the revoke.
			answers(t, all, secret, "GET", "/v1/links", "", 200)
			for _, n := range all {
				do(t, "GET", base(n)+"/v1/links", secret, "")
			}
			t0 := time.Now()
			if round%2 == 0 {
				r := do(t, "DELETE", base(node)+"/v1/keys/"+id, alice, "")
				if r.status != 204 {
					t.Fatalf("round %d: DELETE /v1/keys/%s through %s: %d %s", round, id, node, r.status, r.body)
				}
			} else if out, errOut, exit := runCLI(t, c.env(node), "keys", "revoke", id); exit != 0 || !strings.Contains(out, "revoked key "+id) {
				t.Fatalf("round %d: keys revoke through %s: exit %d %s%s", round, node, exit, out, errOut)
			}
			times = append(times, timeEveryNode(t, all, t0, fmt.Sprintf("round %d: revocation through %s", round, node), unauthorized(secret))...)
		}
		t.Logf("revocation seen on every node (from the revoke's start, %d samples): p50 %v, p99 %v, max %v",
			len(times), pct(times, 50), pct(times, 99), pct(times, 100))
	})

	// The key of `owners create` still has every scope after all this.
	if r := do(t, "GET", base("e1")+"/v1/keys", alice, ""); r.status != 200 {
		t.Fatalf("the owner's first key listing keys: %d %s", r.status, r.body)
	}
}
