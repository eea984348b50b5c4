package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

type reportRow struct {
	ID          string   `json:"id"`
	Code        string   `json:"code"`
	Destination string   `json:"destination"`
	Owner       string   `json:"owner"`
	LinkStatus  string   `json:"link_status"`
	Count       uint64   `json:"count"`
	Reasons     []string `json:"reasons"`
	FirstAt     string   `json:"first_at"`
	LastAt      string   `json:"last_at"`
	Details     []string `json:"details"`
	Status      string   `json:"status"`
	Action      string   `json:"action"`
	ResolvedBy  string   `json:"resolved_by"`
	Reason      string   `json:"resolved_reason"`
}

func (c *cluster) reports(via, status string) []reportRow {
	c.t.Helper()
	out, stderr, code := runCLI(c.t, c.env(via), "reports", "list", "--status", status, "-format", "json")
	if code != 0 {
		c.t.Fatalf("reports list --status %s via %s: exit %d %s", status, via, code, stderr)
	}
	var rows []reportRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		c.t.Fatalf("reports list: %v: %s", err, out)
	}
	return rows
}

func fileReport(t *testing.T, p *proc, body string) string {
	t.Helper()
	r := do(t, "POST", "http://"+p.http+"/v1/reports", "", body)
	if r.status != 202 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("report %s: got %d %s", body, r.status, r.body)
	}
	id, _ := r.json(t)["id"].(string)
	if id == "" {
		t.Fatalf("report answer without an id: %s", r.body)
	}
	return id
}

func expectReportProblem(t *testing.T, r response, status int, typ string) {
	t.Helper()
	if r.status != status || r.header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(r.body), `"/problems/`+typ+`"`) {
		t.Fatalf("got %d %s %s; want %d problem %s", r.status, r.header.Get("Content-Type"), r.body, status, typ)
	}
}

// blockedAnswer is the status of a blocked link's warning page.
const blockedAnswer = 410

// TestE2EReports: three voters and an edge. Reports are filed on the
// edge's public port, listed and resolved with the CLI binary, the block
// reaches every node (caches filled first), and the cases survive a
// restart of the edge. A voter's public port shows the per-IP limit.
func TestE2EReports(t *testing.T) {
	c := newCluster(t)
	all := c.threeVotersAndEdge(nil, "--report-burst", "100")
	v1 := c.nodes["v1"]
	out, _, code := runCLI(t, c.env("v2"), "owners", "create", "alice", "-format", "json")
	var owner struct {
		ID     string `json:"id"`
		APIKey string `json:"api_key"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &owner) != nil || owner.APIKey == "" {
		t.Fatalf("owners create: exit %d %q", code, out)
	}
	e1 := c.nodes["e1"]

	const n = 12 // 10 blocks, 1 legal block, 1 dismiss
	codes := make([]string, n)
	for i := range codes {
		r := do(t, "POST", "http://"+e1.http+"/v1/links", owner.APIKey, fmt.Sprintf(`{"url":"https://dest.example/r/%d"}`, i))
		if r.status != 201 {
			t.Fatalf("create %d: %d %s", i, r.status, r.body)
		}
		codes[i] = r.json(t)["code"].(string)
	}
	waitFor(t, "every link resolves on every node (caches filled)", 20*time.Second, func() bool {
		for i, code := range codes {
			for _, name := range all {
				if !resolves(t, c.nodes[name], code, fmt.Sprintf("https://dest.example/r/%d", i)) {
					return false
				}
			}
		}
		return true
	})

	// Refusals on the edge: unknown code 404, bad reason and a foreign
	// short URL 400, all problem+json.
	expectReportProblem(t, do(t, "POST", "http://"+e1.http+"/v1/reports", "", `{"url":"zzzzzzz","reason":"spam"}`), 404, "not-found")
	expectReportProblem(t, do(t, "POST", "http://"+e1.http+"/v1/reports", "", `{"url":"`+codes[0]+`","reason":"boring"}`), 400, "invalid-request")
	expectReportProblem(t, do(t, "POST", "http://"+e1.http+"/v1/reports", "", `{"url":"https://bit.ly/`+codes[0]+`","reason":"spam"}`), 400, "invalid-request")

	ids := make([]string, n)
	for i, code := range codes {
		ids[i] = fileReport(t, e1, fmt.Sprintf(`{"url":"http://%s/%s","reason":"phishing","details":"fake login %d"}`, e1.http, code, i))
	}
	// A second report of codes[0] folds into its case (same id).
	if id := fileReport(t, e1, `{"url":"`+codes[0]+`","reason":"spam","details":"again"}`); id != ids[0] {
		t.Fatalf("second report of %s: case %s; want %s", codes[0], id, ids[0])
	}
	// Listed through a voter's admin API with the CLI (the edge wrote
	// through the leader, so every replica holds the cases).
	var rows []reportRow
	waitFor(t, "12 open cases on v3", 10*time.Second, func() bool { rows = c.reports("v3", "open"); return len(rows) == n })
	byID := map[string]reportRow{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	r5 := byID[ids[5]]
	if r5.Code != codes[5] || r5.Destination != "https://dest.example/r/5" || r5.Owner != owner.ID || r5.Count != 1 ||
		strings.Join(r5.Reasons, ",") != "phishing" || len(r5.Details) != 1 || r5.Details[0] != "fake login 5" || r5.Status != "open" || r5.FirstAt == "" {
		t.Fatalf("case of %s: %+v", codes[5], r5)
	}
	// The folded report reaches the log when its 10 s window ends.
	t0 := time.Now()
	waitFor(t, "the folded report in the case of codes[0]", 30*time.Second, func() bool {
		for _, r := range c.reports("v1", "open") {
			if r.ID == ids[0] {
				return r.Count == 2 && strings.Join(r.Reasons, ",") == "phishing,spam" && len(r.Details) == 2
			}
		}
		return false
	})
	t.Logf("coalesced report written %v after the first poll", time.Since(t0).Round(time.Millisecond))
	table, _, code := runCLI(t, c.env("e1"), "reports", "list")
	if code != 0 || !strings.Contains(table, "DESTINATION") || !strings.Contains(table, codes[0]) || !strings.Contains(table, "phishing,spam") {
		t.Fatalf("reports list table: exit %d\n%s", code, table)
	}

	// Resolve with --action block through the CLI on v2 (forwarded to the
	// leader if v2 is not it) and poll every node until the code answers as blocked.
	var samples []time.Duration
	perNode := map[string][]time.Duration{}
	var mu sync.Mutex
	for i := 0; i < 10; i++ {
		start := time.Now()
		out, stderr, code := runCLI(t, c.env("v2"), "reports", "resolve", ids[i], "--action", "block", "--reason", "phishing kit")
		cliTook := time.Since(start)
		if code != 0 || !strings.Contains(out, "blocked") {
			t.Fatalf("reports resolve %s: exit %d %s %s", ids[i], code, out, stderr)
		}
		var wg sync.WaitGroup
		for _, name := range all {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := c.nodes[name]
				deadline := start.Add(10 * time.Second)
				for do(t, "GET", "http://"+p.http+"/"+codes[i], "", "").status != blockedAnswer {
					if time.Now().After(deadline) {
						t.Errorf("%s still not %d on %s 10 s after resolve", codes[i], blockedAnswer, name)
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
				d := time.Since(start)
				mu.Lock()
				samples = append(samples, d)
				perNode[name] = append(perNode[name], d)
				mu.Unlock()
			}()
		}
		wg.Wait()
		t.Logf("resolve %d: CLI returned after %v", i, cliTook.Round(time.Millisecond))
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("block via reports resolve, time to the blocked answer from CLI start (CLI process included), %d samples: p50 %v p99 %v max %v",
		len(samples), percentile(samples, 0.5).Round(time.Millisecond), percentile(samples, 0.99).Round(time.Millisecond), percentile(samples, 1).Round(time.Millisecond))
	for _, name := range all {
		t.Logf("  %s: p50 %v max %v", name, percentile(perNode[name], 0.5).Round(time.Millisecond), percentile(perNode[name], 1).Round(time.Millisecond))
	}

	// legal -> 451 everywhere; dismiss -> the link keeps redirecting.
	if out, _, code := runCLI(t, c.env("e1"), "reports", "resolve", "--action", "legal", ids[10], "--reason", "court order"); code != 0 || !strings.Contains(out, "legal_block") {
		t.Fatalf("resolve legal: exit %d %s", code, out)
	}
	if _, _, code := runCLI(t, c.env("v1"), "reports", "resolve", ids[11], "--action", "dismiss"); code != 0 {
		t.Fatalf("resolve dismiss: exit %d", code)
	}
	waitFor(t, "451 on every node", 10*time.Second, func() bool {
		for _, name := range all {
			if do(t, "GET", "http://"+c.nodes[name].http+"/"+codes[10], "", "").status != 451 {
				return false
			}
		}
		return true
	})
	for _, name := range all {
		if !resolves(t, c.nodes[name], codes[11], "https://dest.example/r/11") {
			t.Errorf("dismissed report changed %s on %s", codes[11], name)
		}
	}
	// A closed case cannot be resolved again; an unknown one is not found.
	if _, stderr, code := runCLI(t, c.env("v1"), "reports", "resolve", ids[0], "--action", "dismiss"); code != 1 || !strings.Contains(stderr, "already resolved") {
		t.Fatalf("second resolve: exit %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, c.env("v1"), "reports", "resolve", "999999", "--action", "block"); code != 1 || !strings.Contains(stderr, "404") {
		t.Fatalf("unknown report: exit %d %s", code, stderr)
	}
	if _, _, code := runCLI(t, c.env("v1"), "reports", "resolve", ids[0], "--action", "delete"); code != 2 {
		t.Fatalf("bad --action: exit %d; want 2", code)
	}
	// An open case to carry over the restart too.
	openID := fileReport(t, e1, `{"url":"`+codes[11]+`","reason":"malware"}`)

	// The cases survive a restart of the edge (its own replica).
	e1.stop(t)
	e1 = c.restart("e1")
	waitFor(t, "e1 ready after restart", 60*time.Second, func() bool { return ready(t, e1) })
	waitFor(t, "cases listed by e1 after its restart", 20*time.Second, func() bool {
		rows := c.reports("e1", "all")
		resolved, open := 0, 0
		for _, r := range rows {
			switch {
			case r.Status == "resolved" && r.ResolvedBy == "operator":
				resolved++
			case r.Status == "open" && r.ID == openID:
				open++
			}
		}
		return len(rows) == n+1 && resolved == n && open == 1
	})
	for _, r := range c.reports("e1", "resolved") {
		if r.ID == ids[3] && (r.Action != "block" || r.Reason != "phishing kit" || r.LinkStatus != "blocked") {
			t.Fatalf("resolved case after restart: %+v", r)
		}
	}
	if s := do(t, "GET", "http://"+e1.http+"/"+codes[3], "", "").status; s != blockedAnswer {
		t.Fatalf("blocked link after e1 restart: %d; want %d", s, blockedAnswer)
	}

	// Per-IP limit on a public port that has not taken reports yet (v1,
	// default burst 5, one more a minute): the sixth is 429 with
	// Retry-After 60.
	for i := 0; i < 5; i++ {
		fileReport(t, v1, `{"url":"`+codes[11]+`","reason":"spam"}`)
	}
	r := do(t, "POST", "http://"+v1.http+"/v1/reports", "", `{"url":"`+codes[11]+`","reason":"spam"}`)
	expectReportProblem(t, r, 429, "rate-limited")
	if ra := r.header.Get("Retry-After"); ra != "60" && ra != "59" {
		t.Fatalf("Retry-After %q; want 60 (or 59 if a second passed)", ra)
	}
}
