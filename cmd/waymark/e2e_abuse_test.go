package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestE2EAbuse runs three voters and an edge as real processes and drives
// issue 11's abuse tools through them: an owner suspended and unsuspended
// through the CLI (five rounds, each timed on every node until it answers
// the new state), the create limit of an API key on the edge with
// Retry-After, and the purge of a deleted link's destination on every
// replica with a tiny --purge-after while its alias stays reserved.
func TestE2EAbuse(t *testing.T) {
	c := newCluster(t)
	// The edge limits creates per key to 0.5/s with a burst of 5.
	all := c.threeVotersAndEdge([]string{"--purge-after", "3s"}, "--purge-after", "3s", "--create-rate-key", "0.5")
	base := func(n string) string { return "http://" + c.nodes[n].http }

	aliceID, alice := createOwnerJSON(t, c, "v2", "alice")
	_, bob := createOwnerJSON(t, c, "v3", "bob")
	var aliceLinks []string
	for i := range 3 {
		r := do(t, "POST", base("v2")+"/v1/links", alice, fmt.Sprintf(`{"url":"https://alice.example/%d"}`, i))
		if r.status != 201 {
			t.Fatalf("alice create %d: %d %s", i, r.status, r.body)
		}
		aliceLinks = append(aliceLinks, r.json(t)["code"].(string))
	}
	r := do(t, "POST", base("v2")+"/v1/links", bob, `{"url":"https://bob.example/"}`)
	if r.status != 201 {
		t.Fatalf("bob create: %d %s", r.status, r.body)
	}
	bobLink := r.json(t)["code"].(string)
	// Every node has the links in its cache before the suspension.
	for _, n := range all {
		waitFor(t, n+" to redirect every link", 10*time.Second, func() bool {
			for i, code := range aliceLinks {
				if !resolves(t, c.nodes[n], code, fmt.Sprintf("https://alice.example/%d", i)) {
					return false
				}
			}
			return resolves(t, c.nodes[n], bobLink, "https://bob.example/")
		})
	}

	t.Run("suspend", func(t *testing.T) {
		// suspended: every link of alice's answers 410, her key 401, bob's
		// link still redirects. lifted: the opposite for alice.
		suspended := func(n string) bool {
			for _, code := range aliceLinks {
				if r := do(t, "GET", base(n)+"/"+code, "", ""); r.status != 410 || r.header.Get("Location") != "" {
					return false
				}
			}
			return do(t, "GET", base(n)+"/v1/links", alice, "").status == 401 &&
				resolves(t, c.nodes[n], bobLink, "https://bob.example/")
		}
		lifted := func(n string) bool {
			for i, code := range aliceLinks {
				if !resolves(t, c.nodes[n], code, fmt.Sprintf("https://alice.example/%d", i)) {
					return false
				}
			}
			return do(t, "GET", base(n)+"/v1/links", alice, "").status == 200
		}
		var onTimes, offTimes []time.Duration
		via := []string{"v3", "e1", "v1", "v2", "e1"} // the CLI talks to any node, the edge too
		for round, node := range via {
			t0 := time.Now()
			out, errOut, code := runCLI(t, c.env(node), "owners", "suspend", aliceID, "--reason", "phishing campaign")
			if code != 0 || !strings.Contains(out, "suspended owner "+aliceID) || !strings.Contains(out, "phishing campaign") {
				t.Fatalf("round %d: owners suspend through %s: exit %d\n%s%s", round, node, code, out, errOut)
			}
			t.Logf("round %d: owners suspend through %s returned after %v", round, node, time.Since(t0).Round(time.Millisecond))
			onTimes = append(onTimes, timeEveryNode(t, all, t0, "suspension", suspended)...)

			t0 = time.Now()
			out, errOut, code = runCLI(t, c.env(node), "owners", "unsuspend", aliceID)
			if code != 0 || !strings.Contains(out, "is not suspended") {
				t.Fatalf("round %d: owners unsuspend through %s: exit %d\n%s%s", round, node, code, out, errOut)
			}
			offTimes = append(offTimes, timeEveryNode(t, all, t0, "unsuspension", lifted)...)
		}
		t.Logf("suspension seen on every node (from the CLI's start, %d samples): p50 %v, p99 %v, max %v", len(onTimes), pct(onTimes, 50), pct(onTimes, 99), pct(onTimes, 100))
		t.Logf("unsuspension seen on every node (%d samples): p50 %v, p99 %v, max %v", len(offTimes), pct(offTimes, 50), pct(offTimes, 99), pct(offTimes, 100))

		// Bad input changes nothing.
		if _, _, code := runCLI(t, c.env("v1"), "owners", "suspend", aliceID); code != 2 {
			t.Errorf("owners suspend without --reason: exit %d; want 2", code)
		}
		if out, errOut, code := runCLI(t, c.env("v1"), "owners", "suspend", "nobody", "--reason", "x"); code != 1 || !strings.Contains(errOut, "404") {
			t.Errorf("owners suspend of an unknown owner: exit %d %s%s; want 1 and a 404", code, out, errOut)
		}
		admin := func(n, path, body string) int {
			tok := readKey(t, filepath.Join(c.nodes[n].dataDir, "operator-token"))
			return do(t, "POST", "http://"+c.nodes[n].admin+path, tok, body).status
		}
		if got := admin("v1", "/v1/owners/"+aliceID+"/suspend", `{"reason":"  "}`); got != 400 {
			t.Errorf("admin suspend with a blank reason: %d; want 400", got)
		}
		if got := admin("v1", "/v1/owners/"+aliceID+"/suspend", `{"reason":"x","extra":1}`); got != 400 {
			t.Errorf("admin suspend with an unknown field: %d; want 400", got)
		}
		if !lifted("v1") {
			t.Error("alice's links stopped after refused commands")
		}

		// A restarted node loads the suspension from its store before it
		// serves; a snapshot restore brings the set back with the store.
		if _, errOut, code := runCLI(t, c.env("v1"), "owners", "suspend", aliceID, "--reason", "phishing campaign"); code != 0 {
			t.Fatalf("owners suspend: exit %d %s", code, errOut)
		}
		timeEveryNode(t, all, time.Now(), "suspension before the restart", suspended)
		backup := filepath.Join(t.TempDir(), "suspended.snap")
		if _, errOut, code := runCLI(t, c.env("v1"), "snapshot", "save", backup); code != 0 {
			t.Fatalf("snapshot save: exit %d %s", code, errOut)
		}
		c.nodes["e1"].stop(t)
		c.restart("e1")
		waitFor(t, "e1 ready after the restart", 60*time.Second, func() bool { return ready(t, c.nodes["e1"]) })
		if !suspended("e1") {
			t.Fatal("e1 redirects a suspended owner's links after a restart")
		}
		if m := do(t, "GET", base("e1")+"/metrics", "", ""); !strings.Contains(string(m.body), "\nwaymark_owners_suspended 1\n") {
			t.Error("e1 after the restart: waymark_owners_suspended is not 1")
		}
		if _, errOut, code := runCLI(t, c.env("e1"), "owners", "unsuspend", aliceID); code != 0 {
			t.Fatalf("owners unsuspend: exit %d %s", code, errOut)
		}
		timeEveryNode(t, all, time.Now(), "unsuspension before the restore", lifted)
		leader := c.leader("v1")
		if _, errOut, code := runCLI(t, c.env(leader), "snapshot", "restore", backup); code != 0 {
			t.Fatalf("snapshot restore on %s: exit %d %s", leader, code, errOut)
		}
		timeEveryNode(t, all, time.Now(), "suspension restored from the snapshot", suspended)
		if _, errOut, code := runCLI(t, c.env("v2"), "owners", "unsuspend", aliceID); code != 0 {
			t.Fatalf("owners unsuspend: exit %d %s", code, errOut)
		}
		timeEveryNode(t, all, time.Now(), "unsuspension after the restore", lifted)
	})

	t.Run("create rate limit", func(t *testing.T) {
		for i := range 5 {
			if r := do(t, "POST", base("e1")+"/v1/links", bob, fmt.Sprintf(`{"url":"https://bob.example/burst/%d"}`, i)); r.status != 201 {
				t.Fatalf("create %d of the burst of 5: %d %s", i, r.status, r.body)
			}
		}
		r := do(t, "POST", base("e1")+"/v1/links", bob, `{"url":"https://bob.example/over"}`)
		var p struct{ Type string }
		json.Unmarshal(r.body, &p)
		secs, _ := strconv.Atoi(r.header.Get("Retry-After"))
		// The bucket is empty but for what refilled during the five
		// creates: a token at 0.5/s is at most 2 s away.
		if r.status != 429 || p.Type != "/problems/rate-limited" || secs < 1 || secs > 2 {
			t.Fatalf("sixth create: %d Retry-After %q %s; want 429 rate-limited with Retry-After 1 or 2", r.status, r.header.Get("Retry-After"), r.body)
		}
		// Another node has its own buckets.
		if r := do(t, "POST", base("v1")+"/v1/links", bob, `{"url":"https://bob.example/elsewhere"}`); r.status != 201 {
			t.Errorf("create on v1 while e1 limits bob: %d %s", r.status, r.body)
		}
		t0 := time.Now()
		waitFor(t, "a create after Retry-After", time.Duration(secs+5)*time.Second, func() bool {
			return do(t, "POST", base("e1")+"/v1/links", bob, `{"url":"https://bob.example/after"}`).status == 201
		})
		t.Logf("Retry-After %d s; the next create went through after %v", secs, time.Since(t0).Round(time.Millisecond))
		m := do(t, "GET", base("e1")+"/metrics", "", "")
		if !strings.Contains(string(m.body), `waymark_api_create_rate_limited_total{limit="key"}`) {
			t.Errorf("e1 /metrics lacks the key refusal counter")
		}
	})

	t.Run("purge", func(t *testing.T) {
		r := do(t, "POST", base("v2")+"/v1/links", alice, `{"url":"https://alice.example/secret-destination","alias":"purge-me"}`)
		if r.status != 201 {
			t.Fatalf("create purge-me: %d %s", r.status, r.body)
		}
		if r := do(t, "DELETE", base("e1")+"/v1/links/purge-me", alice, ""); r.status != 204 {
			t.Fatalf("delete purge-me: %d %s", r.status, r.body)
		}
		deleted := time.Now()
		// Each node answers the owner's read from its own replica.
		urlOn := func(n, code string) (string, bool) {
			r := do(t, "GET", base(n)+"/v1/links/"+code, alice, "")
			if r.status != 200 {
				return "", false
			}
			u, _ := r.json(t)["url"].(string)
			return u, true
		}
		for _, n := range all {
			waitFor(t, n+" to purge the destination of purge-me", 30*time.Second, func() bool {
				u, ok := urlOn(n, "purge-me")
				return ok && u == ""
			})
			t.Logf("%s: purged %v after the delete (--purge-after 3s)", n, time.Since(deleted).Round(time.Millisecond))
			if u, _ := urlOn(n, aliceLinks[0]); u != "https://alice.example/0" {
				t.Errorf("%s: a live link's destination is %q after the purge", n, u)
			}
			if r := do(t, "GET", base(n)+"/purge-me", "", ""); r.status != 410 {
				t.Errorf("%s: GET /purge-me: %d; want 410", n, r.status)
			}
		}
		// The alias stays reserved, for every owner, and the link cannot
		// be brought back.
		for _, n := range all {
			r := do(t, "POST", base(n)+"/v1/links", bob, `{"url":"https://bob.example/x","alias":"purge-me"}`)
			var p struct{ Type string }
			json.Unmarshal(r.body, &p)
			if r.status != 409 || p.Type != "/problems/alias-unavailable" {
				t.Errorf("%s: create with the purged alias: %d %s; want 409 alias-unavailable", n, r.status, r.body)
			}
		}
		if r := do(t, "PATCH", base("v3")+"/v1/links/purge-me", alice, `{"status":"active"}`); r.status != 404 {
			t.Errorf("reactivate a purged link: %d %s; want 404", r.status, r.body)
		}
		// The audit trail names the destination no more either.
		out, errOut, code := runCLI(t, c.env("v3"), "links", "history", "purge-me", "-format", "json")
		if code != 0 || strings.Contains(out, "secret-destination") || !strings.Contains(out, `"purge"`) {
			t.Errorf("links history purge-me: exit %d, still names the destination or lacks the purge:\n%s%s", code, out, errOut)
		}
		// Every replica applied the purge itself: one link purged each.
		for _, n := range all {
			m := do(t, "GET", base(n)+"/metrics", "", "")
			if !strings.Contains(string(m.body), "\nwaymark_raft_links_purged_total 1\n") {
				t.Errorf("%s: waymark_raft_links_purged_total is not 1", n)
			}
		}
	})
}

// createOwnerJSON creates an owner through the CLI on node and returns its
// id and API key.
func createOwnerJSON(t *testing.T, c *cluster, node, name string) (id, key string) {
	t.Helper()
	out, errOut, code := runCLI(t, c.env(node), "owners", "create", name, "-format", "json")
	var o struct {
		ID     string `json:"id"`
		APIKey string `json:"api_key"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &o) != nil || o.ID == "" || !strings.HasPrefix(o.APIKey, "wm_") {
		t.Fatalf("owners create %s -format json: exit %d %s%s", name, code, out, errOut)
	}
	return o.ID, o.APIKey
}

// timeEveryNode polls every node at once until cond holds on it, failing
// at a generous deadline, and returns how long after t0 each got there.
func timeEveryNode(t *testing.T, nodes []string, t0 time.Time, what string, cond func(node string) bool) []time.Duration {
	t.Helper()
	const deadline = 10 * time.Second
	took := make([]time.Duration, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !cond(n) {
				if time.Since(t0) > deadline {
					took[i] = -1
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			took[i] = time.Since(t0)
		}()
	}
	wg.Wait()
	for i, d := range took {
		if d < 0 {
			t.Fatalf("%s not seen on %s within %v", what, nodes[i], deadline)
		}
	}
	t.Logf("%s: %v", what, fmtTimes(nodes, took))
	return took
}

func fmtTimes(nodes []string, took []time.Duration) string {
	parts := make([]string, len(nodes))
	for i := range nodes {
		parts[i] = nodes[i] + " " + took[i].Round(time.Millisecond).String()
	}
	return strings.Join(parts, ", ")
}

// pct is the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1].Round(time.Millisecond)
}
