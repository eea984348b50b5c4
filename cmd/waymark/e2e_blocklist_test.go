package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestE2EBlocklist runs three voters and an edge as real processes:
// imports a generated hosts file of 10,000 entries through the CLI
// binary (from the edge, so every batch is forwarded to the leader),
// checks creates to imported hosts are refused with 422 on every node,
// that existing links to them, cached on every node, stop redirecting
// everywhere, and measures how long a `blocklist add` takes to stop a
// cached link on each node.
func TestE2EBlocklist(t *testing.T) {
	c := newCluster(t)
	all := c.threeVotersAndEdge(nil)
	key := c.createOwner("v1", "alice")
	e1 := "http://" + c.nodes["e1"].http
	create := func(dest string) string {
		t.Helper()
		r := do(t, "POST", e1+"/v1/links", key, fmt.Sprintf(`{"url":%q}`, dest))
		if r.status != 201 {
			t.Fatalf("create %s: %d %s", dest, r.status, r.body)
		}
		return r.json(t)["code"].(string)
	}
	// warm puts a link in every node's redirect cache (the second GET is
	// a hit) and checks it redirects.
	warm := func(code, dest string) {
		t.Helper()
		for _, n := range all {
			waitFor(t, code+" redirecting on "+n, 10*time.Second, func() bool { return resolves(t, c.nodes[n], code, dest) })
			if !resolves(t, c.nodes[n], code, dest) {
				t.Fatalf("%s stopped redirecting on %s before any block", code, n)
			}
		}
	}

	// Links made before the import, to hosts in the first and last batch.
	firstDest, lastDest, fineDest := "https://www.feed-17.example/a", "https://feed-9999.example/b?x=1", "https://fine.example/"
	first, last, fine := create(firstDest), create(lastDest), create(fineDest)
	for code, dest := range map[string]string{first: firstDest, last: lastDest, fine: fineDest} {
		warm(code, dest)
	}
	hitsBefore := metricValue(t, c.nodes["e1"], "waymark_edge_cache_hits_total")

	// A generated hosts file: 10,000 distinct entries among comments,
	// the usual localhost lines and repeats.
	var b strings.Builder
	b.WriteString("# generated threat feed\n127.0.0.1 localhost\n::1 ip6-localhost\n")
	for i := range 10000 {
		fmt.Fprintf(&b, "0.0.0.0 feed-%d.example\n", i)
		if i%100 == 0 {
			fmt.Fprintf(&b, "# section %d\n0.0.0.0 FEED-%d.example.\n", i/100, i)
		}
	}
	file := filepath.Join(t.TempDir(), "feed.hosts")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, errOut, code := runCLI(t, c.env("e1"), "blocklist", "import", file, "--format", "hosts", "--reason", "e2e feed")
	importTook := time.Since(start)
	if code != 0 {
		t.Fatalf("blocklist import: exit %d\n%s\n%s\n%s", code, out, errOut, c.nodes["e1"].logs())
	}
	if !strings.HasPrefix(out, "imported 10000 entries from "+file+" in 10 batches (0 lines skipped)") {
		t.Fatalf("import summary %q: want 10000 entries in 10 batches, none skipped", out)
	}
	if !strings.Contains(errOut, "imported 10000/10000 entries (10 batches)") || !strings.Contains(errOut, "imported 1000/10000") {
		t.Errorf("progress line missing from stderr: %q", errOut)
	}
	t.Logf("import of 10,000 entries in 10 batches through e1: %v", importTook)

	// Existing, cached links to imported hosts stop on every node.
	for _, code := range []string{first, last} {
		times := stopTimes(t, c, all, code, time.Now())
		t.Logf("link %s stopped after the import returned: %v", code, times)
	}
	for _, n := range all {
		if !resolves(t, c.nodes[n], fine, fineDest) {
			t.Errorf("a link to a host not on the list stopped on %s", n)
		}
	}
	if hits := metricValue(t, c.nodes["e1"], "waymark_edge_cache_hits_total"); hits <= hitsBefore {
		t.Errorf("e1 cache hits %v -> %v: the blocked answers did not come from its cache", hitsBefore, hits)
	}

	// Creates and edits to imported hosts are refused with 422 everywhere.
	for _, n := range all {
		base := "http://" + c.nodes[n].http
		for _, dest := range []string{"https://feed-5000.example/", "https://a.b.FEED-42.example./x"} {
			r := do(t, "POST", base+"/v1/links", key, fmt.Sprintf(`{"url":%q}`, dest))
			if r.status != 422 || !strings.Contains(string(r.body), "destination-blocked") || !strings.Contains(string(r.body), "e2e feed") {
				t.Errorf("create %s on %s: %d %s; want 422 destination-blocked", dest, n, r.status, r.body)
			}
		}
		if r := do(t, "PATCH", base+"/v1/links/"+fine, key, `{"url":"https://feed-1.example/"}`); r.status != 422 {
			t.Errorf("edit to an imported host on %s: %d %s; want 422", n, r.status, r.body)
		}
	}

	// The list holds exactly the import.
	out, _, code = runCLI(t, c.env("v2"), "blocklist", "list", "-format", "json")
	var listed []struct{ Entry, Kind, Reason string }
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 10000 || listed[0].Kind != "block" || listed[0].Reason != "e2e feed" {
		t.Fatalf("blocklist list: exit %d, %d entries (first %+v)", code, len(listed), listed[:min(1, len(listed))])
	}

	// The IPv4-mapped bypass, through the CLI's add: a CIDR entry refuses
	// the mapped spelling at create and stops an existing link to it.
	ipDest := "http://[::ffff:10.77.0.5]:8080/x"
	ipLink := create(ipDest)
	warm(ipLink, ipDest)
	if _, errOut, code := runCLI(t, c.env("v3"), "blocklist", "add", "10.77.0.0/16", "--reason", "bypass test"); code != 0 {
		t.Fatalf("blocklist add: exit %d %s", code, errOut)
	}
	stopTimes(t, c, all, ipLink, time.Now())
	if r := do(t, "POST", e1+"/v1/links", key, `{"url":"http://[::ffff:10.77.1.2]/"}`); r.status != 422 {
		t.Errorf("create to a mapped address in the blocked prefix: %d %s; want 422", r.status, r.body)
	}

	// Propagation of `blocklist add` to cached links: ten rounds, each a
	// fresh host with a link cached on every node, timed per node from
	// before the CLI starts until the node answers 410.
	var samples, afterAck []time.Duration
	for round := range 10 {
		host := fmt.Sprintf("round-%d.example", round)
		dest := "https://" + host + "/p"
		code := create(dest)
		warm(code, dest)
		via := all[round%len(all)]
		t0 := time.Now()
		if _, errOut, rc := runCLI(t, c.env(via), "blocklist", "add", host, "--reason", "round"); rc != 0 {
			t.Fatalf("blocklist add through %s: exit %d %s", via, rc, errOut)
		}
		ack := time.Since(t0)
		times := stopTimes(t, c, all, code, t0)
		for _, n := range all {
			samples = append(samples, times[n])
			afterAck = append(afterAck, max(0, times[n]-ack))
		}
	}
	for _, s := range []struct {
		what string
		d    []time.Duration
	}{{"from CLI start", samples}, {"from the CLI's answer", afterAck}} {
		slices.Sort(s.d)
		t.Logf("blocklist add -> 410 on a cached link, %d node samples (4 nodes x 10 rounds, %s): p50 %v, p99 %v, max %v",
			len(s.d), s.what, s.d[len(s.d)/2], s.d[(len(s.d)*99+99)/100-1], s.d[len(s.d)-1])
	}

	// Bad input is refused and changes nothing.
	if _, _, code := runCLI(t, c.env("v1"), "blocklist", "add", "http://x.example/"); code != 2 {
		t.Errorf("blocklist add of a URL: exit %d; want 2", code)
	}
	if _, _, code := runCLI(t, c.env("v1"), "blocklist", "import", file, "--format", "csv"); code != 2 {
		t.Errorf("blocklist import --format csv: exit %d; want 2", code)
	}
	env := c.env("v2")
	token := strings.TrimPrefix(env[1], "WAYMARK_TOKEN=")
	admin := "http://" + c.nodes["v2"].admin + "/v1/blocklist"
	for _, body := range []string{`{"add":[{"entry":"ok.example","kind":"nope"}]}`, `{"add":[{"entry":"a b"}]}`, `{}`, `{"remove":"x"}`,
		`{"add":[{"entry":"ok.example","reason":"line
break"}]}`} {
		if r := do(t, "POST", admin, token, body); r.status != 400 || !strings.Contains(r.header.Get("Content-Type"), "problem+json") {
			t.Errorf("POST %s: %d %s; want a 400 problem", body, r.status, r.body)
		}
	}
	if r := do(t, "GET", admin+"?limit=2", token, ""); r.status != 200 || !strings.Contains(string(r.body), `"next"`) || !strings.Contains(string(r.body), `"total": 10011`) {
		t.Errorf("GET ?limit=2: %d %s; want a page with next and total 10011", r.status, r.body)
	}

	// Removing the entry brings the link back everywhere.
	if _, errOut, code := runCLI(t, c.env("e1"), "blocklist", "remove", "*.feed-17.example"); code != 0 {
		t.Fatalf("blocklist remove: exit %d %s", code, errOut)
	}
	for _, n := range all {
		waitFor(t, first+" redirecting again on "+n, 10*time.Second, func() bool { return resolves(t, c.nodes[n], first, firstDest) })
	}
}

// stopTimes polls every node concurrently until code answers 410, and
// returns how long after since each took; a node still redirecting after
// a generous deadline fails the test.
func stopTimes(t *testing.T, c *cluster, nodes []string, code string, since time.Time) map[string]time.Duration {
	t.Helper()
	const deadline = 10 * time.Second
	var mu sync.Mutex
	times := map[string]time.Duration{}
	var failed []string
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			url := "http://" + c.nodes[n].http + "/" + code
			for {
				resp, err := noRedirect.Get(url)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == 410 {
						mu.Lock()
						times[n] = time.Since(since)
						mu.Unlock()
						return
					}
				}
				if time.Since(since) > deadline {
					mu.Lock()
					failed = append(failed, n)
					mu.Unlock()
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("link %s still not blocked after %v on %v", code, deadline, failed)
	}
	return times
}
