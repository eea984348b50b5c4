package clickhouse_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/internal/chserver"
	"github.com/waymark/waymark/rollup"
	"github.com/waymark/waymark/rollup/clickhouse"
	"github.com/waymark/waymark/rollup/query"
)

// The generated world: three UTC days of site visits (pageviews,
// engagements after them, custom events, bot visitors) and clicks on two
// links, built the way rollup's generated-world test builds its events,
// without visits across midnight (the one place where the embedded
// store's visitors, a visit's first hash, and raw hashes differ; see
// DESIGN.md).
var genDay0 = time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)

const (
	genSite      = "site-gen"
	genVisitors  = 3000
	genSegEvents = 1000
)

var genLinks = []string{"lnk-a", "lnk-b"}

type genTruth struct {
	// per UTC day (0..2), exact, from the generator itself
	clicks, botClicks       map[string][3]int64
	pageviews, events, bots [3]int64
	linkVisitors            map[string][4]map[uint64]bool // [3] is the whole range
	siteVisitors            [4]map[uint64]bool
}

func genHash(v, day int) uint64 {
	x := uint64(v)<<8 | uint64(day) + 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func generateWorld(seed uint64) ([]ingest.Event, *genTruth) {
	rng := rand.New(rand.NewPCG(seed, seed^0x51))
	tr := &genTruth{clicks: map[string][3]int64{}, botClicks: map[string][3]int64{}, linkVisitors: map[string][4]map[uint64]bool{}}
	for i := range tr.siteVisitors {
		tr.siteVisitors[i] = map[uint64]bool{}
	}
	for _, l := range genLinks {
		var m [4]map[uint64]bool
		for i := range m {
			m[i] = map[uint64]bool{}
		}
		tr.linkVisitors[l] = m
	}
	var evs []ingest.Event
	n := uint64(0)
	add := func(ev ingest.Event) {
		n++
		ev.ID = [16]byte{0: byte(seed), 8: byte(n >> 24), 9: byte(n >> 16), 10: byte(n >> 8), 11: byte(n)}
		evs = append(evs, ev)
	}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	for v := range genVisitors {
		bot := v%20 == 0
		country := pick([]string{"DE", "US", "FR", "JP", "BR"})
		for range 1 + rng.IntN(3) {
			day := rng.IntN(3)
			hash := genHash(v, day)
			// From 00:30 to 22:30: a visit (at most 5 pages of 8 minutes)
			// neither crosses midnight nor needs the previous day's hash.
			t := genDay0.AddDate(0, 0, day).Add(30*time.Minute).UnixMilli() + rng.Int64N(22*3600_000)
			for p := range 1 + rng.IntN(5) {
				ev := ingest.Event{Kind: ingest.KindPageview, Name: "pageview", Time: t, VisitorHash: hash, SiteID: genSite,
					Path: pick([]string{"/", "/pricing", "/docs", "/blog"}), Country: country, Node: "edge-1", Device: "desktop"}
				if p == 0 {
					ev.ReferrerHost = pick([]string{"", "www.google.com", "t.co"})
				}
				if bot {
					ev.Flags = ingest.FlagBot
				}
				add(ev)
				dwell := int64(5_000 + rng.IntN(8*60_000))
				if rng.IntN(3) > 0 {
					eng := ev
					eng.Kind, eng.Name, eng.Time, eng.EngagedMS, eng.ScrollDepth = ingest.KindEngagement, "engagement", t+dwell, uint64(dwell/2), uint8(rng.IntN(101))
					eng.ReferrerHost = ""
					add(eng)
				}
				if rng.IntN(6) == 0 {
					c := ev
					c.Kind, c.Name, c.Time, c.Props = ingest.KindCustom, "signup", t+dwell/2, []ingest.Prop{{Key: "plan", Value: pick([]string{"free", "pro"})}}
					add(c)
				}
				t += dwell + 1000
			}
		}
	}
	for i := range 4000 {
		code := genLinks[rng.IntN(2)]
		t := genDay0.UnixMilli() + rng.Int64N(3*24*3600_000)
		ev := ingest.Event{Kind: ingest.KindClick, Time: t, Code: code, VisitorHash: uint64(1 + rng.IntN(700)), Node: "edge-1", Country: pick([]string{"DE", "US"})}
		if i%10 == 0 {
			ev.Flags = ingest.FlagBot
		}
		add(ev)
	}
	// Edges ship in time order.
	slices.SortStableFunc(evs, func(a, b ingest.Event) int { return int(a.Time - b.Time) })
	for i := range evs {
		ev := &evs[i]
		d := int((ev.Time - genDay0.UnixMilli()) / (24 * 3600_000))
		switch {
		case ev.Kind == ingest.KindClick && ev.Bot():
			c := tr.botClicks[ev.Code]
			c[d]++
			tr.botClicks[ev.Code] = c
		case ev.Kind == ingest.KindClick:
			c := tr.clicks[ev.Code]
			c[d]++
			tr.clicks[ev.Code] = c
			tr.linkVisitors[ev.Code][d][ev.VisitorHash] = true
			tr.linkVisitors[ev.Code][3][ev.VisitorHash] = true
		case ev.Bot():
			tr.bots[d]++
		default:
			if ev.Kind == ingest.KindPageview {
				tr.pageviews[d]++
			}
			if ev.Kind != ingest.KindEngagement {
				tr.events[d]++
			}
			tr.siteVisitors[d][ev.VisitorHash] = true
			tr.siteVisitors[3][ev.VisitorHash] = true
		}
	}
	return evs, tr
}

// segments cuts the stream into sealed segments of one edge.
func segments(evs []ingest.Event) [][]byte {
	var out [][]byte
	for i, seq := 0, uint64(1); i < len(evs); i, seq = i+genSegEvents, seq+1 {
		part := evs[i:min(i+genSegEvents, len(evs))]
		out = append(out, ingest.BuildSegment(ingest.SegmentRef{Node: "edge-1", Inc: 1, Seq: seq}, time.UnixMilli(part[0].Time), part))
	}
	return out
}

// embedded opens a rollup aggregator and ships segs to its segments
// endpoint over loopback TCP, as an edge's shipper does.
func embedded(t *testing.T, segs [][]byte) *rollup.Aggregator {
	t.Helper()
	now := genDay0.AddDate(0, 0, 3).Add(time.Hour)
	a, err := rollup.Open(rollup.Config{
		Dir: t.TempDir(), Token: "tok", Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewSet(),
		Now: func() time.Time { return now }, LateWindow: 10 * 24 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: a.SegmentsHandler(), MaxRequestBodySize: 64 << 20}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	for i := 0; i < len(segs); i += 4 {
		var batch []ingest.BatchSegment
		for _, seg := range segs[i:min(i+4, len(segs))] {
			var h ingest.SegmentHeader
			h, _ = ingest.ReadSegment(seg, func(*ingest.Event) error { return nil })
			batch = append(batch, ingest.BatchSegment{Ref: h.Ref(), Data: seg})
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+ingest.ShipPath, bytes.NewReader(ingest.AppendBatch(nil, batch)))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", ingest.ShipContentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var ack ingest.ShipAck
		if resp.StatusCode != 200 || json.Unmarshal(body, &ack) != nil || len(ack.Acked) != len(batch) {
			t.Fatalf("embedded aggregator answered %d %s to a batch of %d", resp.StatusCode, body, len(batch))
		}
	}
	return a
}

// visitorsBound is the bound DESIGN.md states for uniqCombined here.
const visitorsBound = 0.015

func near(got uint64, want int, bound float64) bool {
	return math.Abs(float64(got)-float64(want)) <= bound*float64(want)
}

func TestSameAnswersAsTheEmbeddedStore(t *testing.T) {
	chserver.Require(t)
	evs, tr := generateWorld(7)
	segs := segments(evs)
	emb := embedded(t, segs)
	srv := chserver.StartT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ch, err := clickhouse.New(clickhouse.Config{URL: srv.URL(), Database: "same"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, seg := range segs {
		if _, err := ch.StoreSegment(ctx, seg); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d events in %d segments", len(evs), len(segs))
	from, to := genDay0, genDay0.AddDate(0, 0, 3)
	r := query.Range{From: from, To: to, Loc: time.UTC}

	for _, code := range genLinks {
		got, err := ch.LinkStats(ctx, code, from, to)
		if err != nil {
			t.Fatal(err)
		}
		want, err := emb.LinkStats(code, r, query.Day)
		if err != nil {
			t.Fatal(err)
		}
		if len(want.Series) != 3 {
			t.Fatalf("embedded series of %s has %d days", code, len(want.Series))
		}
		for d := range 3 {
			g, w := got.Series[d], want.Series[d]
			if g.Clicks != w.Clicks || g.Clicks != tr.clicks[code][d] {
				t.Errorf("%s day %d: clicks %d, embedded %d, generated %d", code, d, g.Clicks, w.Clicks, tr.clicks[code][d])
			}
			if exact := len(tr.linkVisitors[code][d]); !near(g.Visitors, exact, visitorsBound) || !near(w.UniqueVisitors, exact, 3*0.0081) {
				t.Errorf("%s day %d: visitors %d, embedded %d, exact %d", code, d, g.Visitors, w.UniqueVisitors, exact)
			}
		}
		if got.Totals.Clicks != want.Totals.Clicks || got.Totals.BotClicks != want.Totals.BotClicks {
			t.Errorf("%s totals: clicks %d/%d bots, embedded %d/%d", code, got.Totals.Clicks, got.Totals.BotClicks, want.Totals.Clicks, want.Totals.BotClicks)
		}
		if exact := len(tr.linkVisitors[code][3]); !near(got.Totals.Visitors, exact, visitorsBound) {
			t.Errorf("%s total visitors %d (embedded %d); exact %d", code, got.Totals.Visitors, want.Totals.UniqueVisitors, exact)
		}
	}

	got, err := ch.SiteStats(ctx, genSite, from, to)
	if err != nil {
		t.Fatal(err)
	}
	want, err := emb.SiteTimeseries(genSite, r, query.Day, nil)
	if err != nil {
		t.Fatal(err)
	}
	for d := range 3 {
		g, w := got.Series[d], want[d]
		if g.Pageviews != w.Pageviews || g.Events != w.Events || g.BotEvents != w.BotEvents ||
			g.Pageviews != tr.pageviews[d] || g.Events != tr.events[d] || g.BotEvents != tr.bots[d] {
			t.Errorf("site day %d: pageviews/events/bot events %d/%d/%d, embedded %d/%d/%d, generated %d/%d/%d", d,
				g.Pageviews, g.Events, g.BotEvents, w.Pageviews, w.Events, w.BotEvents, tr.pageviews[d], tr.events[d], tr.bots[d])
		}
		if exact := len(tr.siteVisitors[d]); !near(g.Visitors, exact, visitorsBound) || !near(w.Visitors, exact, 3*0.0081) {
			t.Errorf("site day %d: visitors %d, embedded %d, exact %d", d, g.Visitors, w.Visitors, exact)
		}
	}
	agg, err := emb.SiteAggregate(genSite, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Totals.Pageviews != agg.Pageviews || got.Totals.Events != agg.Events || got.Totals.BotEvents != agg.BotEvents {
		t.Errorf("site totals %+v; embedded %+v", got.Totals, agg)
	}
	if exact := len(tr.siteVisitors[3]); !near(got.Totals.Visitors, exact, visitorsBound) || !near(agg.Visitors, exact, 3*0.0081) {
		t.Errorf("site visitors %d, embedded %d, exact %d", got.Totals.Visitors, agg.Visitors, exact)
	}
	t.Logf("site visitors over the range: clickhouse %d, embedded %d, exact %d", got.Totals.Visitors, agg.Visitors, len(tr.siteVisitors[3]))
}
