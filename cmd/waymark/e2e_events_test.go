package main

import (
	"bufio"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// metric reads one unlabelled (or exactly labelled) sample from /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") {
			v, _ := strconv.ParseFloat(strings.TrimSpace(line[len(name):]), 64)
			return v
		}
	}
	return 0
}

func eventsCount(t *testing.T, agg *proc, args ...string) int {
	t.Helper()
	env := []string{"WAYMARK_ADMIN_ADDR=" + agg.admin, "WAYMARK_TOKEN=" + readKey(t, filepath.Join(agg.dataDir, "operator-token"))}
	out, errOut, code := runCLI(t, env, append([]string{"events", "count"}, args...)...)
	if code != 0 {
		return -1 // aggregator restarting
	}
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("events count printed %q (stderr %q); want only a number", out, errOut)
	}
	return n
}

// shippedAll reports whether a node has shipped every event it wrote.
func shippedAll(t *testing.T, base string) bool {
	w := metric(t, base, "waymark_ingest_written_events_total")
	s := metric(t, base, "waymark_ingest_shipped_events_total")
	return w >= 0 && w == s
}

// TestE2EEventsExactlyOnce runs an edge node and a separate aggregator node
// as real processes in one cluster: every redirect and event lands exactly
// once in the raw store and in the rollups the stats API reads, across an
// aggregator outage, a SIGKILL of the edge, and a SIGKILL of the
// aggregator while the rollups of acknowledged segments are in its memory.
func TestE2EEventsExactlyOnce(t *testing.T) {
	// One cluster: the aggregator is its only voter, the edge a non-voter
	// that replicates the link table and ships to the aggregator, so the
	// stats API answers for the edge's links and sites.
	c := newCluster(t)
	// Rollups are written only when a query asks (or at the 500k-event
	// cap), so the last phase can kill the aggregator with some pending.
	agg := c.start("agg", "us", "voter,aggregator", "", "--bootstrap-expect", "1", "--analytics-checkpoint-interval", "1h")
	edge := c.start("edge", "us", "edge", agg.gossip, "--aggregator-url", "http://"+agg.http, "--ingest-ip-rate", "100000")
	base := "http://" + edge.http
	waitFor(t, "edge ready", 60*time.Second, func() bool { return ready(t, edge) })
	key, _, code := runCLI(t, c.env("agg"), "owners", "create", "alice")
	key = strings.TrimSpace(key)
	if code != 0 || !strings.HasPrefix(key, "wm_") {
		t.Fatalf("owners create: exit %d %q", code, key)
	}

	code1 := do(t, "POST", base+"/v1/links", key, `{"url":"https://dest.example/"}`).json(t)["code"].(string)
	site := do(t, "POST", base+"/v1/sites", key, `{"domain":"shop.example","timezone":"Europe/Berlin"}`)
	if site.status != 201 {
		t.Fatalf("create site: got %d %s", site.status, site.body)
	}
	siteID := site.json(t)["id"].(string)

	clicks := func(n int) int {
		ok := 0
		for i := 0; i < n; i++ {
			r := do(t, "GET", base+"/"+code1+"?utm_source=e2e", "", "", "User-Agent", firefox)
			if r.status == 302 {
				ok++
			}
		}
		return ok
	}
	pageviews := func(n int) {
		for i := 0; i < n; i++ {
			body := fmt.Sprintf(`{"n":"pageview","u":"https://shop.example/p/%d?x=1","d":"shop.example","r":"https://ref.example/a/b"}`, i)
			r := do(t, "POST", base+"/api/event", "", body, "Content-Type", "text/plain", "Origin", "https://shop.example",
				"User-Agent", firefox)
			if r.status != 202 || r.header.Get("X-Waymark-Dropped") != "" {
				t.Fatalf("event: got %d dropped %q: %s", r.status, r.header.Get("X-Waymark-Dropped"), r.body)
			}
		}
	}

	// N redirects and M events: exactly N + M in the raw store.
	const N, M = 120, 80
	if got := clicks(N); got != N {
		t.Fatalf("redirects: %d of %d answered 302", got, N)
	}
	pageviews(M)
	waitFor(t, "N+M events at the aggregator", 30*time.Second, func() bool { return eventsCount(t, agg) == N+M })
	waitFor(t, "edge shipped everything", 30*time.Second, func() bool { return shippedAll(t, base) })
	if got := eventsCount(t, agg, "--link", code1); got != N {
		t.Fatalf("clicks of %s: got %d; want %d", code1, got, N)
	}
	if got := eventsCount(t, agg, "--site", siteID); got != M {
		t.Fatalf("events of site %s: got %d; want %d", siteID, got, M)
	}
	// The rollups hold the same, in the same batches: N clicks from one
	// visitor (one user agent, one address), and M pageviews of one visit.
	checkRollups(t, base, key, code1, siteID, N, M)

	// Aggregator down while clicks keep coming: still exactly once.
	agg.stop(t)
	const N2 = 60
	if got := clicks(N2); got != N2 {
		t.Fatalf("redirects with the aggregator down: %d of %d answered 302", got, N2)
	}
	agg = c.restart("agg")
	waitFor(t, "events after the aggregator restart", 60*time.Second, func() bool { return eventsCount(t, agg) == N+M+N2 })
	waitFor(t, "edge shipped everything", 30*time.Second, func() bool { return shippedAll(t, base) })
	if got := eventsCount(t, agg); got != N+M+N2 {
		t.Fatalf("after the outage: got %d; want %d", got, N+M+N2)
	}
	checkRollups(t, base, key, code1, siteID, N+N2, M)

	// SIGKILL the edge while it writes: nothing counted twice, and the loss
	// is bounded by the group-fsync window (200 ms of clicks).
	var mu sync.Mutex
	var acks []time.Time
	stopClicks := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		client := &http.Client{Timeout: 2 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for {
			select {
			case <-stopClicks:
				return
			default:
			}
			req, _ := http.NewRequest("GET", base+"/"+code1, nil)
			req.Header.Set("User-Agent", firefox) // Go's own agent is counted as a bot
			resp, err := client.Do(req)
			if err != nil {
				return // the edge is gone
			}
			resp.Body.Close()
			if resp.StatusCode == 302 {
				mu.Lock()
				acks = append(acks, time.Now())
				mu.Unlock()
			}
		}
	}()
	// Click for well over the fsync window before the kill, so the window
	// bound below is a real limit rather than "everything".
	waitFor(t, "clicks in flight", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) >= 200 && time.Since(acks[0]) > 2*time.Second
	})
	killedAt := time.Now()
	edge.kill()
	close(stopClicks)
	wg.Wait()
	before := N + M + N2
	edge = c.restart("edge")
	// Counters restart with the process, so wait for "nothing pending" and
	// a count that has stopped moving.
	last := -1
	waitFor(t, "restarted edge shipped everything", 60*time.Second, func() bool {
		if metric(t, base, "waymark_ingest_oldest_pending_age_seconds") != 0 {
			return false
		}
		c := eventsCount(t, agg)
		stable := c == last
		last = c
		return stable
	})
	stored := eventsCount(t, agg) - before
	inWindow := 0
	for _, a := range acks {
		if a.After(killedAt.Add(-400 * time.Millisecond)) {
			inWindow++
		}
	}
	t.Logf("SIGKILL: %d clicks acknowledged, %d stored, %d acknowledged in the last 400 ms", len(acks), stored, inWindow)
	if stored > len(acks) {
		t.Fatalf("after SIGKILL: %d events stored for %d clicks; something was counted twice", stored, len(acks))
	}
	if lost := len(acks) - stored; lost > inWindow {
		t.Fatalf("after SIGKILL: lost %d clicks; more than the %d acknowledged inside the fsync window", lost, inWindow)
	}
	checkRollups(t, base, key, code1, siteID, N+N2+stored, M)

	// SIGKILL the aggregator after it acknowledged clicks whose rollups
	// are still in its memory: the restarted one folds them again from its
	// journal, once. Nothing may query it before the kill (a query writes
	// pending rollups).
	const N3 = 50
	if got := clicks(N3); got != N3 {
		t.Fatalf("redirects before the aggregator SIGKILL: %d of %d answered 302", got, N3)
	}
	aggBase := "http://" + agg.http
	waitFor(t, "clicks acknowledged by the aggregator, rollups pending", 30*time.Second, func() bool {
		// The edge's counters restarted with it, so "shipped everything" is
		// nothing left pending.
		return metric(t, base, "waymark_ingest_oldest_pending_age_seconds") == 0 &&
			metric(t, aggBase, "waymark_rollup_pending_events") == N3
	})
	agg.kill()
	agg = c.restart("agg")
	want := N + M + N2 + stored + N3
	waitFor(t, "events after the aggregator SIGKILL", 60*time.Second, func() bool { return eventsCount(t, agg) == want })
	if got := metric(t, "http://"+agg.http, "waymark_rollup_journal_segments_refolded_total"); got < 1 {
		t.Fatalf("segments refolded from the journal after the SIGKILL: %v; want at least 1", got)
	}
	checkRollups(t, base, key, code1, siteID, N+N2+stored+N3, M)
}

const firefox = "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"

// checkRollups checks the stats API (the rollups, not the raw store): the
// link's clicks and unique visitors, and the site's pageviews, visits and
// visitors, over the days around now.
func checkRollups(t *testing.T, base, key, code, siteID string, clicks, pageviews int) {
	t.Helper()
	now := time.Now().UTC()
	rng := "from=" + now.AddDate(0, 0, -1).Format(time.DateOnly) + "&to=" + now.AddDate(0, 0, 1).Format(time.DateOnly) + "&tz=UTC"
	link := do(t, "GET", base+"/v1/links/"+code+"/stats?granularity=day&"+rng, key, "")
	if link.status != 200 {
		t.Fatalf("link stats: got %d %s", link.status, link.body)
	}
	totals := link.json(t)["totals"].(map[string]any)
	if got, v := int(totals["clicks"].(float64)), int(totals["unique_visitors"].(float64)); got != clicks || v != 1 {
		t.Fatalf("link stats: %d clicks from %d visitors; want %d from 1 (%s)", got, v, clicks, link.body)
	}
	site := do(t, "GET", base+"/v1/sites/"+siteID+"/stats/aggregate?"+rng, key, "")
	if site.status != 200 {
		t.Fatalf("site stats: got %d %s", site.status, site.body)
	}
	m := site.json(t)
	if pv, vs, v := int(m["pageviews"].(float64)), int(m["visits"].(float64)), int(m["visitors"].(float64)); pv != pageviews || vs != 1 || v != 1 {
		t.Fatalf("site stats: %d pageviews, %d visits, %d visitors; want %d, 1, 1 (%s)", pv, vs, v, pageviews, site.body)
	}
}

// TestE2EDiskCapDropsInStats fills a tiny unshipped-bytes cap on a node
// without an aggregator: redirects keep answering and the drops are
// counted. Restarted with an aggregator, every redirect is either a click
// in the stats or counted in their dropped_events.
func TestE2EDiskCapDropsInStats(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, dir, "--dev", "--role", "voter,edge", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
		"--ingest-max-pending-bytes", "4096")
	base := "http://" + p.http
	waitFor(t, "ready", 30*time.Second, func() bool { return do(t, "GET", base+"/readyz", "", "").status == 200 })
	var key string
	waitFor(t, "dev key", 30*time.Second, func() bool { key = readKeyMaybe(filepath.Join(dir, "dev-api-key")); return key != "" })
	code := do(t, "POST", base+"/v1/links", key, `{"url":"https://dest.example/"}`).json(t)["code"].(string)
	const n = 300
	for i := range n {
		if r := do(t, "GET", base+"/"+code, "", "", "User-Agent", firefox); r.status != 302 {
			t.Fatalf("redirect %d with a full disk cap: got %d; want 302", i, r.status)
		}
	}
	dropped := func() float64 {
		var sum float64
		for _, r := range []string{"disk_cap", "queue_full", "io_error"} {
			sum += metric(t, base, `waymark_ingest_dropped_total{reason="`+r+`"}`)
		}
		return sum
	}
	waitFor(t, "every click written or dropped", 10*time.Second, func() bool {
		return metric(t, base, "waymark_ingest_written_events_total")+dropped() == n
	})
	drops := int(dropped())
	if drops == 0 {
		t.Fatal("no clicks dropped at a 4 KiB cap; the test needs some")
	}
	p.stop(t)

	// The same node with its aggregator: the held segments ship.
	p = startNode(t, dir, "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	base = "http://" + p.http
	now := time.Now().UTC()
	rng := "from=" + now.AddDate(0, 0, -1).Format(time.DateOnly) + "&to=" + now.AddDate(0, 0, 1).Format(time.DateOnly) + "&tz=UTC"
	var clicks, inStats int
	waitFor(t, "every redirect in the stats, as a click or a drop", 60*time.Second, func() bool {
		r := do(t, "GET", base+"/v1/links/"+code+"/stats?granularity=day&"+rng, key, "")
		if r.status != 200 {
			return false
		}
		m := r.json(t)
		clicks = int(m["totals"].(map[string]any)["clicks"].(float64))
		inStats = int(m["dropped_events"].(float64))
		return clicks+inStats == n
	})
	if inStats != drops {
		t.Fatalf("stats: %d clicks and dropped_events %d; want the %d the edge counted as dropped", clicks, inStats, drops)
	}
}
