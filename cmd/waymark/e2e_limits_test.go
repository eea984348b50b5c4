package main

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// segmentAge is the node's default segment rotation age: the longest a
// click waits on the edge before it can ship, and so the main term of the
// documented click-limit overshoot bound (rollup/DESIGN.md).
const segmentAge = 2 * time.Second

// TestE2EClickLimit hits a link with click_limit 100 150 times: the first
// 100 always redirect, the link answers 410 afterwards, the stats count
// every click that was served, and the overshoot stays within the clicks
// served during one shipping interval plus a second of apply and commit.
func TestE2EClickLimit(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, dir, "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	base := "http://" + p.http
	waitFor(t, "ready", 30*time.Second, func() bool { return do(t, "GET", base+"/readyz", "", "").status == 200 })
	var key string
	waitFor(t, "dev key", 30*time.Second, func() bool { key = readKeyMaybe(filepath.Join(dir, "dev-api-key")); return key != "" })
	r := do(t, "POST", base+"/v1/links", key, `{"url":"https://limited.example/","click_limit":100}`)
	if r.status != 201 || r.json(t)["click_limit"] != float64(100) {
		t.Fatalf("create with click_limit: got %d %s", r.status, r.body)
	}
	code := r.json(t)["code"].(string)

	var served []time.Time
	for i := 0; i < 150; i++ {
		red := do(t, "GET", base+"/"+code, "", "", "User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0")
		switch red.status {
		case 302:
			served = append(served, time.Now())
		case 410:
		default:
			t.Fatalf("click %d: got %d; want 302 or 410", i, red.status)
		}
		time.Sleep(70 * time.Millisecond) // about 14 clicks/s: the last 50 span longer than the bound
	}
	if len(served) < 100 {
		t.Fatalf("only %d of the first clicks redirected; the limit must never cut in early", len(served))
	}
	waitFor(t, "410 after the limit", 20*time.Second, func() bool { return do(t, "GET", base+"/"+code, "", "").status == 410 })
	limitAt := served[99]
	inBound := 0
	for _, s := range served[100:] {
		if s.Sub(limitAt) <= segmentAge+time.Second {
			inBound++
		}
	}
	overshoot := len(served) - 100
	t.Logf("click limit 100: %d served, overshoot %d, %d served within %v of the 100th", len(served), overshoot, inBound, segmentAge+time.Second)
	if overshoot > inBound {
		t.Fatalf("overshoot %d exceeds the clicks served within one shipping interval plus a second (%d)", overshoot, inBound)
	}
	waitFor(t, "stats count every served click", 20*time.Second, func() bool {
		s := do(t, "GET", base+"/v1/links/"+code+"/stats", key, "")
		if s.status != 200 {
			return false
		}
		totals := s.json(t)["totals"].(map[string]any)
		return totals["clicks"] == float64(len(served))
	})
	// The 410 polls above come from Go's client, which the bot check flags:
	// they are raw events but never count towards the limit.
	all, bots := eventsCount(t, p, "--link", code), eventsCount(t, p, "--link", code, "--bots")
	if all-bots != len(served) {
		t.Fatalf("raw non-bot clicks: got %d (%d raw, %d bots); want %s", all-bots, all, bots, strconv.Itoa(len(served)))
	}
}
