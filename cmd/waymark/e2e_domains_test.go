package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// doHost sends a request with its own Host header (the address it dials
// stays the node's).
func doHost(t *testing.T, method, base, host, path, key, body string) response {
	t.Helper()
	req := newRequest(t, method, base+path, key, body)
	req.Host = host
	return roundTrip(t, noRedirect, req)
}

// owner creates an owner through the CLI and returns its id and key.
func e2eOwner(t *testing.T, c *cluster, via, name string) (id, key string) {
	t.Helper()
	out, errOut, code := runCLI(t, c.env(via), "owners", "create", name, "-format", "json")
	var o struct {
		ID     string `json:"id"`
		APIKey string `json:"api_key"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &o) != nil || o.ID == "" || !strings.HasPrefix(o.APIKey, "wm_") {
		t.Fatalf("owners create %s: exit %d %q %q", name, code, out, errOut)
	}
	return o.ID, o.APIKey
}

// TestE2EDomains runs three voters and an edge as real processes. Alice
// registers go.acme.com through the edge (pending: her creates on it are
// refused), the operator approves it and adds a domain for Bob through
// the CLI; the alias "launch" then names three links (go.acme.com, Bob's
// domain, the default domain), and each resolves to its own destination
// on every node by Host. It measures how long after the create's answer
// each node serves the custom-domain link, and checks the refusals: an
// unknown Host, another owner's domain, an unapproved one.
func TestE2EDomains(t *testing.T) {
	c := newCluster(t)
	all := c.threeVotersAndEdge(nil)
	_, alice := e2eOwner(t, c, "v1", "alice")
	bobID, bob := e2eOwner(t, c, "v2", "bob")
	e1 := "http://" + c.nodes["e1"].http

	// Alice registers go.acme.com through the edge: pending.
	r := do(t, "POST", e1+"/v1/domains", alice, `{"domain":"Go.Acme.com"}`)
	if r.status != 201 || r.json(t)["status"] != "pending" || r.json(t)["domain"] != "go.acme.com" {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	for _, bad := range []string{`"go.acme.com:8443"`, `"10.0.0.1"`, `"localhost"`} {
		if r := do(t, "POST", e1+"/v1/domains", alice, `{"domain":`+bad+`}`); r.status != 400 || !strings.Contains(string(r.body), "invalid-domain") {
			t.Errorf("register %s: %d %s; want 400 invalid-domain", bad, r.status, r.body)
		}
	}
	if r := do(t, "POST", e1+"/v1/domains", bob, `{"domain":"go.acme.com"}`); r.status != 409 {
		t.Errorf("bob registers alice's domain: %d %s; want 409", r.status, r.body)
	}
	// Unapproved: refused on every node.
	for _, n := range all {
		base := "http://" + c.nodes[n].http
		var r response
		waitFor(t, "the pending domain known on "+n, 10*time.Second, func() bool {
			r = do(t, "POST", base+"/v1/links", alice, `{"url":"https://acme.example/x","domain":"go.acme.com"}`)
			return r.status != 403 || strings.Contains(string(r.body), "domain-not-approved")
		})
		if r.status != 403 || !strings.Contains(string(r.body), "domain-not-approved") {
			t.Fatalf("create on the pending domain via %s: %d %s; want 403 domain-not-approved", n, r.status, r.body)
		}
	}

	// The operator approves it (through a follower) and adds Bob's.
	if out, errOut, code := runCLI(t, c.env("v3"), "domains", "approve", "go.acme.com"); code != 0 || !strings.Contains(out, "approved") {
		t.Fatalf("domains approve: exit %d %q %q", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, c.env("e1"), "domains", "add", "links.bob.example", "--owner", bobID); code != 0 || !strings.Contains(out, "approved") {
		t.Fatalf("domains add: exit %d %q %q", code, out, errOut)
	}
	if _, _, code := runCLI(t, c.env("v1"), "domains", "add", "x.example"); code != 2 {
		t.Errorf("domains add without --owner: exit %d; want 2", code)
	}
	out, _, code := runCLI(t, c.env("v2"), "domains", "list", "-format", "json")
	var listed []struct{ Domain, Owner, Status string }
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 2 ||
		listed[0].Domain != "go.acme.com" || listed[0].Status != "approved" || listed[1].Domain != "links.bob.example" || listed[1].Owner != bobID {
		t.Fatalf("domains list: exit %d %s", code, out)
	}

	// Bob may not create on Alice's domain; nobody on an unknown one.
	waitFor(t, "go.acme.com approved on e1", 10*time.Second, func() bool {
		r := do(t, "POST", e1+"/v1/links", bob, `{"url":"https://bob.example/x","domain":"go.acme.com"}`)
		return strings.Contains(string(r.body), "domain-forbidden")
	})
	if r := do(t, "POST", e1+"/v1/links", alice, `{"url":"https://a.example/","domain":"nobody.example"}`); r.status != 403 || !strings.Contains(string(r.body), "domain-forbidden") {
		t.Errorf("create on an unknown domain: %d %s", r.status, r.body)
	}

	// One alias, three links.
	type link struct{ host, dest, short string }
	links := []link{
		{"go.acme.com", "https://acme.example/spring-launch", "http://go.acme.com/launch"},
		{"links.bob.example", "https://bob.example.org/launch", "http://links.bob.example/launch"},
		{"", "https://default.example/launch", e1 + "/launch"},
	}
	// Warm a kept-alive connection to every node, so the times below
	// measure replication rather than the first dial.
	for _, n := range all {
		for range 4 {
			do(t, "GET", "http://"+c.nodes[n].http+"/healthz", "", "")
		}
	}
	var created time.Time
	for _, i := range []int{1, 2, 0} { // go.acme.com's last: its times start at its answer
		l := links[i]
		key, body := alice, fmt.Sprintf(`{"url":%q,"alias":"launch","domain":%q}`, l.dest, l.host)
		if l.host == "" {
			body = fmt.Sprintf(`{"url":%q,"alias":"launch"}`, l.dest)
		} else if i == 1 {
			key = bob
		}
		var r response
		waitFor(t, "create on "+l.host, 10*time.Second, func() bool {
			r = do(t, "POST", e1+"/v1/links", key, body)
			return r.status != 403 // the edge may not have applied the approval yet
		})
		if r.status != 201 || r.json(t)["short_url"] != l.short || r.json(t)["code"] != "launch" {
			t.Fatalf("create launch on %q: %d %s", l.host, r.status, r.body)
		}
		if i == 0 {
			created = time.Now()
		}
	}
	if r := do(t, "POST", e1+"/v1/links", alice, `{"url":"https://x.example/","alias":"launch","domain":"go.acme.com"}`); r.status != 409 {
		t.Errorf("second launch on go.acme.com: %d %s; want 409", r.status, r.body)
	}

	// go.acme.com/launch on every node, polled from the create's answer.
	var mu sync.Mutex
	times := map[string]time.Duration{}
	var wg sync.WaitGroup
	for _, n := range all {
		wg.Go(func() {
			base := "http://" + c.nodes[n].http
			for time.Since(created) < 10*time.Second {
				req, _ := http.NewRequest("GET", base+"/launch", nil)
				req.Host = "go.acme.com"
				if resp, err := noRedirect.Do(req); err == nil {
					resp.Body.Close()
					if resp.StatusCode == 302 && resp.Header.Get("Location") == links[0].dest {
						mu.Lock()
						times[n] = time.Since(created)
						mu.Unlock()
						return
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if len(times) != len(all) {
		t.Fatalf("go.acme.com/launch resolved on %v only within 10 s", times)
	}
	var ds []time.Duration
	for _, d := range times {
		ds = append(ds, d)
	}
	t.Logf("go.acme.com/launch resolving after the create answered: %v (p50 %v, p99 %v)", times, percentile(ds, 0.5), percentile(ds, 0.99))

	// Each link on its own Host, on every node; unknown hosts 404.
	for _, n := range all {
		base := "http://" + c.nodes[n].http
		for _, l := range links {
			host := l.host
			if host == "" {
				host = c.nodes[n].http
			}
			var r response
			waitFor(t, host+"/launch on "+n, 10*time.Second, func() bool {
				r = doHost(t, "GET", base, host, "/launch", "", "")
				return r.status == 302
			})
			if got := r.header.Get("Location"); got != l.dest {
				t.Errorf("%s/launch on %s: Location %q; want %q", host, n, got, l.dest)
			}
		}
		r := doHost(t, "GET", base, "unknown.example", "/launch", "", "")
		if r.status != 404 || !strings.Contains(string(r.body), "does not serve short links") || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Errorf("unknown Host on %s: %d %q", n, r.status, r.body)
		}
	}

	// The link routes take ?domain=, on the edge too.
	r = do(t, "GET", e1+"/v1/links/launch?domain=go.acme.com", alice, "")
	if r.status != 200 || r.json(t)["url"] != links[0].dest || r.json(t)["domain"] != "go.acme.com" {
		t.Fatalf("GET ?domain=: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", e1+"/v1/links/launch?domain=links.bob.example", alice, ""); r.status != 404 {
		t.Errorf("alice reads bob's link: %d", r.status)
	}
	if r := do(t, "GET", e1+"/v1/links/launch", alice, ""); r.status != 200 || r.json(t)["url"] != links[2].dest {
		t.Errorf("GET without ?domain= is the default domain's: %d %s", r.status, r.body)
	}
	// Bulk items and an import land on the domain too, tags and all.
	r = do(t, "POST", e1+"/v1/links/bulk", alice, `{"links":[
		{"url":"https://acme.example/bulk","alias":"bulk-a","domain":"go.acme.com","tags":["Spring"]},
		{"url":"https://acme.example/again","alias":"launch","domain":"go.acme.com"},
		{"url":"https://acme.example/bob","domain":"links.bob.example"}]}`)
	var bulk struct {
		Results []struct {
			Status int `json:"status"`
			Link   *struct {
				ShortURL string   `json:"short_url"`
				Domain   string   `json:"domain"`
				Tags     []string `json:"tags"`
			} `json:"link"`
			Problem *struct {
				Type string `json:"type"`
			} `json:"problem"`
		} `json:"results"`
	}
	if r.status != 207 || json.Unmarshal(r.body, &bulk) != nil || len(bulk.Results) != 3 {
		t.Fatalf("bulk on the domain: %d %s", r.status, r.body)
	}
	if got := bulk.Results[0]; got.Status != 201 || got.Link == nil || got.Link.ShortURL != "http://go.acme.com/bulk-a" || got.Link.Domain != "go.acme.com" || fmt.Sprint(got.Link.Tags) != "[spring]" {
		t.Errorf("bulk item on go.acme.com: %s", r.body)
	}
	if got := bulk.Results[1]; got.Status != 409 || got.Problem == nil || got.Problem.Type != "/problems/alias-unavailable" {
		t.Errorf("bulk item taking go.acme.com/launch again: %s", r.body)
	}
	if got := bulk.Results[2]; got.Status != 403 || got.Problem == nil || got.Problem.Type != "/problems/domain-forbidden" {
		t.Errorf("bulk item on bob's domain: %s", r.body)
	}
	csv := filepath.Join(t.TempDir(), "bitly.csv")
	if err := os.WriteFile(csv, []byte("id,link,long_url,title,created_at,archived,tags,custom_bitlinks\n"+
		"bit.ly/imp1,https://bit.ly/imp1,https://acme.example/imported,Imported,2024-03-01T10:00:00+0000,false,,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runCLI(t, []string{"WAYMARK_URL=" + e1, "WAYMARK_API_KEY=" + alice}, "links", "import", csv, "--domain", "go.acme.com", "--progress", "none"); code != 0 {
		t.Fatalf("import --domain: exit %d %s %s", code, out, errOut)
	}
	for path, dest := range map[string]string{"/bulk-a": "https://acme.example/bulk", "/imp1": "https://acme.example/imported"} {
		waitFor(t, "go.acme.com"+path+" on e1", 10*time.Second, func() bool {
			r := doHost(t, "GET", e1, "go.acme.com", path, "", "")
			return r.status == 302 && r.header.Get("Location") == dest
		})
	}

	// The owner CLI names a custom-domain link DOMAIN/CODE, and shows its domain.
	var shown struct {
		Code, Domain, URL string
	}
	out, errOut, code := runCLI(t, []string{"WAYMARK_URL=" + e1, "WAYMARK_API_KEY=" + alice}, "links", "show", "go.acme.com/launch", "-format", "json")
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || shown.Code != "launch" || shown.Domain != "go.acme.com" || shown.URL != links[0].dest {
		t.Errorf("links show go.acme.com/launch: exit %d %s %s", code, out, errOut)
	}

	// Clicks are counted per link: 3 visits of go.acme.com/launch and 2
	// of the default domain's /launch, through e1 (which ships to v1, the
	// aggregator), with a browser's User-Agent (the polls above were Go's
	// client, counted as bots).
	visit := func(host string, n int) {
		for range n {
			req := newRequest(t, "GET", e1+"/launch", "", "")
			req.Host, req.Header["User-Agent"] = host, []string{firefox}
			if r := roundTrip(t, noRedirect, req); r.status != 302 {
				t.Fatalf("visit %s/launch: %d", host, r.status)
			}
		}
	}
	visit("go.acme.com", 3)
	visit(c.nodes["e1"].http, 2)
	now := time.Now().UTC()
	rng := "from=" + now.AddDate(0, 0, -1).Format(time.DateOnly) + "&to=" + now.AddDate(0, 0, 1).Format(time.DateOnly) + "&tz=UTC"
	clicks := func(query string) int {
		r := do(t, "GET", e1+"/v1/links/launch/stats?"+rng+query, alice, "")
		if r.status != 200 {
			t.Fatalf("stats %s: %d %s", query, r.status, r.body)
		}
		return int(r.json(t)["totals"].(map[string]any)["clicks"].(float64))
	}
	var dom, plain int
	waitFor(t, "the clicks in the link stats", 60*time.Second, func() bool {
		dom, plain = clicks("&domain=go.acme.com"), clicks("")
		return dom >= 3 && plain >= 2
	})
	if dom != 3 || plain != 2 {
		t.Errorf("stats: go.acme.com/launch %d clicks, /launch %d; want 3 and 2", dom, plain)
	}
	if r := do(t, "GET", e1+"/v1/links/launch/stats?domain=links.bob.example", alice, ""); r.status != 404 {
		t.Errorf("alice reads the stats of bob's launch: %d", r.status)
	}

	// The operator names a custom-domain link by its identifier.
	if out, errOut, code := runCLI(t, c.env("v2"), "links", "show", "go.acme.com/launch", "-format", "json"); code != 0 || !strings.Contains(out, links[0].dest) {
		t.Errorf("links show go.acme.com/launch: exit %d %q %q", code, out, errOut)
	}

	if r := do(t, "DELETE", e1+"/v1/links/launch?domain=go.acme.com", alice, ""); r.status != 204 {
		t.Fatalf("DELETE ?domain=: %d %s", r.status, r.body)
	}
	for _, n := range all {
		base := "http://" + c.nodes[n].http
		waitFor(t, "go.acme.com/launch gone on "+n, 10*time.Second, func() bool {
			return doHost(t, "GET", base, "go.acme.com", "/launch", "", "").status == 410
		})
		if r := doHost(t, "GET", base, c.nodes[n].http, "/launch", "", ""); r.status != 302 {
			t.Errorf("default-domain launch on %s after the domain one was deleted: %d", n, r.status)
		}
	}

	// Bob deletes his domain: it stops serving everywhere.
	if r := do(t, "DELETE", e1+"/v1/domains/links.bob.example", bob, ""); r.status != 204 {
		t.Fatalf("delete domain: %d %s", r.status, r.body)
	}
	for _, n := range all {
		base := "http://" + c.nodes[n].http
		waitFor(t, "links.bob.example unknown on "+n, 10*time.Second, func() bool {
			return doHost(t, "GET", base, "links.bob.example", "/launch", "", "").status == 404
		})
	}
	r = do(t, "GET", e1+"/v1/domains", bob, "")
	if r.status != 200 || strings.Contains(string(r.body), "links.bob.example") {
		t.Errorf("bob's domains after the delete: %d %s", r.status, r.body)
	}
}
