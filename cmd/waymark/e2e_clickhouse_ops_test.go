package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/internal/chserver"
)

// TestE2EClickHouseEventsLimitsWebhooks runs a dev node whose analytics
// live in a real clickhouse-server and checks, through the binary, what
// a user of the embedded store has besides the stats API:
//   - `waymark events count` and `events tail`, with every filter, on
//     hand counts: link a 7 clicks and a bot's, link b 3 clicks, link c
//     (click_limit 5) 5 clicks, 4 pageviews of one site;
//   - the click limit: c's first 5 clicks redirect, then ClickHouse's
//     count takes it out of service (status limited, 410,
//     link.limit_reached);
//   - link.clicked: the clicks arrive at the webhook, each once by id,
//     with the receiver down first and the node restarted before it is
//     back (the outbox keeps them).
func TestE2EClickHouseEventsLimitsWebhooks(t *testing.T) {
	srv := chserver.StartT(t)
	dir := t.TempDir()
	flags := []string{"--analytics-store", "clickhouse", "--clickhouse-url", srv.URL(), "--clickhouse-database", "waymark",
		"--webhook-allow-private", "--webhook-click-batch", "4", "--webhook-retry-base", "100ms"}
	p, key := devNode(t, dir, flags...)
	base := "http://" + p.http
	t.Cleanup(func() {
		if t.Failed() {
			l := strings.Split(p.logs(), "\n")
			t.Logf("node log tail:\n%s", strings.Join(l[max(0, len(l)-30):], "\n"))
		}
	})
	rcv := startReceiver(t)
	_, secret := createWebhook(t, base, key, rcv.url(), "link.clicked", "link.limit_reached")
	rcv.setSecret(secret)
	a := createCode(t, base, key, "https://ch-clicks-a.example/")
	b := createCode(t, base, key, "https://ch-clicks-b.example/")
	r := do(t, "POST", base+"/v1/links", key, `{"url":"https://ch-clicks-c.example/","click_limit":5}`)
	if r.status != 201 {
		t.Fatalf("create limited link: %d %s", r.status, r.body)
	}
	c := r.json(t)["code"].(string)
	site := do(t, "POST", base+"/v1/sites", key, `{"domain":"chops.example","timezone":"UTC"}`)
	if site.status != 201 {
		t.Fatalf("create site: %d %s", site.status, site.body)
	}
	siteID := site.json(t)["id"].(string)

	rcv.down()
	clickN(t, base, a, 7)
	if r := do(t, "GET", base+"/"+a, "", ""); r.status != 302 { // Go's client: flagged a bot
		t.Fatalf("bot click: %d", r.status)
	}
	clickN(t, base, b, 3)
	clickN(t, base, c, 5) // the limit never cuts in early: clickN wants 302s
	for i := range 4 {
		body := fmt.Sprintf(`{"n":"pageview","u":"https://chops.example/p/%d","d":"chops.example"}`, i)
		r := do(t, "POST", base+"/api/event", "", body, "Content-Type", "text/plain", "Origin", "https://chops.example", "User-Agent", firefox)
		if r.status != 202 || r.header.Get("X-Waymark-Dropped") != "" {
			t.Fatalf("pageview %d: %d %q", i, r.status, r.header.Get("X-Waymark-Dropped"))
		}
		time.Sleep(5 * time.Millisecond) // distinct milliseconds: tail's order is the send order
	}
	waitFor(t, "every event shipped", 60*time.Second, func() bool { return shippedAll(t, base) && eventsCount(t, p) == 20 })

	// Click limit: 5 non-bot clicks of c, limit 5.
	waitFor(t, "c limited", 30*time.Second, func() bool {
		r := do(t, "GET", base+"/v1/links/"+c, key, "")
		return r.status == 200 && r.json(t)["status"] == "limited"
	})
	if n := metric(t, base, "waymark_clickhouse_click_limits_reached_total"); n != 1 {
		t.Fatalf("click limits reached: %v; want 1 (only c has a limit)", n)
	}

	// events count, each filter (hand counts above).
	for _, x := range []struct {
		args []string
		want int
	}{
		{nil, 20},
		{[]string{"--bots"}, 1},
		{[]string{"--link", a}, 8},
		{[]string{"--link", a, "--bots"}, 1},
		{[]string{"--link", b}, 3},
		{[]string{"--link", c}, 5},
		{[]string{"--site", siteID}, 4},
		{[]string{"--site", siteID, "--bots"}, 0},
		{[]string{"--site", siteID, "--link", a}, 0},
	} {
		if got := eventsCount(t, p, x.args...); got != x.want {
			t.Errorf("events count %v: %d; want %d", x.args, got, x.want)
		}
	}
	// events tail: newest n, oldest first, the embedded JSON.
	tail := func(args ...string) []map[string]any {
		t.Helper()
		env := []string{"WAYMARK_ADMIN_ADDR=" + p.admin, "WAYMARK_TOKEN=" + readKey(t, filepath.Join(dir, "operator-token"))}
		out, errOut, code := runCLI(t, env, append([]string{"events", "tail", "--format", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("events tail %v: exit %d: %s", args, code, errOut)
		}
		var evs []map[string]any
		if err := json.Unmarshal([]byte(out), &evs); err != nil {
			t.Fatalf("events tail %v printed %q: %v", args, out, err)
		}
		return evs
	}
	pvs := tail("-n", "3", "--site", siteID)
	if len(pvs) != 3 {
		t.Fatalf("tail -n 3 of the site: %v", pvs)
	}
	for i, ev := range pvs {
		if ev["kind"] != "pageview" || ev["site"] != siteID || ev["path"] != fmt.Sprintf("/p/%d", i+1) || ev["bot"] != false || ev["node"] == "" {
			t.Errorf("tail of the site, event %d: %v; want the pageview of /p/%d", i, ev, i+1)
		}
	}
	// a's bot click came after its 7 others.
	if evs := tail("-n", "2", "--link", a); len(evs) != 2 || evs[0]["bot"] != false || evs[1]["code"] != a || evs[1]["bot"] != true || evs[1]["kind"] != "click" {
		t.Errorf("tail -n 2 of a: %v; want a click, then the bot click", evs)
	}
	if evs := tail("-n", "100", "--link", b); len(evs) != 3 {
		t.Errorf("tail of b: %d events; want its 3 clicks", len(evs))
	}
	if evs := tail("-n", "100"); len(evs) != 20 {
		t.Errorf("tail of everything: %d events; want 20", len(evs))
	}

	// rollup rebuild on ClickHouse rewrites the rows of closed hours: every
	// event is minutes old, so no hour of today is closed yet (its end, the
	// 30-minute visit gap and the 5-minute lateness past): 0 written.
	today := time.Now().UTC().Format(time.DateOnly)
	env := []string{"WAYMARK_ADMIN_ADDR=" + p.admin, "WAYMARK_TOKEN=" + readKey(t, filepath.Join(dir, "operator-token"))}
	out, errOut, code := runCLI(t, env, "rollup", "rebuild", "--from", today, "--to", today, "--format", "json")
	var rebuilt struct {
		Hours *int `json:"hours"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rebuilt) != nil || rebuilt.Hours == nil || *rebuilt.Hours != 0 {
		t.Errorf("rollup rebuild on ClickHouse: exit %d, %q %s; want {\"hours\": 0, ...}", code, out, errOut)
	}

	// link.clicked: the outbox survives a restart while the receiver is down.
	queued := metric(t, base, "waymark_webhook_clicks_queued_total")
	if queued != 16 {
		t.Fatalf("%v clicks in the outbox; want the 16 clicks, each once", queued)
	}
	p.stop(t)
	p, _ = devNode(t, dir, flags...)
	base = "http://" + p.http
	rcv.up()
	count := func() (map[string]int, map[string]int, int) {
		per, bots := map[string]int{}, map[string]int{}
		ids := map[string]bool{}
		for _, d := range rcv.unique() {
			if d.Type != "link.clicked" {
				continue
			}
			clicks, _ := d.Data["clicks"].([]any)
			for _, x := range clicks {
				m := x.(map[string]any)
				if id := m["id"].(string); !ids[id] {
					ids[id] = true
					per[m["code"].(string)]++
					if m["bot"] == true {
						bots[m["code"].(string)]++
					}
				}
			}
		}
		return per, bots, len(ids)
	}
	waitForQuiet(60*time.Second, func() bool { _, _, n := count(); return n >= 16 })
	if per, bots, n := count(); n < 16 {
		t.Fatalf("%d clicks delivered in 60 s (%v, bots %v); want 16; queued before the restart: %v", n, per, bots, queued)
	}
	per, bots, n := count()
	if per[a] != 8 || bots[a] != 1 || per[b] != 3 || per[c] != 5 || n != 16 {
		t.Fatalf("clicks delivered %v (bots %v, %d in all); want %s:8 (1 bot) %s:3 %s:5", per, bots, n, a, b, c)
	}
	waitFor(t, "link.limit_reached of c", 60*time.Second, func() bool { return rcv.seen()["link.limit_reached "+c] == 1 })
	if bad := rcv.badOnes(); len(bad) > 0 {
		t.Fatalf("deliveries that did not verify: %v", bad)
	}
	if r := do(t, "GET", base+"/"+c, "", ""); r.status != 410 {
		t.Fatalf("c after its limit: %d; want 410", r.status)
	}
	// A limited link is not reported again: one limit reached in all.
	if n := metric(t, base, "waymark_clickhouse_click_limits_reached_total"); n != 0 {
		t.Fatalf("click limits reached after the restart: %v; want 0 (c is limited already)", n)
	}
	p.stop(t)
}

// TestE2EClickHouseClickLimit is TestE2EClickLimit on a ClickHouse dev
// node: a link with click_limit 100 hit 150 times at about 14 a second;
// the first 100 always redirect, then 410; the overshoot stays within
// the clicks served during one shipping interval plus two seconds (the
// embedded bound's one, and one for the check: it runs after each
// stored segment, at most every 200 ms, and asks ClickHouse).
func TestE2EClickHouseClickLimit(t *testing.T) {
	srv := chserver.StartT(t)
	p, key := devNode(t, t.TempDir(), "--analytics-store", "clickhouse", "--clickhouse-url", srv.URL())
	base := "http://" + p.http
	r := do(t, "POST", base+"/v1/links", key, `{"url":"https://ch-limited.example/","click_limit":100}`)
	if r.status != 201 {
		t.Fatalf("create with click_limit: got %d %s", r.status, r.body)
	}
	code := r.json(t)["code"].(string)
	var served []time.Time
	for i := 0; i < 150; i++ {
		red := do(t, "GET", base+"/"+code, "", "", "User-Agent", firefox)
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
	bound := segmentAge + 2*time.Second
	inBound := 0
	for _, s := range served[100:] {
		if s.Sub(served[99]) <= bound {
			inBound++
		}
	}
	overshoot := len(served) - 100
	t.Logf("click limit 100 on ClickHouse: %d served, overshoot %d, %d served within %v of the 100th", len(served), overshoot, inBound, bound)
	if overshoot > inBound {
		t.Fatalf("overshoot %d exceeds the clicks served within %v of the 100th (%d)", overshoot, bound, inBound)
	}
	waitFor(t, "every served click counted", 30*time.Second, func() bool {
		all, bots := eventsCount(t, p, "--link", code), eventsCount(t, p, "--link", code, "--bots")
		return all-bots == len(served)
	})
}
