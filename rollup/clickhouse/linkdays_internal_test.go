package clickhouse

import (
	"math"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// TestLinkDayRowsGiveTheHandCounts: three whole days of a link answered
// from day rows give the hand counts; a late click into day 0 changes the
// answer at once and again after the day is written anew; and a day
// marker of the old hour versions, even as the newest marker of its day,
// is never read. By hand (k1, country EE unless said):
//
//	day 0: 01:00 v1, 05:00 v2, 10:00 bot v9, 23:30 v1  -> 3 clicks, 2 visitors
//	day 1: 12:00 v3 DE, 13:00 v1                       -> 2 clicks, 2 visitors
//	day 2: 00:10 v4                                    -> 1 click, 1 visitor
//	totals 6 clicks, 1 bot, 4 visitors; EE 5 clicks 3 visitors, DE 1 and 1
//	late, day 0: 07:00 v5 DE -> day 0 4 clicks 3 visitors; totals 7 clicks,
//	5 visitors; DE 2 clicks, 2 visitors
//
// Link k2 has one click on day 0 (not k1's), and link big 3,000 visitors
// on day 1 (125 an hour: every hour a list, the day a sketch), within
// the stated 2.43 % and equal to the set of all 3,000 hashes' estimate.
func TestLinkDayRowsGiveTheHandCounts(t *testing.T) {
	c := newClient(t, sharedServer(t))
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 3).Add(time.Hour))
	de := func(ev ingest.Event) ingest.Event { ev.Country = "DE"; return ev }
	mustStore(t, b, segment("e1", 1, []ingest.Event{
		click("k1", at(0, 1, 0, 0, 0), 1, false), click("k1", at(0, 5, 0, 0, 0), 2, false), click("k1", at(0, 10, 0, 0, 0), 9, true),
		click("k2", at(0, 11, 0, 0, 0), 7, false), click("k1", at(0, 23, 30, 0, 0), 1, false),
		de(click("k1", at(1, 12, 0, 0, 0), 3, false)), click("k1", at(1, 13, 0, 0, 0), 1, false),
		click("k1", at(2, 0, 10, 0, 0), 4, false),
	}), Stored)
	var big []ingest.Event
	var bigHashes []uint64
	for i := range 3000 {
		v := uint64(i+1) * 0x9E3779B97F4A7C15
		big = append(big, click("big", at(1, i/125, i%60, 0, 0), v, false))
		bigHashes = append(bigHashes, v)
	}
	for i := 0; i < len(big); i += 200 {
		mustStore(t, b, segment("e2", uint64(i/200+1), big[i:i+200]), Stored)
	}
	mustMaterialize(t, b)
	m := b.c.m
	if n := m.linkDaysMaterialized.Get(); n < 3 {
		t.Fatalf("%d link days materialized; want days 0, 1 and 2", n)
	}
	days := dayRange(0, 3)
	type want struct {
		series           [3]int64
		seriesVisitors   [3]uint64
		clicks, bots     int64
		visitors         uint64
		ee, eeV, deC, dV int64
	}
	ask := func(what string, w want, fromDays int) {
		t.Helper()
		read := m.linkDaysRead.Get()
		ls, err := b.LinkStats("k1", days, query.Day)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 3 {
			if ls.Series[k].Clicks != w.series[k] || ls.Series[k].UniqueVisitors != w.seriesVisitors[k] {
				t.Errorf("%s: day %d %d clicks, %d visitors; want %d, %d", what, k, ls.Series[k].Clicks, ls.Series[k].UniqueVisitors, w.series[k], w.seriesVisitors[k])
			}
		}
		if ls.Totals.Clicks != w.clicks || ls.Totals.BotClicks != w.bots || ls.Totals.UniqueVisitors != w.visitors {
			t.Errorf("%s: totals %+v; want %d clicks, %d bots, %d visitors", what, ls.Totals, w.clicks, w.bots, w.visitors)
		}
		bd, err := b.LinkBreakdown("k1", "country", days, 10)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][2]int64{}
		for _, r := range bd.Results {
			got[r.Value] = [2]int64{r.Clicks, int64(r.UniqueVisitors)}
		}
		if len(got) != 2 || got["EE"] != [2]int64{w.ee, w.eeV} || got["DE"] != [2]int64{w.deC, w.dV} {
			t.Errorf("%s: breakdown %+v; want EE %d clicks %d visitors, DE %d and %d", what, bd.Results, w.ee, w.eeV, w.deC, w.dV)
		}
		if n := m.linkDaysRead.Get() - read; n != uint64(2*fromDays) {
			t.Errorf("%s: %d days read from day rows by the two questions; want %d", what, n, 2*fromDays)
		}
	}
	before := want{[3]int64{3, 2, 1}, [3]uint64{2, 2, 1}, 6, 1, 4, 5, 3, 1, 1}
	ask("day rows", before, 3)
	ask("day rows, cached", before, 3)

	// big: day 1 from its day row, a sketch of 3,000 hashes.
	ls, err := b.LinkStats("big", days, query.Day)
	if err != nil {
		t.Fatal(err)
	}
	exact := linkSetOf(bigHashes).estimate()
	if got := ls.Series[1].UniqueVisitors; got != exact || math.Abs(float64(got)-3000) > 0.0243*3000 {
		t.Errorf("big, day 1: %d visitors; want the set's estimate %d, within 2.43 %% of 3000", got, exact)
	}
	if ls.Series[1].Clicks != 3000 || ls.Totals.UniqueVisitors != exact {
		t.Errorf("big: day 1 %d clicks, totals %+v; want 3000 and %d visitors", ls.Series[1].Clicks, ls.Totals, exact)
	}

	// The old day 0 marker, kept to be put back below.
	old, err := b.c.linkDayMarkers(testCtx(t), dec1.Unix()/86400, dec1.Unix()/86400+1)
	if err != nil || len(old[dec1.Unix()/86400]) != 1 {
		t.Fatalf("day 0 markers %v, %v; want one", old, err)
	}
	mustStore(t, b, segment("e1", 2, []ingest.Event{de(click("k1", at(0, 7, 0, 0, 0), 5, false))}), Stored)
	late := want{[3]int64{4, 2, 1}, [3]uint64{3, 2, 1}, 7, 1, 5, 5, 3, 2, 2}
	ask("late click, before re-materializing", late, 0) // the horizon at 07:00 of day 0
	mustMaterialize(t, b)
	ask("re-materialized", late, 3)

	// A marker of day 0's old hour versions put back as the newest, the
	// new one merged away: day 0 comes from hour rows, never the old day
	// rows; the next pass writes the day again.
	d0 := dec1.Unix() / 86400
	stale := old[d0][0]
	if err := b.c.insertLinkDay(testCtx(t), d0, uint64(time.Now().Add(time.Hour).UnixNano()), stale.hours); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(testCtx(t), "OPTIMIZE TABLE link_days FINAL"); err != nil {
		t.Fatal(err)
	}
	b = newTestBackend(t, c, dec1.AddDate(0, 0, 3).Add(time.Hour)) // no cached day rows
	m = b.c.m
	ask("old marker newest", late, 2)
	mustMaterialize(t, b)
	ask("day 0 written again", late, 3)
}
