package rollup

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/api"
	"github.com/waymark/waymark/rollup/query"
)

// TestDroppedEventsInAnswers ships a segment whose edge dropped events
// (drop tallies beside three clicks) and checks that every answer over
// the hours of those drops carries their sum, once, however often the
// segment is sent.
func TestDroppedEventsInAnswers(t *testing.T) {
	clock := &testClock{now: base}
	a := openTest(t, testConfig(t, t.TempDir(), clock))
	srv := startServer(t, a)
	url := startStats(t, a)
	h := base.Add(-3 * time.Hour) // 09:00 UTC
	hour := h.UnixMilli() / msPerHour
	ref := ingest.SegmentRef{Node: "edge-1", Inc: 1, Seq: 1}
	seg := ingest.BuildSegmentParts(ref, base,
		[]ingest.Event{
			click("d", 1, genCode, h, false),
			click("d", 2, genCode, h.Add(10*time.Minute), false),
			click("d", 3, genCode, h.Add(70*time.Minute), false),
		},
		[]ingest.DropTally{
			{Scope: ingest.ScopeLink, Name: genCode, Hour: hour, Count: 7},
			{Scope: ingest.ScopeLink, Name: genCode, Hour: hour + 1, Count: 2},
			{Scope: ingest.ScopeLink, Name: "other01", Hour: hour, Count: 100},
			{Scope: ingest.ScopeSite, Name: genSite, Hour: hour, Count: 5},
			{Scope: ingest.ScopeUnknown, Hour: hour, Count: 9},
		})
	for range 2 { // a retry adds nothing
		res := srv.post(t, testToken, "zstd", encodeBatch(t, []ingest.BatchSegment{{Ref: ref, Data: seg}}))
		if res.status != http.StatusOK || len(res.acked) != 1 {
			t.Fatalf("ship: status %d, acked %v; want 200 and the segment", res.status, res.acked)
		}
	}

	// By hand: 7 in 09:00-10:00, 2 in 10:00-11:00 for the link.
	for _, c := range []struct {
		from, to time.Time
		want     int64
	}{
		{h, h.Add(2 * time.Hour), 9},
		{h, h.Add(time.Hour), 7},
		{h.Add(90 * time.Minute), h.Add(91 * time.Minute), 2}, // a range inside an hour gets the hour's
		{h.Add(2 * time.Hour), base, 0},
		{h.Add(-24 * time.Hour), base, 9},
	} {
		ls, err := a.LinkStats(genCode, query.Range{From: c.from, To: c.to}, query.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if ls.DroppedEvents != c.want {
			t.Errorf("link %s..%s: dropped %d; want %d", c.from.Format("15:04"), c.to.Format("15:04"), ls.DroppedEvents, c.want)
		}
	}
	ls, err := a.LinkStats(genCode, query.Range{From: h, To: base}, query.Hour)
	if err != nil || ls.Totals.Clicks != 3 {
		t.Fatalf("clicks %d (%v); want the 3 written, tallies are not clicks", ls.Totals.Clicks, err)
	}

	// The HTTP answers: link breakdown, site aggregate, Plausible v2 meta.
	q := "from=2026-11-30&to=2026-11-30&tz=UTC"
	_, _, body := call(t, "GET", url+"/v1/links/"+genCode+"/stats/breakdown?dimension=country&"+q, "key-a", "")
	var lb query.LinkBreakdown
	if err := json.Unmarshal(body, &lb); err != nil || lb.DroppedEvents != 9 || lb.Total != 3 {
		t.Errorf("link breakdown: %s (%v); want dropped_events 9, total 3", body, err)
	}
	_, _, body = call(t, "GET", url+"/v1/sites/"+genSite+"/stats/aggregate?"+q, "key-a", "")
	var agg api.SiteAggregateAnswer
	if err := json.Unmarshal(body, &agg); err != nil || agg.DroppedEvents != 5 {
		t.Errorf("site aggregate: %s (%v); want dropped_events 5", body, err)
	}
	_, _, body = call(t, "POST", url+"/api/v2/query", "key-a",
		`{"site_id":"ny.example","metrics":["visitors"],"date_range":["2026-11-30","2026-11-30"]}`)
	var v2 struct{ Meta map[string]any }
	if err := json.Unmarshal(body, &v2); err != nil || v2.Meta["dropped_events"] != float64(5) {
		t.Errorf("v2: %s (%v); want meta.dropped_events 5", body, err)
	}
	_, _, body = call(t, "POST", url+"/api/v2/query", "key-a",
		`{"site_id":"ny.example","metrics":["visitors"],"date_range":["2026-11-01","2026-11-29"]}`)
	var v2none struct{ Meta map[string]any }
	if err := json.Unmarshal(body, &v2none); err != nil || v2none.Meta["dropped_events"] != nil {
		t.Errorf("v2 without drops: %s (%v); want no meta.dropped_events", body, err)
	}

	// Retention takes the tallies with their day.
	cfgDays := 2 * 24 * time.Hour
	a.cfg.Retention = cfgDays
	clock.Set(base.Add(3 * 24 * time.Hour))
	if err := a.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if n, err := a.DroppedEvents(ingest.ScopeLink, genCode, query.Range{From: h, To: base}); err != nil || n != 0 {
		t.Errorf("after retention: dropped %d (%v); want 0", n, err)
	}
}
