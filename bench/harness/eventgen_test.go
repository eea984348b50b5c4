package harness

import (
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
)

func spreadTestConfig() SpreadConfig {
	return SpreadConfig{
		Seed: 7, Events: 20_000, Start: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Days: 3,
		Sites: []string{"s1", "s2", "s3"}, Links: []string{"l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8", "l9"},
		Visitors: 2000, Pages: 50, ClickShare: 0.4, Node: "gen", Region: "eu",
	}
}

// drain reads the whole stream, hashing every event's encoding.
func drain(t *testing.T, next func(*ingest.Event) bool) ([]ingest.Event, [32]byte) {
	t.Helper()
	h := sha256.New()
	var out []ingest.Event
	var ev ingest.Event
	for next(&ev) {
		out = append(out, ev)
		h.Write(ingest.AppendEvent(nil, &ev))
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return out, sum
}

func TestSpreadGen(t *testing.T) {
	cfg := spreadTestConfig()
	g, err := NewSpreadGen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	evs, sum := drain(t, g.Next)
	g2, _ := NewSpreadGen(cfg)
	_, sum2 := drain(t, g2.Next)
	if sum != sum2 {
		t.Error("two streams of the same config differ")
	}
	cfg.Seed++
	g3, _ := NewSpreadGen(cfg)
	if _, sum3 := drain(t, g3.Next); sum3 == sum {
		t.Error("another seed gave the same stream")
	}
	cfg.Seed--

	if len(evs) != cfg.Events || g.Total() != cfg.Events {
		t.Fatalf("got %d events (Total %d); want exactly %d", len(evs), g.Total(), cfg.Events)
	}
	start, end := cfg.Start.UnixMilli(), cfg.Start.AddDate(0, 0, cfg.Days).UnixMilli()
	kinds := map[ingest.Kind]int{}
	ids := map[[16]byte]bool{}
	perLink := map[string]int{}
	days := map[int64]bool{}
	bots := 0
	for i, ev := range evs {
		if i > 0 && ev.Time < evs[i-1].Time {
			t.Fatalf("event %d at %d is before event %d at %d", i, ev.Time, i-1, evs[i-1].Time)
		}
		if ev.Time < start || ev.Time >= end {
			t.Fatalf("event %d at %v is outside the span", i, time.UnixMilli(ev.Time).UTC())
		}
		kinds[ev.Kind]++
		ids[ev.ID] = true
		days[ev.Time/86_400_000] = true
		if ev.Bot() {
			bots++
		}
		firstHalfHour := ev.Time%86_400_000 < 30*60_000
		switch {
		case ev.Kind == ingest.KindClick:
			perLink[ev.Code]++
			if ev.SiteID != "" || ev.Path != "" || ev.PrevVisitorHash != 0 {
				t.Fatalf("click %d has site fields: %+v", i, ev)
			}
		case ev.SiteID == "" || ev.Path == "" || ev.Name == "":
			t.Fatalf("site event %d lacks site, path or name: %+v", i, ev)
		case firstHalfHour != (ev.PrevVisitorHash != 0):
			t.Fatalf("site event %d at %v: previous-day hash %x; want one exactly in the first 30 minutes of a day", i, time.UnixMilli(ev.Time).UTC(), ev.PrevVisitorHash)
		}
		if ev.VisitorHash == 0 || ev.Node != "gen" || ev.Region != "eu" {
			t.Fatalf("event %d: visitor %x, node %q, region %q", i, ev.VisitorHash, ev.Node, ev.Region)
		}
	}
	if len(ids) != len(evs) {
		t.Errorf("%d distinct ids for %d events", len(ids), len(evs))
	}
	if len(days) != cfg.Days {
		t.Errorf("events on %d days; want %d", len(days), cfg.Days)
	}
	if c := float64(kinds[ingest.KindClick]) / float64(len(evs)); c < 0.35 || c > 0.45 {
		t.Errorf("click share %.3f; want about 0.4", c)
	}
	for _, k := range []ingest.Kind{ingest.KindPageview, ingest.KindEngagement, ingest.KindCustom} {
		if kinds[k] == 0 {
			t.Errorf("no %v events", k)
		}
	}
	if b := float64(bots) / float64(len(evs)); b < 0.005 || b > 0.06 {
		t.Errorf("bot share %.3f; want a few percent", b)
	}
	// Zipf popularity: the first link takes far more than a tenth.
	if perLink["l0"] < 2*kinds[ingest.KindClick]/10 {
		t.Errorf("most popular link has %d of %d clicks; want a Zipf head", perLink["l0"], kinds[ingest.KindClick])
	}
	// Every event fits the segment format's limits.
	seg := ingest.BuildSegment(ingest.SegmentRef{Node: "gen", Inc: 1, Seq: 1}, cfg.Start, evs)
	n := 0
	if _, err := ingest.ReadSegment(seg, func(*ingest.Event) error { n++; return nil }); err != nil || n != len(evs) {
		t.Errorf("ReadSegment of the generated events: %d, %v", n, err)
	}
}

func TestSpreadGenRejects(t *testing.T) {
	for _, cfg := range []SpreadConfig{
		{Events: 0, Days: 1, Sites: []string{"s"}},
		{Events: 10, Days: 0, Sites: []string{"s"}},
		{Events: 10, Days: 1},
		{Events: 10, Days: 1, Sites: []string{"s"}, ClickShare: 1.5},
	} {
		if _, err := NewSpreadGen(cfg); err == nil {
			t.Errorf("NewSpreadGen(%+v) succeeded; want an error", cfg)
		}
	}
}

func TestHotGenExactDailyCounts(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	cfg := HotConfig{Seed: 3, Start: start, Days: 3, Code: "hot", SiteID: "site", ClicksPerDay: 3000, PageviewsPerDay: 2000, Pages: 100}
	g, err := NewHotGen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	evs, sum := drain(t, g.Next)
	g2, _ := NewHotGen(cfg)
	if _, sum2 := drain(t, g2.Next); sum2 != sum {
		t.Error("two streams of the same config differ")
	}
	if len(evs) != g.Total() || g.Total() != 3*5000 {
		t.Fatalf("got %d events, Total %d; want %d", len(evs), g.Total(), 3*5000)
	}
	clicks, pvs := map[int64]int{}, map[int64]int{}
	visitors := map[uint64]bool{}
	for i, ev := range evs {
		if i > 0 && ev.Time < evs[i-1].Time {
			t.Fatalf("event %d is out of order", i)
		}
		d := (ev.Time - start.UnixMilli()) / 86_400_000
		switch ev.Kind {
		case ingest.KindClick:
			clicks[d]++
			visitors[ev.VisitorHash] = true
			if ev.Code != "hot" || ev.Country == "" && ev.Device == "" {
				t.Fatalf("click %d: %+v", i, ev)
			}
		case ingest.KindPageview:
			pvs[d]++
			if ev.SiteID != "site" || !strings.HasPrefix(ev.Path, "/") || ev.Bot() {
				t.Fatalf("pageview %d: %+v", i, ev)
			}
		default:
			t.Fatalf("event %d has kind %v", i, ev.Kind)
		}
	}
	for d := range int64(3) {
		if clicks[d] != 3000 || pvs[d] != 2000 {
			t.Errorf("day %d: %d clicks, %d pageviews; want 3000 and 2000", d, clicks[d], pvs[d])
		}
	}
	// 9000 clicks over populations of 1000 a day: many repeat visitors.
	if n := len(visitors); n < 300 || n > 3000 {
		t.Errorf("%d distinct link visitor hashes over 3 days; want between 300 and 3000", n)
	}
	if _, err := NewHotGen(HotConfig{Start: start.Add(time.Hour), Days: 1}); err == nil {
		t.Error("a Start off midnight was accepted")
	}
}

func TestAppendEventTSV(t *testing.T) {
	ev := ingest.Event{
		Kind: ingest.KindCustom, Flags: ingest.FlagBot, Time: 1764583200123,
		ID:          [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0, 1, 2, 3, 4, 5, 6, 0xff},
		VisitorHash: 42, SiteID: "s\t1", Name: "Sign\nup", Path: `/a\b`, Country: "DE",
		EngagedMS: 7, ScrollDepth: 50, Props: []ingest.Prop{{Key: "it's", Value: `c:\x`}, {Key: "k", Value: "v"}},
	}
	got := string(AppendEventTSV(nil, &ev))
	// By hand, column by column.
	want := "2025-12-01 10:00:00\t123\t4\t1\t01234567-89ab-cdef-0001-0203040506ff\t42\t0" +
		"\t\ts\\t1\tSign\\nup\t\t\t/a\\\\b\t\t\t\t\t\t\tDE\t\t\t\t7\t50" +
		"\t['it\\'s','k']\t['c:\\\\x','v']\n"
	if got != want {
		t.Errorf("AppendEventTSV:\n got %q\nwant %q", got, want)
	}
	if n := strings.Count(got, "\t"); n != 26 {
		t.Errorf("%d tabs; want 26 for 27 columns", n)
	}
}
