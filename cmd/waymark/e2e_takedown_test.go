package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// nodeAnswer is what one GET of a short link gave.
type nodeAnswer struct {
	status   int
	location string
	body     string
}

func getCode(base, code string) (nodeAnswer, error) {
	resp, err := noRedirect.Get(base + "/" + code)
	if err != nil {
		return nodeAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return nodeAnswer{resp.StatusCode, resp.Header.Get("Location"), string(b)}, err
}

// takedownState is what a link in a given state answers on every node,
// worked out from the issue: blocked 410 (warning page, no destination),
// legal block 451, review 200 (interstitial with a continue button),
// active 302 to the destination.
type takedownState struct {
	name string
	ok   func(a nodeAnswer) bool
}

func stateBlocked(dest string) takedownState {
	return takedownState{"blocked (410)", func(a nodeAnswer) bool {
		return a.status == 410 && a.location == "" && strings.Contains(a.body, "blocked") && !strings.Contains(a.body, dest)
	}}
}

func stateLegal() takedownState {
	return takedownState{"legal block (451)", func(a nodeAnswer) bool { return a.status == 451 && a.location == "" }}
}

func stateReview(dest string) takedownState {
	return takedownState{"review interstitial (200)", func(a nodeAnswer) bool {
		return a.status == 200 && a.location == "" && strings.Contains(a.body, `href="`+dest+`"`) && strings.Contains(a.body, "Continue")
	}}
}

func stateActive(dest string) takedownState {
	return takedownState{"redirect (302)", func(a nodeAnswer) bool { return a.status == 302 && a.location == dest }}
}

// pollAll polls every node at once until each answers want, failing at a
// generous deadline, and returns how long each took from t0.
func pollAll(t *testing.T, nodes map[string]*proc, code string, want takedownState, t0 time.Time) map[string]time.Duration {
	t.Helper()
	took, err := pollNodes(nodes, code, want, t0)
	if err != nil {
		t.Fatal(err)
	}
	return took
}

// pollNodes is pollAll for any goroutine: it reports a node that missed
// the deadline as an error.
func pollNodes(nodes map[string]*proc, code string, want takedownState, t0 time.Time) (map[string]time.Duration, error) {
	deadline := t0.Add(15 * time.Second)
	var mu sync.Mutex
	took := map[string]time.Duration{}
	last := map[string]nodeAnswer{}
	var wg sync.WaitGroup
	for name, p := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				a, err := getCode("http://"+p.http, code)
				if err == nil && want.ok(a) {
					mu.Lock()
					took[name] = time.Since(t0)
					mu.Unlock()
					return
				}
				mu.Lock()
				last[name] = a
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for name := range nodes {
		if _, ok := took[name]; !ok {
			return nil, fmt.Errorf("%s does not answer %s for %s within 15 s; last answer %d %q", name, want.name, code, last[name].status, last[name].location)
		}
	}
	return took, nil
}

// TestE2ETakedowns runs three voters and an edge as real processes. An
// operator blocks, legally blocks, reviews and restores a link through the
// CLI binary (addressed to a different node each time), and every node,
// each holding the link in its redirect cache, answers the new status; the
// time from issuing the command to each node's first new answer is
// recorded and reported as p50/p99. The owner cannot undo a block; the
// history (CLI and owner API) names the actor of every change; an edit of
// the destination shows the interstitial until an operator restores it;
// HEAD requests are not clicks.
func TestE2ETakedowns(t *testing.T) {
	c := newCluster(t)
	names := c.threeVotersAndEdge(nil)
	v1 := c.nodes["v1"]
	e1 := c.nodes["e1"]
	owner := func(name string) (id, key string) {
		out, _, code := runCLI(t, c.env("v2"), "owners", "create", name, "-format", "json")
		var o struct {
			ID     string `json:"id"`
			APIKey string `json:"api_key"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &o) != nil || !strings.HasPrefix(o.APIKey, "wm_") {
			t.Fatalf("owners create %s: exit %d %q", name, code, out)
		}
		return o.ID, o.APIKey
	}
	aliceID, alice := owner("alice")
	_, bob := owner("bob")

	edge := "http://" + e1.http
	dest := "https://dest.example/takedown?x=1"
	r := do(t, "POST", edge+"/v1/links", alice, `{"url":"`+dest+`"}`)
	if r.status != 201 {
		t.Fatalf("create through the edge: %d %s", r.status, r.body)
	}
	code := r.json(t)["code"].(string)
	// Every node answers the redirect, twice: the second from its cache.
	pollAll(t, c.nodes, code, stateActive(dest), time.Now())
	pollAll(t, c.nodes, code, stateActive(dest), time.Now())

	cli := func(via string, args ...string) string {
		t.Helper()
		out, errOut, exit := runCLI(t, c.env(via), args...)
		if exit != 0 {
			t.Fatalf("waymark %s (via %s): exit %d\n%s%s", strings.Join(args, " "), via, exit, out, errOut)
		}
		return out
	}
	var all, lastNode []time.Duration
	step := func(via string, want takedownState, args ...string) {
		t.Helper()
		// Poll from the moment the command is issued, beside the CLI.
		t0 := time.Now()
		var took map[string]time.Duration
		var pollErr error
		polled := make(chan struct{})
		go func() { defer close(polled); took, pollErr = pollNodes(c.nodes, code, want, t0) }()
		cli(via, args...)
		returned := time.Since(t0)
		<-polled
		if pollErr != nil {
			t.Fatal(pollErr)
		}
		var worst time.Duration
		parts := []string{}
		for _, n := range names {
			all = append(all, took[n])
			worst = max(worst, took[n])
			parts = append(parts, fmt.Sprintf("%s %v", n, took[n].Round(time.Millisecond)))
		}
		lastNode = append(lastNode, worst)
		t.Logf("%-28s via %s: CLI returned after %v; seen on %s", strings.Join(args[:2], " ")+" -> "+want.name, via, returned.Round(time.Millisecond), strings.Join(parts, ", "))
	}

	// Block, legal block, review, restore, through a different node's CLI
	// each time (the edge's admin API forwards to the leader too), five
	// rounds for enough samples.
	for round := 0; round < 5; round++ {
		via := func(i int) string { return names[(round+i)%len(names)] }
		step(via(0), stateBlocked("dest.example/takedown"), "links", "block", code, "--reason", fmt.Sprintf("phishing report %d", round))
		if round == 0 {
			// The owner cannot undo the block, through any route.
			for _, tt := range []struct{ method, body string }{
				{"PATCH", `{"status":"active"}`},
				{"PATCH", `{"url":"https://dest.example/other"}`},
				{"DELETE", ""},
			} {
				r := do(t, tt.method, edge+"/v1/links/"+code, alice, tt.body)
				if r.status != 409 || r.header.Get("Content-Type") != "application/problem+json" || r.json(t)["type"] != "/problems/link-locked" {
					t.Errorf("owner %s %s of a blocked link: %d %s; want 409 link-locked", tt.method, tt.body, r.status, r.body)
				}
			}
			pollAll(t, c.nodes, code, stateBlocked("dest.example/takedown"), time.Now())
		}
		step(via(1), stateLegal(), "links", "block", code, "--legal", "--reason", "court order 2026-17")
		step(via(2), stateReview(dest), "links", "review", code, "--reason", "second look")
		step(via(3), stateActive(dest), "links", "restore", code, "--reason", "reviewed: fine")
	}
	slices.Sort(all)
	slices.Sort(lastNode)
	t.Logf("takedown visible per node (%d samples): p50 %v, p99 %v, max %v; to the last node of each command (%d): p50 %v, p99 %v",
		len(all), percentile(all, 0.5).Round(time.Millisecond), percentile(all, 0.99).Round(time.Millisecond), all[len(all)-1].Round(time.Millisecond),
		len(lastNode), percentile(lastNode, 0.5).Round(time.Millisecond), percentile(lastNode, 0.99).Round(time.Millisecond))

	// `links show`: status, destination, owner and the latest reason.
	var info struct {
		Code, URL, Owner, Status, Reason string
		ReasonBy                         string `json:"reason_by"`
	}
	if err := json.Unmarshal([]byte(cli("v3", "links", "show", code, "-format", "json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Code != code || info.URL != dest || info.Owner != aliceID || info.Status != "active" || info.Reason != "reviewed: fine" || info.ReasonBy != "operator" {
		t.Errorf("links show: %+v; want active, %s, owner %s, reason %q by operator", info, dest, aliceID, "reviewed: fine")
	}
	if table := cli("v1", "links", "show", code); !strings.Contains(table, "status") || !strings.Contains(table, dest) {
		t.Errorf("links show table:\n%s", table)
	}

	// Bait and switch: the owner's new destination shows the interstitial
	// on every node (default --edit-review 24h); an operator restore ends it.
	switched := "https://dest.example/switched"
	if r := do(t, "PATCH", edge+"/v1/links/"+code, alice, `{"url":"`+switched+`"}`); r.status != 200 || r.json(t)["review_until"] == nil {
		t.Fatalf("owner edit of the destination: %d %s; want 200 with review_until", r.status, r.body)
	}
	pollAll(t, c.nodes, code, stateReview(switched), time.Now())
	step("v2", stateActive(switched), "links", "restore", code, "--reason", "new destination checked")

	// History: every change with its actor, oldest first; the owner's
	// refused attempts left nothing.
	var hist struct {
		History []struct {
			Actor, Action, Reason string
		}
	}
	if err := json.Unmarshal([]byte(cli("v2", "links", "history", code, "-format", "json")), &hist); err != nil {
		t.Fatal(err)
	}
	want := []string{aliceID + " create"}
	for round := 0; round < 5; round++ {
		want = append(want, "operator block", "operator legal_block", "operator review", "operator restore")
	}
	want = append(want, aliceID+" edit", "operator restore")
	var got []string
	for _, h := range hist.History {
		got = append(got, h.Actor+" "+h.Action)
	}
	if !slices.Equal(got, want) {
		t.Errorf("links history actors:\n got %q\nwant %q", got, want)
	}
	if len(hist.History) == len(want) && (hist.History[1].Reason != "phishing report 0" || hist.History[2].Reason != "court order 2026-17") {
		t.Errorf("history reasons: %+v", hist.History[1:3])
	}
	if out := cli("e1", "links", "history", code); !strings.Contains(out, "ACTOR") || !strings.Contains(out, "court order 2026-17") {
		t.Errorf("links history table:\n%s", out)
	}
	// The owner's API shows the same history; another owner gets 404.
	r = do(t, "GET", edge+"/v1/links/"+code+"/history", alice, "")
	var owned struct {
		History []struct{ Actor, Action string }
	}
	if r.status != 200 || json.Unmarshal(r.body, &owned) != nil || len(owned.History) != len(want) {
		t.Errorf("owner history: %d %s; want 200 with %d records", r.status, r.body, len(want))
	}
	r = do(t, "GET", edge+"/v1/links/"+code+"/history", bob, "")
	if r.status != 404 || r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("another owner's history: %d %q %s; want 404 problem+json", r.status, r.header.Get("Content-Type"), r.body)
	}
	// Operator errors: an unknown code, a block without a reason.
	if _, errOut, exit := runCLI(t, c.env("v1"), "links", "block", "nosuchcode", "--reason", "x"); exit != 1 || !strings.Contains(errOut, "404") {
		t.Errorf("block of an unknown code: exit %d %s; want 1 and 404", exit, errOut)
	}
	if _, _, exit := runCLI(t, c.env("v1"), "links", "block", code); exit != 2 {
		t.Errorf("block without --reason: exit %d; want 2 (usage)", exit)
	}

	// HEAD is not a click: on a fresh link, HEADs interleaved with GETs;
	// once everything the edge wrote has shipped, the aggregator holds the
	// GETs only, and the edge wrote that many events more than before.
	headDest := "https://dest.example/head"
	r = do(t, "POST", edge+"/v1/links", alice, `{"url":"`+headDest+`"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	headCode := r.json(t)["code"].(string)
	waitFor(t, "the edge shipped the polls' clicks", 30*time.Second, func() bool { return shippedAll(t, edge) })
	written := metric(t, edge, "waymark_ingest_written_events_total")
	const gets, heads = 6, 9
	for i := 0; i < heads; i++ {
		if r := do(t, "HEAD", edge+"/"+headCode, "", ""); r.status != 302 || r.header.Get("Location") != headDest || len(r.body) != 0 {
			t.Fatalf("HEAD: %d %q %q", r.status, r.header.Get("Location"), r.body)
		}
		if i < gets {
			if r := do(t, "GET", edge+"/"+headCode, "", "", "User-Agent", firefox); r.status != 302 {
				t.Fatalf("GET: %d", r.status)
			}
		}
	}
	waitFor(t, "the GETs at the aggregator", 30*time.Second, func() bool {
		return eventsCount(t, v1, "--link", headCode) >= gets && shippedAll(t, edge)
	})
	if n := eventsCount(t, v1, "--link", headCode); n != gets {
		t.Errorf("clicks of %s after %d GETs and %d HEADs: %d; want %d", headCode, gets, heads, n, gets)
	}
	if w := metric(t, edge, "waymark_ingest_written_events_total"); w-written != gets {
		t.Errorf("events the edge wrote during the HEADs and GETs: %v; want %d (HEADs are not clicks)", w-written, gets)
	}
}
