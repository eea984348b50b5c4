package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/internal/chserver"
)

// TestE2EClickHouseMembershipChange: two aggregators on one real
// clickhouse-server, an edge that finds them through gossip and streams
// pageviews of 16 sites (or a few more) x 250 visitors; a third aggregator joins
// mid-stream (the partitions it wins by the rendezvous rule move to it),
// then the first leaves (`waymark leave`: its partitions move to the
// other two). Each visitor makes one visit of k pageviews (k from 1 to
// 6, one address each, all within minutes), spread over the whole stream
// so that the visits of sites whose partition moved were stored by two
// aggregators. At the end each site's visits, pageviews and visitors
// from the stats API equal the hand counts of what the edge accepted,
// and ClickHouse holds every event once. A link with click_limit 60,
// whose partition moves too, gets 60 clicks spread over the stream: all
// redirect, and it ends limited.
func TestE2EClickHouseMembershipChange(t *testing.T) {
	started := time.Now().UTC()
	srv := chserver.StartT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := newCluster(t)
	v1 := c.start("v1", "us", "voter", "", "--bootstrap-expect", "1")
	chArgs := []string{"--analytics-store", "clickhouse", "--clickhouse-url", srv.URL(), "--clickhouse-database", "waymark"}
	a1 := c.start("a1", "us", "aggregator", v1.gossip, chArgs...)
	a2 := c.start("a2", "us", "aggregator", v1.gossip, chArgs...)
	// Visitors are told apart by their address (X-Forwarded-For from
	// loopback, trusted).
	e1 := c.start("e1", "us", "edge", v1.gossip, "--trusted-proxies", "127.0.0.1/32",
		"--ingest-ip-rate", "100000", "--ingest-site-rate", "100000")
	waitFor(t, "every node ready", 90*time.Second, func() bool {
		for _, p := range []*proc{v1, a1, a2, e1} {
			if !ready(t, p) {
				return false
			}
		}
		return true
	})
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"e1", "a1", "a2", "a3"} {
				if p := c.nodes[name]; p != nil {
					l := strings.Split(p.logs(), "\n")
					t.Logf("%s log tail:\n%s", name, strings.Join(l[max(0, len(l)-20):], "\n"))
				}
			}
		}
	})
	key := c.createOwner("v1", "alice")
	edge := "http://" + e1.http

	// Sites until there are 16 and some of them move at each change:
	// those whose owner differs between {a1, a2} and {a1, a2, a3}, and
	// between that and {a2, a3} (the rendezvous rule, ingest/split.go).
	const visitorsPerSite = 250
	owner := func(names []string, site, code string) string {
		var owners [ingest.Partitions]int
		ingest.PartitionOwners(names, &owners)
		return names[owners[ingest.PartitionOf(&ingest.Event{SiteID: site, Code: code})]]
	}
	var ids []string
	movedJoin, movedLeave := 0, 0
	for len(ids) < 16 || movedJoin < 2 || movedLeave < 2 {
		if len(ids) == 40 {
			t.Fatalf("40 sites and only %d move when a3 joins, %d when a1 leaves", movedJoin, movedLeave)
		}
		r := createRetrying(t, edge+"/v1/sites", key, fmt.Sprintf(`{"domain":"ms-%d.example","timezone":"UTC"}`, len(ids)), fmt.Sprintf("ms-site-%d", len(ids)))
		if r.status != 201 {
			t.Fatalf("create site: %d %s", r.status, r.body)
		}
		id := r.json(t)["id"].(string)
		ids = append(ids, id)
		if owner([]string{"a1", "a2"}, id, "") != owner([]string{"a1", "a2", "a3"}, id, "") {
			movedJoin++
		}
		if owner([]string{"a1", "a2", "a3"}, id, "") != owner([]string{"a2", "a3"}, id, "") {
			movedLeave++
		}
	}
	sites, warm := len(ids), len(ids)-1
	// A link with click_limit 60, whose partition moves at a change: its
	// 60 clicks, spread over the stream, are stored by two aggregators or
	// more, and whichever stores the 60th takes it out of service.
	const limit = 60
	var limited string
	for i := 0; limited == ""; i++ {
		if i == 20 {
			t.Fatal("20 links and none whose partition moves")
		}
		r := createRetrying(t, edge+"/v1/links", key, fmt.Sprintf(`{"url":"https://ms-limited.example/%d","click_limit":%d}`, i, limit), fmt.Sprintf("ms-link-%d", i))
		if r.status != 201 {
			t.Fatalf("create link: %d %s", r.status, r.body)
		}
		code := r.json(t)["code"].(string)
		if owner([]string{"a1", "a2"}, "", code) != owner([]string{"a1", "a2", "a3"}, "", code) ||
			owner([]string{"a1", "a2", "a3"}, "", code) != owner([]string{"a2", "a3"}, "", code) {
			limited = code
		}
	}
	waitFor(t, "the sites known on the edge", 30*time.Second, func() bool {
		r := do(t, "POST", edge+"/api/event", "", fmt.Sprintf(`{"n":"pageview","u":"https://ms-%d.example/warm","d":"ms-%d.example"}`, warm, warm),
			"Content-Type", "text/plain", "Origin", fmt.Sprintf("https://ms-%d.example", warm), "User-Agent", firefox, "X-Forwarded-For", "2001:db8:ffff::1")
		return r.status == 202 && r.header.Get("X-Waymark-Dropped") == ""
	})
	// The warm-up pageview is one more visitor's visit of the last site; the
	// probes before the site was known were refused, not counted.

	// The stream: round r sends the r-th pageview of every visitor with
	// more than r, so every visit spans most of the stream.
	type pv struct{ site, visitor, n int }
	var plan []pv
	kOf := func(s, v int) int { return 1 + (v*7+s)%6 }
	for r := range 6 {
		for s := range sites {
			for v := range visitorsPerSite {
				if kOf(s, v) > r {
					plan = append(plan, pv{s, v, r})
				}
			}
		}
	}
	// The limited link's clicks (site -1), one every len(plan)/limit.
	step := len(plan) / limit
	for j := limit - 1; j >= 0; j-- {
		at := (j + 1) * step
		plan = append(plan[:at], append([]pv{{-1, j, 0}}, plan[at:]...)...)
	}
	var mu sync.Mutex
	redirects, refused := 0, 0       // the limited link's 302s, and anything else
	accepted := make([][]int, sites) // per site, per visitor: pageviews the edge took
	for s := range accepted {
		accepted[s] = make([]int, visitorsPerSite)
	}
	var next, done atomic.Int64
	joined, left := make(chan struct{}), make(chan struct{})
	var held atomic.Int64 // ns the senders waited at the gates
	gate := func(ch chan struct{}) {
		select {
		case <-ch:
		default:
			t0 := time.Now()
			<-ch
			held.Add(int64(time.Since(t0)))
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// About 1,000 a second from the four: the stream lasts about
			// 14 s, across the join (a3 starts in a few seconds) and the
			// leave.
			pace := time.NewTicker(4 * time.Millisecond)
			defer pace.Stop()
			for {
				<-pace.C
				i := int(next.Add(1) - 1)
				if i >= len(plan) {
					return
				}
				// Gates, in case a change is slow: the second half of the
				// stream waits for a3 to store, the last fifth for a1 to
				// be gone.
				if i >= len(plan)/2 {
					gate(joined)
				}
				if i >= len(plan)*4/5 {
					gate(left)
				}
				p := plan[i]
				if p.site < 0 {
					r := do(t, "GET", edge+"/"+limited, "", "", "User-Agent", firefox, "X-Forwarded-For", fmt.Sprintf("2001:db8:c1::%x", p.visitor+1))
					mu.Lock()
					if r.status == 302 {
						redirects++
					} else {
						refused++
					}
					mu.Unlock()
					done.Add(1)
					continue
				}
				body := fmt.Sprintf(`{"n":"pageview","u":"https://ms-%d.example/p/%d","d":"ms-%d.example"}`, p.site, p.n, p.site)
				r := do(t, "POST", edge+"/api/event", "", body, "Content-Type", "text/plain", "Origin", fmt.Sprintf("https://ms-%d.example", p.site),
					"User-Agent", firefox, "X-Forwarded-For", fmt.Sprintf("2001:db8:%x::%x", p.site, p.visitor+1))
				if r.status == 202 && r.header.Get("X-Waymark-Dropped") == "" {
					mu.Lock()
					accepted[p.site][p.visitor]++
					mu.Unlock()
				}
				done.Add(1)
			}
		}()
	}
	t.Cleanup(func() {
		select {
		case <-joined:
		default:
			close(joined)
		}
		select {
		case <-left:
		default:
			close(left)
		}
		wg.Wait()
	})
	acked := func(p *proc) float64 {
		return metric(t, "http://"+p.http, `waymark_clickhouse_receive_segments_total{result="acked"}`)
	}

	// a3 joins a quarter of the way in.
	waitFor(t, "a quarter of the stream sent", 120*time.Second, func() bool { return done.Load() >= int64(len(plan)/4) })
	a3 := c.start("a3", "us", "aggregator", v1.gossip, chArgs...)
	waitFor(t, "a3 storing parts", 90*time.Second, func() bool { return ready(t, a3) && acked(a3) > 0 })
	atJoin := done.Load()
	close(joined)
	if acked(a1) <= 0 || acked(a2) <= 0 {
		t.Fatalf("before the join a1 acked %v and a2 %v segment parts; want some each", acked(a1), acked(a2))
	}

	// a1 leaves a little later, with the stream going on.
	waitFor(t, "more of the stream sent", 120*time.Second, func() bool { return done.Load() >= atJoin+int64(len(plan)/8) })
	if out, errOut, code := runCLI(t, c.env("a1"), "leave"); code != 0 {
		t.Fatalf("a1 leave: exit %d %s %s", code, out, errOut)
	}
	select {
	case <-a1.done:
	case <-time.After(60 * time.Second):
		t.Fatal("a1 did not exit after leave")
	}
	atLeave := done.Load()
	close(left)
	a2At, a3At := acked(a2), acked(a3)
	wg.Wait()
	t.Logf("%d events planned (pageviews and %d clicks); a3 joined after %d, a1 left after %d (senders held at the gates %v in all); %d sites moved at the join, %d at the leave",
		len(plan), limit, atJoin, atLeave, time.Duration(held.Load()).Round(time.Millisecond), movedJoin, movedLeave)
	if atLeave >= int64(len(plan)) {
		t.Fatalf("the stream was over (%d of %d) before a1 left", atLeave, len(plan))
	}

	waitFor(t, "the edge shipped everything", 180*time.Second, func() bool {
		total := 1 // the warm-up
		mu.Lock()
		total += redirects
		for s := range accepted {
			for _, n := range accepted[s] {
				total += n
			}
		}
		mu.Unlock()
		return metric(t, edge, "waymark_ingest_written_events_total") >= float64(total) && shippedAll(t, edge)
	})
	if acked(a2) <= a2At || acked(a3) <= a3At {
		t.Fatalf("after a1 left, a2 acked %v more and a3 %v more; want both to take parts", acked(a2)-a2At, acked(a3)-a3At)
	}

	// The truth, by hand from what the edge accepted: per site, one visit
	// per visitor with a pageview, and its pageviews.
	now := time.Now().UTC()
	rng := "from=" + now.AddDate(0, 0, -1).Format(time.DateOnly) + "&to=" + now.AddDate(0, 0, 1).Format(time.DateOnly)
	sameDay := started.Format(time.DateOnly) == now.Format(time.DateOnly) // a visit across midnight UTC is one visit of two day-visitors
	total := 1
	for s := range sites {
		wantPV, wantV := 0, 0
		for _, n := range accepted[s] {
			wantPV += n
			if n > 0 {
				wantV++
			}
		}
		total += wantPV
		if s == warm {
			wantPV, wantV = wantPV+1, wantV+1 // the warm-up visitor, counted in total already
		}
		if wantV < visitorsPerSite*9/10 {
			t.Fatalf("site %d: the edge accepted pageviews of only %d of %d visitors", s, wantV, visitorsPerSite)
		}
		for _, agg := range []*proc{a2, a3} {
			r := do(t, "GET", "http://"+agg.http+"/v1/sites/"+ids[s]+"/stats/aggregate?tz=UTC&"+rng, key, "")
			if r.status != 200 {
				t.Fatalf("site %d stats through %s: %d %s", s, agg.http, r.status, r.body)
			}
			m := r.json(t)
			pvs, visits, visitors := int(m["pageviews"].(float64)), int(m["visits"].(float64)), int(m["visitors"].(float64))
			if pvs != wantPV {
				t.Fatalf("site %d: %d pageviews; the edge accepted %d", s, pvs, wantPV)
			}
			if sameDay && (visits != wantV || visitors != wantV) {
				t.Fatalf("site %d: %d visits of %d visitors; want %d of %d (one visit each, none split by the moves)", s, visits, visitors, wantV, wantV)
			}
		}
		out, err := srv.Query(ctx, "SELECT count() FROM waymark.events FINAL WHERE kind = 2 AND site = '"+ids[s]+"' FORMAT TabSeparated")
		if n, _ := strconv.Atoi(strings.TrimSpace(out)); err != nil || n != wantPV {
			t.Fatalf("site %d: %s pageviews in ClickHouse (%v); want %d", s, out, err, wantPV)
		}
		// `waymark events count` on either aggregator says the same.
		if s%4 == 0 {
			for _, agg := range []*proc{a2, a3} {
				if n := eventsCount(t, agg, "--site", ids[s]); n != wantPV {
					t.Fatalf("site %d: events count on %s says %d; want %d", s, agg.http, n, wantPV)
				}
			}
		}
	}
	// The limited link: its 60 clicks all redirected (the limit never
	// cuts in early), each stored once, and the 60th took it out of
	// service, whichever aggregator stored it.
	if redirects != limit || refused != 0 {
		t.Fatalf("the limited link redirected %d of its %d clicks (%d refused); want all", redirects, limit, refused)
	}
	out, err := srv.Query(ctx, "SELECT count() FROM waymark.events FINAL WHERE kind = 1 AND bitAnd(flags, 1) = 0 AND code = '"+limited+"' FORMAT TabSeparated")
	if n, _ := strconv.Atoi(strings.TrimSpace(out)); err != nil || n != limit {
		t.Fatalf("the limited link has %s clicks in ClickHouse (%v); want %d", out, err, limit)
	}
	waitFor(t, "the limited link out of service", 30*time.Second, func() bool {
		r := do(t, "GET", edge+"/v1/links/"+limited, key, "")
		return r.status == 200 && r.json(t)["status"] == "limited"
	})
	if n := metric(t, "http://"+a2.http, "waymark_clickhouse_click_limits_reached_total") +
		metric(t, "http://"+a3.http, "waymark_clickhouse_click_limits_reached_total"); n < 1 {
		t.Fatalf("a2 and a3 reached %v click limits; want the limited link's", n)
	}
	total += limit
	// Merged down, every row is one event: nothing stored twice under
	// another key.
	if err := srv.Exec(ctx, "OPTIMIZE TABLE waymark.events FINAL"); err != nil {
		t.Fatal(err)
	}
	out, err = srv.Query(ctx, "SELECT count() FROM waymark.events FORMAT TabSeparated")
	if n, _ := strconv.Atoi(strings.TrimSpace(out)); err != nil || n != total {
		t.Fatalf("%s rows after OPTIMIZE FINAL (%v); want the %d events accepted", out, err, total)
	}
	for _, p := range []*proc{e1, a2, a3, v1} {
		p.stop(t)
	}
}
