package clickhouse_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/internal/chserver"
	"github.com/waymark/waymark/rollup/clickhouse"
	"github.com/waymark/waymark/rollup/query"
)

// BenchmarkSiteQueries asks one busy site's 30-day daily series and
// page breakdown (issue 14's questions) of ClickHouse from site rows
// (cold: a new Backend per question, so nothing cached in process; warm:
// the same Backend again, its first question cold; materializer: the
// Backend that materialized, which cached the day rows it wrote) and
// from raw events (NoRows), in one run. The
// site has WAYMARK_SITEBENCH_PV pageviews a day (default 50,000, a tenth
// of querybench's 500k) in visits of 1 to ~10 pageviews 20 s to 3 min
// apart (2 a visit on average, an engagement after most, a custom event
// in some) from half as many visitors a day, over 500 pages (skewed).
// The embedded store is not loaded (querybench measured it: 1-14 ms).
// Every HTTP request to ClickHouse is traced: the time to the answer's
// headers is ClickHouse's (it buffers the whole answer first,
// wait_end_of_query), the time to read the body is the transfer, the
// rest of the question is Go; logged per question.
//
//	go test ./rollup/clickhouse/ -run '^$' -bench BenchmarkSiteQueries -benchtime 10x
func BenchmarkSiteQueries(b *testing.B) {
	chserver.Require(b)
	perDay := 50_000
	if s := os.Getenv("WAYMARK_SITEBENCH_PV"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		perDay = n
	}
	evs := siteBenchEvents(perDay)
	srv := chserver.StartT(b)
	tr := &queryTracer{next: http.DefaultTransport}
	c, err := clickhouse.New(clickhouse.Config{URL: srv.URL(), Database: "sitebench", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	cfg := clickhouse.BackendConfig{Now: benchNow}
	ch := clickhouse.NewBackend(c, cfg)
	var segs [][]byte
	for i, seq := 0, uint64(1); i < len(evs); i, seq = i+50_000, seq+1 {
		part := evs[i:min(i+50_000, len(evs))]
		segs = append(segs, ingest.BuildSegment(ingest.SegmentRef{Node: "e1", Inc: 1, Seq: seq}, time.UnixMilli(part[0].Time), part))
	}
	t0 := time.Now()
	storeAll(b, ch, segs)
	if err := c.Exec(ctx, "OPTIMIZE TABLE events FINAL"); err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	units, err := ch.MaterializeOnce(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d events (%d pageviews a day) stored in %s; %d units materialized in %s", len(evs), perDay,
		t1.Sub(t0).Round(time.Millisecond), units, time.Since(t1).Round(time.Millisecond))
	rawCfg := cfg
	rawCfg.NoRows, rawCfg.MaxEvents = true, 50_000_000
	raw := clickhouse.NewBackend(c, rawCfg)
	warm := clickhouse.NewBackend(c, cfg)
	r := query.Range{From: benchEnd.AddDate(0, 0, -30), To: benchEnd, Loc: time.UTC}
	// A cold question gets a new Backend; the one before is closed first,
	// untimed: Close waits for its background cache fill (fillDays), which
	// would otherwise compete with the next question (one process has one
	// Backend).
	var last *clickhouse.Backend
	coldNew := func() query.Backend { last = clickhouse.NewBackend(c, cfg); return last }
	closeLast := func() {
		if last != nil {
			last.Close()
			last = nil
		}
	}
	for _, be := range []struct {
		name string
		b    func() query.Backend
	}{
		{"rows-cold", coldNew},
		{"rows-warm", func() query.Backend { return warm }},
		// The Backend that materialized: it cached the day rows it wrote,
		// as a node's does (the API and the loop share one).
		{"rows-materializer", func() query.Backend { return ch }},
		{"raw", func() query.Backend { return raw }},
	} {
		for _, q := range []struct {
			name string
			run  func(query.Backend) error
		}{
			{"site-series-30d", func(x query.Backend) error { _, err := x.SiteTimeseries("busy", r, query.Day, nil); return err }},
			{"site-breakdown-page", func(x query.Backend) error {
				_, err := x.SiteBreakdown("busy", "page", r, 10, nil)
				return err
			}},
		} {
			b.Run(be.name+"/"+q.name, func(b *testing.B) {
				if be.name == "raw" && b.N > 3 {
					b.N = 3 // seconds a question
				}
				b.ReportAllocs()
				tr.reset()
				t0 := time.Now()
				sitePercentiles(b, closeLast, func() error { return q.run(be.b()) })
				tr.log(b, time.Since(t0), b.N)
			})
		}
	}
}

// sitePercentiles is reportPercentiles with an untimed step before each
// question.
func sitePercentiles(b *testing.B, before func(), run func() error) {
	took := make([]time.Duration, 0, b.N)
	for range b.N {
		before()
		t0 := time.Now()
		if err := run(); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	before()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[(len(took)*99)/100].Microseconds())/1000, "p99-ms")
}

// siteBenchEvents is 30 days of one site, "busy", with perDay pageviews
// a day (see BenchmarkSiteQueries), in time order.
func siteBenchEvents(perDay int) []ingest.Event {
	rng := rand.New(rand.NewPCG(5, 6))
	start := benchEnd.AddDate(0, 0, -30).UnixMilli()
	const dayMS = 86_400_000
	pages := make([]string, 500)
	for i := range pages {
		pages[i] = fmt.Sprintf("/p/%d", i)
	}
	pages[0] = "/"
	countries := []string{"DE", "US", "FR", "JP", "BR", "EE", "IN", "GB"}
	refs := []string{"", "", "www.google.com", "news.ycombinator.com", "t.co", "duckduckgo.com"}
	evs := make([]ingest.Event, 0, perDay*30*19/10)
	n := uint64(0)
	id := func() [16]byte {
		n++
		var b [16]byte
		for i := range 8 {
			b[7-i] = byte(n >> (8 * i))
		}
		return b
	}
	visitors := uint64(perDay / 2)
	for day := range int64(30) {
		for pv := 0; pv < perDay; {
			v := 1 + rng.Uint64N(visitors)
			t := start + day*dayMS + rng.Int64N(dayMS)
			country, ref := countries[rng.IntN(len(countries))], refs[rng.IntN(len(refs))]
			for p := 0; ; p++ {
				ev := ingest.Event{Kind: ingest.KindPageview, Name: "pageview", ID: id(), Time: t, SiteID: "busy",
					VisitorHash: mixForBench(v*31 + uint64(t/dayMS)), Path: pages[rng.IntN(rng.IntN(len(pages))+1)], Country: country,
					Device: "desktop", Browser: "Firefox", OS: "Linux", Node: "e1"}
				if p == 0 {
					ev.ReferrerHost = ref
				}
				evs = append(evs, ev)
				pv++
				if rng.IntN(4) > 0 {
					e := ev
					e.ID, e.Kind, e.Name, e.Time, e.ReferrerHost = id(), ingest.KindEngagement, "engagement", t+15_000, ""
					e.EngagedMS, e.ScrollDepth = uint64(5_000+rng.IntN(60_000)), uint8(rng.IntN(101))
					evs = append(evs, e)
				}
				if rng.IntN(20) == 0 {
					e := ev
					e.ID, e.Kind, e.Name, e.Time, e.ReferrerHost = id(), ingest.KindCustom, "Signup", t+16_000, ""
					evs = append(evs, e)
				}
				if rng.IntN(2) == 0 {
					break
				}
				t += 20_000 + rng.Int64N(160_000)
			}
		}
	}
	slicesSortByTime(evs)
	return evs
}

// mixForBench spreads small visitor numbers over 64 bits, as the edges'
// keyed hashes are.
func mixForBench(x uint64) uint64 {
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// queryTracer times each request to ClickHouse: to its answer's headers
// (the server's work: the answer is buffered before it is sent) and to
// the end of its body (the transfer).
type queryTracer struct {
	next http.RoundTripper
	mu   sync.Mutex
	by   map[string]*traced // by the statement's first words
}

type traced struct {
	n                int
	server, transfer time.Duration
	bytes            int64
}

func (q *queryTracer) reset() {
	q.mu.Lock()
	q.by = map[string]*traced{}
	q.mu.Unlock()
}

func (q *queryTracer) RoundTrip(req *http.Request) (*http.Response, error) {
	var sql []byte
	if req.Body != nil {
		sql, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(sql))
	}
	if len(sql) == 0 {
		sql = []byte(req.URL.Query().Get("query"))
	}
	key := traceKey(string(sql))
	t0 := time.Now()
	resp, err := q.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	server := time.Since(t0)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	transfer := time.Since(t0) - server
	resp.Body = io.NopCloser(bytes.NewReader(body))
	q.mu.Lock()
	if q.by != nil {
		t := q.by[key]
		if t == nil {
			t = &traced{}
			q.by[key] = t
		}
		t.n++
		t.server += server
		t.transfer += transfer
		t.bytes += int64(len(body))
	}
	q.mu.Unlock()
	return resp, err
}

// traceKey names a statement by its table and first columns.
func traceKey(sql string) string {
	from := ""
	if i := strings.Index(sql, " FROM "); i >= 0 {
		f := strings.Fields(sql[i+6:])
		if len(f) > 0 {
			from = f[0]
		}
	}
	head := sql
	if len(head) > 40 {
		head = head[:40]
	}
	return from + ": " + strings.Join(strings.Fields(head), " ")
}

// log writes the per-question split: ClickHouse, transfer, Go.
func (q *queryTracer) log(b *testing.B, total time.Duration, n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var server, transfer time.Duration
	keys := make([]string, 0, len(q.by))
	for k, t := range q.by {
		keys = append(keys, k)
		server += t.server
		transfer += t.transfer
	}
	slices.Sort(keys)
	per := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000/float64(n)) }
	b.Logf("per question: %s total = ClickHouse %s + transfer %s + Go %s", per(total), per(server), per(transfer), per(total-server-transfer))
	for _, k := range keys {
		t := q.by[k]
		b.Logf("  %.1f requests %-70q ClickHouse %s, transfer %s, %d bytes", float64(t.n)/float64(n), k, per(t.server), per(t.transfer), t.bytes/int64(n))
	}
}
