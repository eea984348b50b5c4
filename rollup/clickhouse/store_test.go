package clickhouse

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/waymark/waymark/ingest"
)

// dec1 is 2025-12-01 00:00 UTC.
var dec1 = time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)

func at(day int, hh, mm, ss, ms int) int64 {
	return dec1.AddDate(0, 0, day).Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute +
		time.Duration(ss)*time.Second + time.Duration(ms)*time.Millisecond).UnixMilli()
}

func click(code string, tm int64, visitor uint64, bot bool) ingest.Event {
	ev := ingest.Event{Kind: ingest.KindClick, Time: tm, VisitorHash: visitor, Code: code, Node: "e1", Country: "EE"}
	if bot {
		ev.Flags = ingest.FlagBot
	}
	return ev
}

func siteEvent(kind ingest.Kind, name string, tm int64, visitor uint64, bot bool) ingest.Event {
	ev := ingest.Event{Kind: kind, Name: name, Time: tm, VisitorHash: visitor, SiteID: "s1", Path: "/", Node: "e1"}
	if bot {
		ev.Flags = ingest.FlagBot
	}
	return ev
}

func segment(node string, seq uint64, evs []ingest.Event) []byte {
	for i := range evs {
		evs[i].ID[0], evs[i].ID[15] = byte(seq), byte(i) // distinct, like the writer's
	}
	return ingest.BuildSegment(ingest.SegmentRef{Node: node, Inc: 1, Seq: seq}, time.UnixMilli(evs[0].Time), evs)
}

// handSegments are the events whose numbers are worked out by hand in
// TestStatsMatchHandCounts, in two segments.
func handSegments() [][]byte {
	pv, eng, custom := ingest.KindPageview, ingest.KindEngagement, ingest.KindCustom
	a := []ingest.Event{
		click("k1", at(-1, 23, 59, 59, 999), 1, false), // before the range
		click("k1", at(0, 0, 0, 0, 0), 1, false),
		click("k1", at(0, 9, 0, 0, 0), 1, false),
		click("k1", at(0, 23, 59, 59, 999), 2, false),
		click("k1", at(0, 12, 0, 0, 0), 9, true),
		click("k2", at(0, 12, 0, 0, 0), 1, false), // another link
		siteEvent(pv, "pageview", at(0, 10, 0, 0, 0), 10, false),
		siteEvent(pv, "pageview", at(0, 10, 1, 0, 0), 10, false),
		siteEvent(eng, "engagement", at(0, 10, 2, 0, 0), 10, false),
		siteEvent(custom, "signup", at(0, 11, 0, 0, 0), 11, false),
		siteEvent(pv, "pageview", at(0, 11, 0, 0, 0), 12, true),
		siteEvent(eng, "engagement", at(0, 11, 1, 0, 0), 12, true),
		siteEvent(eng, "engagement", at(0, 11, 5, 0, 0), 13, false),
	}
	b := []ingest.Event{
		siteEvent(pv, "pageview", at(1, 23, 59, 59, 999), 10, false),
		click("k1", at(2, 8, 0, 0, 0), 2, false),
		click("k1", at(2, 8, 0, 0, 1), 3, false),
		siteEvent(custom, "signup", at(2, 13, 0, 0, 0), 14, false),
		click("k1", at(3, 0, 0, 0, 0), 4, false),                // after the range
		siteEvent(pv, "pageview", at(3, 0, 0, 0, 0), 15, false), // after the range
	}
	b[3].Props = []ingest.Prop{{Key: "plan", Value: "it's\tpro"}}
	return [][]byte{segment("e1", 1, a), segment("e1", 2, b)}
}

func TestStatsMatchHandCounts(t *testing.T) {
	c := newClient(t, sharedServer(t))
	ctx := testCtx(t)
	for round, want := range []Outcome{Stored, Duplicate} {
		for _, seg := range handSegments() {
			res, err := c.StoreSegment(ctx, seg)
			if err != nil || res.Outcome != want {
				t.Fatalf("round %d: StoreSegment = %+v, %v; want %v", round, res, err, want)
			}
		}
	}
	from, to := dec1, dec1.AddDate(0, 0, 3)
	link, err := c.LinkStats(ctx, "k1", from, to)
	if err != nil {
		t.Fatal(err)
	}
	// By hand: Dec 1 has k1 clicks by visitors 1, 1, 2 and a bot's; Dec 2
	// none; Dec 3 clicks by 2 and 3; the clicks at Nov 30 23:59:59.999
	// and Dec 4 00:00 are outside [Dec 1, Dec 4).
	wantLink := []Day{
		{"2025-12-01", Counts{Clicks: 3, BotClicks: 1, Visitors: 2}},
		{"2025-12-02", Counts{}},
		{"2025-12-03", Counts{Clicks: 2, Visitors: 2}},
	}
	if !reflect.DeepEqual(link.Series, wantLink) {
		t.Errorf("k1 series = %+v; want %+v", link.Series, wantLink)
	}
	if want := (Counts{Clicks: 5, BotClicks: 1, Visitors: 3}); link.Totals != want {
		t.Errorf("k1 totals = %+v; want %+v", link.Totals, want)
	}
	site, err := c.SiteStats(ctx, "s1", from, to)
	if err != nil {
		t.Fatal(err)
	}
	// By hand: Dec 1: pageviews by 10 twice, a custom event by 11, a bot
	// pageview and engagement (12: two bot events, no visitor),
	// engagements by 10 and 13 (visitors, not events);
	// Dec 2: a pageview by 10 at 23:59:59.999; Dec 3: a custom event by
	// 14; the pageview at Dec 4 00:00 is outside.
	wantSite := []Day{
		{"2025-12-01", Counts{Pageviews: 2, Events: 3, BotEvents: 2, Visitors: 3}},
		{"2025-12-02", Counts{Pageviews: 1, Events: 1, Visitors: 1}},
		{"2025-12-03", Counts{Events: 1, Visitors: 1}},
	}
	if !reflect.DeepEqual(site.Series, wantSite) {
		t.Errorf("s1 series = %+v; want %+v", site.Series, wantSite)
	}
	if want := (Counts{Pageviews: 3, Events: 5, BotEvents: 2, Visitors: 4}); site.Totals != want {
		t.Errorf("s1 totals = %+v; want %+v", site.Totals, want)
	}
	if !reflect.DeepEqual(site.Estimated, []string{"visitors"}) {
		t.Errorf("estimated = %v; want [visitors]", site.Estimated)
	}
	// The custom event's property came through RowBinary intact.
	r, err := c.Query(ctx, "SELECT prop_keys, prop_values FROM events WHERE name = 'signup' AND visitor = 14")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.Data[0][0]) + " " + string(r.Data[0][1]); got != `["plan"] ["it's\tpro"]` {
		t.Errorf("props read back as %s", got)
	}
	if _, err := c.LinkStats(ctx, "k1", from.Add(time.Hour), to); !errors.Is(err, ErrBadRange) {
		t.Errorf("range off midnight: %v; want ErrBadRange", err)
	}
}

func TestSameIdentityOtherBytesIsAConflict(t *testing.T) {
	srv := sharedServer(t)
	set := metrics.NewSet()
	c, err := New(Config{URL: srv.URL(), Database: newClient(t, srv).Database(), Metrics: set})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	first := segment("e1", 7, []ingest.Event{click("k1", at(0, 1, 0, 0, 0), 1, false)})
	if res, err := c.StoreSegment(ctx, first); err != nil || res.Outcome != Stored {
		t.Fatalf("StoreSegment = %+v, %v", res, err)
	}
	other := segment("e1", 7, []ingest.Event{click("k1", at(0, 1, 0, 0, 0), 1, false), click("k1", at(0, 2, 0, 0, 0), 2, false)})
	if _, err := c.StoreSegment(ctx, other); !errors.Is(err, ErrConflict) {
		t.Fatalf("same identity, other bytes: %v; want ErrConflict", err)
	}
	st, err := c.LinkStats(ctx, "k1", dec1, dec1.AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if st.Totals.Clicks != 1 {
		t.Errorf("clicks = %d after a refused conflict; want the first segment's 1", st.Totals.Clicks)
	}
	bad := append([]byte(nil), first...)
	bad[len(bad)/2] ^= 0xff
	if _, err := c.StoreSegment(ctx, bad); !errors.Is(err, ingest.ErrCorruptSegment) {
		t.Errorf("damaged segment: %v; want ErrCorruptSegment", err)
	}
	// A damaged segment never stored before: not one row reaches the table.
	fresh := segment("e1", 9, []ingest.Event{click("k9", at(0, 1, 0, 0, 0), 1, false), click("k9", at(0, 1, 0, 0, 0), 1, false)})
	fresh[len(fresh)-20] ^= 0xff
	if _, err := c.StoreSegment(ctx, fresh); !errors.Is(err, ingest.ErrCorruptSegment) {
		t.Errorf("damaged fresh segment: %v; want ErrCorruptSegment", err)
	}
	if r, err := c.Query(ctx, "SELECT count() FROM events WHERE code = 'k9'"); err != nil || string(r.Data[0][0]) != `"0"` {
		t.Errorf("rows of the damaged segment: %v, %v; want none", r, err)
	}
	// A segment without events (only a seal) is recorded all the same.
	empty := ingest.BuildSegment(ingest.SegmentRef{Node: "e1", Inc: 1, Seq: 8}, dec1, nil)
	for _, want := range []Outcome{Stored, Duplicate} {
		if res, err := c.StoreSegment(ctx, empty); err != nil || res.Outcome != want || res.Events != 0 {
			t.Errorf("empty segment: %+v, %v; want %v", res, err, want)
		}
	}
	var out bytes.Buffer
	set.WritePrometheus(&out)
	for _, want := range []string{
		`waymark_clickhouse_segments_total{outcome="stored"} 2`,
		`waymark_clickhouse_segments_total{outcome="duplicate"} 1`,
		`waymark_clickhouse_segments_total{outcome="conflict"} 1`,
		`waymark_clickhouse_segments_total{outcome="malformed"} 2`,
		`waymark_clickhouse_segments_total{outcome="error"} 0`,
		`waymark_clickhouse_events_inserted_total 1`,
	} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, out.String())
		}
	}
}
