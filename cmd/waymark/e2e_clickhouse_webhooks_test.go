package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/internal/chserver"
)

// TestE2EClickHouseWebhookClicksThroughKill: link.clicked is at least
// once on ClickHouse aggregators. Two aggregators share a real
// clickhouse-server; an edge streams clicks of links both own. a1 is
// SIGKILLed while one of its events inserts is held half-sent (its
// connection to ClickHouse goes through a proxy): that part's clicks are
// in a1's outbox already, ClickHouse never recorded the part, so the
// edge's retry is stored and queued again by a2, and a1, restarted,
// delivers its copy too. Every click the edge redirected is delivered,
// each id at least once, and some (the held part's) twice.
func TestE2EClickHouseWebhookClicksThroughKill(t *testing.T) {
	srv := chserver.StartT(t)
	slow := newThrottle(t, srv.HTTPAddr, 1<<20)
	c := newCluster(t)
	v1 := c.start("v1", "us", "voter", "", "--bootstrap-expect", "1", "--webhook-allow-private")
	chArgs := func(url string) []string {
		return []string{"--analytics-store", "clickhouse", "--clickhouse-url", url, "--clickhouse-database", "waymark",
			"--webhook-allow-private", "--webhook-retry-base", "100ms"}
	}
	a1 := c.start("a1", "us", "aggregator", v1.gossip, chArgs("http://"+slow.addr())...)
	a2 := c.start("a2", "us", "aggregator", v1.gossip, chArgs(srv.URL())...)
	e1 := c.start("e1", "us", "edge", v1.gossip, "--webhook-allow-private")
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
			for _, name := range []string{"e1", "a1", "a2"} {
				l := strings.Split(c.nodes[name].logs(), "\n")
				t.Logf("%s log tail:\n%s", name, strings.Join(l[max(0, len(l)-20):], "\n"))
			}
		}
	})
	key := c.createOwner("v1", "alice")
	edge := "http://" + e1.http
	rcv := startReceiver(t)
	_, secret := createWebhook(t, edge, key, rcv.url(), "link.clicked")
	rcv.setSecret(secret)

	// Links until each aggregator owns two.
	var owners [ingest.Partitions]int
	ingest.PartitionOwners([]string{"a1", "a2"}, &owners)
	var codes []string
	owned := [2]int{}
	for i := 0; owned[0] < 2 || owned[1] < 2; i++ {
		if i == 30 {
			t.Fatalf("30 links and the aggregators own %v", owned)
		}
		code := createCode(t, edge, key, fmt.Sprintf("https://ch-hook.example/%d", i))
		codes = append(codes, code)
		owned[owners[ingest.PartitionOf(&ingest.Event{Kind: ingest.KindClick, Code: code})]]++
	}
	var mu sync.Mutex
	redirects := map[string]int{}
	click := func(code string) {
		if r := do(t, "GET", edge+"/"+code, "", "", "User-Agent", firefox); r.status == 302 {
			mu.Lock()
			redirects[code]++
			mu.Unlock()
		}
	}
	// delivered: clicks per link by unique id, unique ids, and every
	// click delivered (duplicates included).
	delivered := func() (map[string]int, int, int) {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		per, ids, all := map[string]int{}, map[string]bool{}, 0
		for _, d := range rcv.got {
			if d.Type != "link.clicked" {
				continue
			}
			clicks, _ := d.Data["clicks"].([]any)
			for _, x := range clicks {
				m := x.(map[string]any)
				all++
				if id := m["id"].(string); !ids[id] {
					ids[id] = true
					per[m["code"].(string)]++
				}
			}
		}
		return per, len(ids), all
	}
	// Every link clicked once and delivered: both aggregators' replicas
	// know the webhook.
	waitFor(t, "a first click of every link delivered", 60*time.Second, func() bool {
		per, _, _ := delivered()
		for _, code := range codes {
			if per[code] == 0 {
				click(code)
			}
		}
		per, _, _ = delivered()
		for _, code := range codes {
			if per[code] == 0 {
				return false
			}
		}
		return true
	})

	// Clicks stream; a1's next events insert is held and a1 killed.
	stop, done := make(chan struct{}), make(chan struct{})
	sent := 0
	go func() {
		defer close(done)
		pace := time.NewTicker(3 * time.Millisecond)
		defer pace.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-pace.C:
			}
			click(codes[i%len(codes)])
			mu.Lock()
			sent++
			mu.Unlock()
		}
	}()
	stopStream := sync.OnceFunc(func() { close(stop); <-done })
	t.Cleanup(stopStream)
	held, release := slow.holdNextInsert()
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("a1 sent no events insert within 60s")
	}
	a1.kill()
	release()
	mu.Lock()
	before := sent
	mu.Unlock()
	waitFor(t, "300 more clicks with a1 dead", 60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return sent-before >= 300 })
	stopStream()
	a1 = c.restart("a1")
	waitFor(t, "a1 ready again", 60*time.Second, func() bool { return ready(t, a1) })
	for i := range 40 {
		click(codes[i%len(codes)])
	}

	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, v := range redirects {
			n += v
		}
		return n
	}
	waitFor(t, "the edge shipped everything", 120*time.Second, func() bool {
		return metric(t, edge, "waymark_ingest_written_events_total") >= float64(total()) && shippedAll(t, edge)
	})
	waitForQuiet(90*time.Second, func() bool { _, n, _ := delivered(); return n >= total() })
	per, n, all := delivered()
	mu.Lock()
	want := map[string]int{}
	for k, v := range redirects {
		want[k] = v
	}
	mu.Unlock()
	for _, code := range codes {
		if per[code] != want[code] {
			t.Fatalf("link %s: %d clicks delivered (by id); the edge redirected %d (all: %v of %v)", code, per[code], want[code], per, want)
		}
	}
	t.Logf("%d clicks, each delivered; %d deliveries of a click in all (%d more than once)", n, all, all-n)
	if all == n {
		t.Fatal("no click delivered twice: the held insert's clicks should have been queued by a1 and, on the retry, by a2")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := srv.Query(ctx, "SELECT count() FROM waymark.events FINAL WHERE kind = 1 FORMAT TabSeparated")
	if err != nil || strings.TrimSpace(out) != fmt.Sprint(n) {
		t.Fatalf("%s clicks in ClickHouse (%v); want the %d redirected, each once", out, err, n)
	}
	if bad := rcv.badOnes(); len(bad) > 0 {
		t.Fatalf("deliveries that did not verify: %v", bad)
	}
	for _, p := range []*proc{e1, a1, a2, v1} {
		p.stop(t)
	}
}
