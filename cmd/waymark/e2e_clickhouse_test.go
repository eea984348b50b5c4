package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/internal/chserver"
)

// TestE2EClickHouseTwoAggregators runs two edges and two aggregators as
// real processes against one real clickhouse-server: clicks on several
// links and pageviews of a site go through both edges, each sealed
// segment is split by partition and each part stored by its owner; then
// one aggregator is SIGKILLed in the middle of an insert (its
// connection to ClickHouse goes through a proxy that holds the insert
// once its headers and first body bytes are through), and ClickHouse
// itself is SIGKILLed and restarted while events keep coming. Every event the edges accepted is
// counted exactly once (the totals are the responses the test counted),
// in ClickHouse and in the stats API answered from it.
func TestE2EClickHouseTwoAggregators(t *testing.T) {
	started := time.Now().UTC()
	srv := chserver.StartT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// a1 reaches ClickHouse through a proxy that can hold one of its
	// inserts half-sent.
	slow := newThrottle(t, srv.HTTPAddr, 1<<20)

	c := newCluster(t)
	v1 := c.start("v1", "us", "voter", "", "--bootstrap-expect", "1")
	chArgs := func(url string) []string {
		return []string{"--analytics-store", "clickhouse", "--clickhouse-url", url, "--clickhouse-database", "waymark"}
	}
	a1 := c.start("a1", "us", "aggregator", v1.gossip, chArgs("http://"+slow.addr())...)
	a2 := c.start("a2", "us", "aggregator", v1.gossip, chArgs(srv.URL())...)
	// e1 ships to the --aggregator-url list, e2 to the aggregators gossip
	// knows: the two ways an edge finds them.
	list := "http://" + a1.http + ",http://" + a2.http
	e1 := c.start("e1", "us", "edge", v1.gossip, "--aggregator-url", list, "--ingest-ip-rate", "100000")
	e2 := c.start("e2", "us", "edge", v1.gossip, "--ingest-ip-rate", "100000")
	waitFor(t, "every node ready", 90*time.Second, func() bool {
		for _, p := range []*proc{v1, a1, a2, e1, e2} {
			if !ready(t, p) {
				return false
			}
		}
		return true
	})
	key := c.createOwner("v1", "alice")
	edges := []string{"http://" + e1.http, "http://" + e2.http}

	// Links until each aggregator owns one under both namings (URLs for
	// e1, node names for e2), so that both store parts.
	var urlOwners, nameOwners [ingest.Partitions]int
	ingest.PartitionOwners([]string{"http://" + a1.http, "http://" + a2.http}, &urlOwners)
	ingest.PartitionOwners([]string{"a1", "a2"}, &nameOwners)
	var codes []string
	covered := map[string]bool{}
	for i := 0; len(codes) < 4 || len(covered) < 4; i++ {
		if i == 30 {
			t.Fatalf("30 links and still not every aggregator owns one: %v", covered)
		}
		r := createRetrying(t, edges[0]+"/v1/links", key, fmt.Sprintf(`{"url":"https://dest.example/%d"}`, i), fmt.Sprintf("ch-link-%d", i))
		if r.status != 201 {
			t.Fatalf("create link: %d %s", r.status, r.body)
		}
		code := r.json(t)["code"].(string)
		codes = append(codes, code)
		p := ingest.PartitionOf(&ingest.Event{Kind: ingest.KindClick, Code: code})
		covered[fmt.Sprintf("url-%d", urlOwners[p])] = true
		covered[fmt.Sprintf("name-%d", nameOwners[p])] = true
	}
	site := do(t, "POST", edges[0]+"/v1/sites", key, `{"domain":"shop.example","timezone":"UTC"}`)
	if site.status != 201 {
		t.Fatalf("create site: %d %s", site.status, site.body)
	}
	siteID := site.json(t)["id"].(string)
	var mu sync.Mutex
	clicks := map[string]int{}   // 302s per link, counted here
	accepted := map[string]int{} // events each edge took (302s and 202s)
	// Every probe's redirect is a click too, counted as the others.
	waitFor(t, "the links on both edges", 30*time.Second, func() bool {
		for _, e := range edges {
			last := codes[len(codes)-1]
			if do(t, "GET", e+"/"+last, "", "", "User-Agent", firefox).status != 302 {
				return false
			}
			clicks[last]++
			accepted[e]++
		}
		return true
	})
	pageviews := 0 // 202s, not dropped
	pageview := func(e string, i int) bool {
		body := fmt.Sprintf(`{"n":"pageview","u":"https://shop.example/p/%d","d":"shop.example"}`, i)
		r := do(t, "POST", e+"/api/event", "", body, "Content-Type", "text/plain", "Origin", "https://shop.example", "User-Agent", firefox)
		if r.status == 202 && r.header.Get("X-Waymark-Dropped") == "" {
			mu.Lock()
			pageviews++
			accepted[e]++
			mu.Unlock()
			return true
		}
		return false
	}
	waitFor(t, "the site known on both edges", 30*time.Second, func() bool { return pageview(edges[0], -1) && pageview(edges[1], -2) })
	send := func(i int) {
		e := edges[i%2]
		code := codes[i%len(codes)]
		if r := do(t, "GET", e+"/"+code, "", "", "User-Agent", firefox); r.status == 302 {
			mu.Lock()
			clicks[code]++
			accepted[e]++
			mu.Unlock()
		}
		if i%3 == 0 {
			pageview(e, i)
		}
	}
	var sent atomic.Int64
	burst := func(n int) {
		for range n {
			send(int(sent.Add(1) - 1))
		}
	}
	// stream sends about 500 a second until stop is closed; done is
	// closed once it has stopped.
	stream := func(stop <-chan struct{}) (done <-chan struct{}) {
		d := make(chan struct{})
		go func() {
			defer close(d)
			pace := time.NewTicker(2 * time.Millisecond)
			defer pace.Stop()
			for {
				select {
				case <-stop:
					return
				case <-pace.C:
				}
				send(int(sent.Add(1) - 1))
			}
		}()
		return d
	}
	// shipped: each edge wrote every event it took and every one it
	// wrote is acknowledged.
	shipped := func() bool {
		for _, e := range edges {
			mu.Lock()
			n := accepted[e]
			mu.Unlock()
			if w := metric(t, e, "waymark_ingest_written_events_total"); w < float64(n) || !shippedAll(t, e) {
				return false
			}
		}
		return true
	}
	check := func(phase string) {
		t.Helper()
		waitFor(t, phase+": both edges shipped everything", 120*time.Second, shipped)
		mu.Lock()
		want := map[string]int{}
		for k, v := range clicks {
			want[k] = v
		}
		wantPV := pageviews
		mu.Unlock()
		got := map[string]int{}
		out, err := srv.Query(ctx, "SELECT code, count() FROM waymark.events FINAL WHERE kind = 1 GROUP BY code FORMAT TabSeparated")
		if err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Split(line, "\t"); len(f) == 2 {
				got[f[0]], _ = strconv.Atoi(f[1])
			}
		}
		for _, code := range codes {
			if got[code] != want[code] {
				t.Fatalf("%s: link %s has %d clicks in ClickHouse; the edges answered %d redirects", phase, code, got[code], want[code])
			}
		}
		out, err = srv.Query(ctx, "SELECT count() FROM waymark.events FINAL WHERE kind = 2 AND site = '"+siteID+"' FORMAT TabSeparated")
		if n, _ := strconv.Atoi(strings.TrimSpace(out)); err != nil || n != wantPV {
			t.Fatalf("%s: %s pageviews in ClickHouse (%v); the edges accepted %d", phase, out, err, wantPV)
		}
		// The stats API, answered from ClickHouse by the aggregator alive.
		now := time.Now().UTC()
		rng := "from=" + now.AddDate(0, 0, -1).Format(time.DateOnly) + "&to=" + now.AddDate(0, 0, 1).Format(time.DateOnly)
		for _, code := range codes {
			r := do(t, "GET", "http://"+a2.http+"/v1/links/"+code+"/stats?granularity=day&"+rng, key, "")
			if r.status != 200 {
				t.Fatalf("%s: link stats of %s: %d %s", phase, code, r.status, r.body)
			}
			if n := int(r.json(t)["totals"].(map[string]any)["clicks"].(float64)); n != want[code] {
				t.Fatalf("%s: the stats API says %d clicks of %s; the edges answered %d", phase, n, code, want[code])
			}
		}
		// The site: every pageview is one visitor's (one user agent, one
		// address, one day's salt), minutes apart: one visit, unless the
		// test crossed midnight UTC.
		r := do(t, "GET", "http://"+a2.http+"/v1/sites/"+siteID+"/stats/aggregate?tz=UTC&"+rng, key, "")
		if r.status != 200 {
			t.Fatalf("%s: site stats: %d %s", phase, r.status, r.body)
		}
		m := r.json(t)
		if pv := int(m["pageviews"].(float64)); pv != wantPV {
			t.Fatalf("%s: the stats API says %d pageviews; the edges accepted %d (%s)", phase, pv, wantPV, r.body)
		}
		if vs, v := int(m["visits"].(float64)), int(m["visitors"].(float64)); started.Format(time.DateOnly) == time.Now().UTC().Format(time.DateOnly) && (vs != 1 || v != 1) {
			t.Fatalf("%s: %d visits of %d visitors; want 1 of 1, though aggregators died and partitions moved (%s)", phase, vs, v, r.body)
		}
		// e2 has no --aggregator-url: it proxies stats to an aggregator
		// gossip knows.
		r = do(t, "GET", edges[1]+"/v1/links/"+codes[0]+"/stats?granularity=day&"+rng, key, "")
		if r.status != 200 || int(r.json(t)["totals"].(map[string]any)["clicks"].(float64)) != want[codes[0]] {
			t.Fatalf("%s: link stats through e2: %d %s; want %d clicks", phase, r.status, r.body, want[codes[0]])
		}
		t.Logf("%s: %v clicks, %d pageviews, each counted once", phase, want, wantPV)
	}

	// 1. Steady: both aggregators store parts.
	burst(300)
	check("steady")
	for _, a := range []*proc{a1, a2} {
		if n := metric(t, "http://"+a.http, `waymark_clickhouse_receive_segments_total{result="acked"}`); n <= 0 {
			t.Fatalf("aggregator at %s acknowledged %v segment parts; want some on each", a.http, n)
		}
	}

	// 2. SIGKILL a1 in the middle of an insert: the proxy holds the
	// next events insert a1 sends once its first body bytes are through,
	// and a1 is killed while it waits.
	stop := make(chan struct{})
	done := stream(stop)
	stopStream := sync.OnceFunc(func() { close(stop); <-done })
	t.Cleanup(stopStream)
	t.Cleanup(func() {
		if t.Failed() {
			for name, p := range map[string]*proc{"e1": e1, "a1": a1, "a2": a2} {
				l := strings.Split(p.logs(), "\n")
				t.Logf("%s log tail:\n%s", name, strings.Join(l[max(0, len(l)-25):], "\n"))
			}
		}
	})
	held, release := slow.holdNextInsert()
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("a1 sent no events insert within 60s")
	}
	a1.kill()
	release()
	before := sent.Load()
	waitFor(t, "200 more events sent with a1 dead", 60*time.Second, func() bool { return sent.Load()-before >= 200 })
	stopStream()
	check("after a1's SIGKILL")

	// a1 back: it takes its partitions again.
	a1 = c.restart("a1")
	waitFor(t, "a1 ready again", 60*time.Second, func() bool { return ready(t, a1) })
	burst(100)
	check("a1 back")

	// 3. ClickHouse SIGKILLed and restarted while events keep coming:
	// the aggregators are not ready meanwhile, the edges keep every
	// segment and ship it once ClickHouse is back.
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	burst(150)
	waitFor(t, "a2 not ready while ClickHouse is down", 30*time.Second, func() bool { return !ready(t, a2) })
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a2 ready again", 60*time.Second, func() bool { return ready(t, a2) })
	burst(60)
	check("after ClickHouse's restart")

	// Merged down, every row is one event: no event is in twice under
	// another key (a whole segment and its parts, say).
	if err := srv.Exec(ctx, "OPTIMIZE TABLE waymark.events FINAL"); err != nil {
		t.Fatal(err)
	}
	out, err := srv.Query(ctx, "SELECT count() FROM waymark.events FORMAT TabSeparated")
	mu.Lock()
	total := pageviews
	for _, v := range clicks {
		total += v
	}
	mu.Unlock()
	if n, _ := strconv.Atoi(strings.TrimSpace(out)); err != nil || n != total {
		t.Fatalf("%s rows after OPTIMIZE FINAL (%v); want the %d events sent", out, err, total)
	}
	for _, p := range []*proc{e1, e2, a1, a2, v1} {
		p.stop(t)
	}
}

// throttle is a TCP proxy to a backend that forwards what clients send
// at a fixed rate (what the backend answers goes at full speed), and can
// hold an events insert half-sent.
type throttle struct {
	ln      net.Listener
	backend string
	rate    int // bytes per second
	closed  atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
	// armed: hold the next events insert once its first body bytes are
	// forwarded; held is closed then, and the copy waits for release.
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

// insertMarker is how the clickhouse client's events insert starts: its
// statement in the URL of the request line.
var insertMarker = []byte("query=INSERT+INTO+events")

// holdNextInsert arms the hold; release lets the held copy go on (its
// connection is closed by then, when its client was killed).
func (th *throttle) holdNextInsert() (held <-chan struct{}, release func()) {
	th.held, th.release = make(chan struct{}), make(chan struct{})
	th.armed.Store(true)
	return th.held, sync.OnceFunc(func() { close(th.release) })
}

func newThrottle(t *testing.T, backend string, rate int) *throttle {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	th := &throttle{ln: ln, backend: backend, rate: rate}
	th.wg.Add(1)
	go th.accept()
	t.Cleanup(th.close)
	return th
}

func (th *throttle) addr() string { return th.ln.Addr().String() }

func (th *throttle) accept() {
	defer th.wg.Done()
	for {
		c, err := th.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", th.backend)
		if err != nil {
			c.Close()
			continue
		}
		th.mu.Lock()
		th.conns = append(th.conns, c, b)
		th.mu.Unlock()
		th.wg.Add(2)
		go func() { defer th.wg.Done(); io.Copy(c, b); c.Close() }()
		go func() { defer th.wg.Done(); th.slowCopy(b, c); b.Close() }()
	}
}

// slowCopy writes src to dst in 512-byte steps paced by a ticker.
func (th *throttle) slowCopy(dst io.Writer, src io.Reader) {
	const step = 512
	tick := time.NewTicker(time.Second * step / time.Duration(th.rate))
	defer tick.Stop()
	buf := make([]byte, step)
	var tail []byte
	// 1: an events insert's request line went through; 2: its headers
	// too; then, once body bytes are through, it is held.
	state := 0
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			window := append(tail, buf[:n]...)
			from := 0
			if state == 0 && th.armed.Load() {
				if m := bytes.Index(window, insertMarker); m >= 0 {
					state, from = 1, m
				}
			}
			if state == 1 {
				if i := bytes.Index(window[from:], []byte("\r\n\r\n")); i >= 0 {
					state = 2
					if from+i+4 == len(window) {
						window = window[:0] // no body bytes in this read yet
					}
				}
			}
			if state == 2 && len(window) > 0 && th.armed.CompareAndSwap(true, false) {
				close(th.held)
				<-th.release
				state = 0
			}
			tail = append(tail[:0], window[max(0, len(window)-len(insertMarker)):]...)
			<-tick.C
		}
		if err != nil {
			return
		}
	}
}

func (th *throttle) close() {
	th.closed.Store(true)
	th.ln.Close()
	th.mu.Lock()
	for _, c := range th.conns {
		c.Close()
	}
	th.mu.Unlock()
	th.wg.Wait()
}
