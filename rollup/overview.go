package rollup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// overviewEstimated names the estimates of a LinkOverview.
var overviewEstimated = []string{"today.unique_visitors", "yesterday.unique_visitors", "last_7_days.unique_visitors",
	"previous_7_days.unique_visitors", "last_30_days.unique_visitors"}

// peakHours is how far back the peak hour looks: 30 days of hours, all of
// them held by the hour tier at its default retention.
const peakHours = 30 * 24

// LinkOverview computes a link's overview at the aggregator's now, with
// days in loc.
func (a *Aggregator) LinkOverview(code string, loc *time.Location) (*query.LinkOverview, error) {
	if loc == nil {
		loc = time.UTC
	}
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	now := a.cfg.Now()
	local := now.In(loc)
	midnight := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc)
	daysBack := func(n int) time.Time { return midnight.AddDate(0, 0, -n) }
	out := &query.LinkOverview{Code: code, Timezone: loc.String(), Now: now, Estimated: overviewEstimated}
	for _, w := range []struct {
		dst      *query.OverviewWindow
		from, to time.Time
	}{
		{&out.Today, midnight, now},
		{&out.Yesterday, daysBack(1), midnight},
		{&out.Last7Days, daysBack(7), midnight},
		{&out.Previous7Days, daysBack(14), daysBack(7)},
		{&out.Last30Days, daysBack(30), midnight},
	} {
		if err := a.overviewWindow(code, w.from, w.to, loc, w.dst); err != nil {
			return nil, err
		}
	}
	var err error
	if out.AllTimeClicks, err = a.linkClicks(code); err != nil {
		return nil, err
	}
	out.DailyGrowth = growth(out.Today.Clicks, out.Yesterday.Clicks)
	out.WeeklyGrowth = growth(out.Last7Days.Clicks, out.Previous7Days.Clicks)

	// Peak hour and last click both come from the hour rows of the last
	// 30 days: one row per hour, read with one iterator.
	h1 := hourOf(now.UnixMilli()) + 1
	h0 := h1 - min(h1, peakHours)
	clicks := make([]int64, h1-h0)
	err = a.hourTotals(kindLink, code, granHour, h0, h1, func(h uint32, c *counters) {
		clicks[h-h0] += c[fCount]
	})
	if err != nil {
		return nil, err
	}
	out.PeakHour = peakHour(clicks, h0, loc)
	if out.LastClick, err = a.lastClick(code, clicks, h0, now); err != nil {
		return nil, err
	}
	return out, nil
}

// overviewWindow fills w with the link's clicks and unique visitors over
// [from, to).
func (a *Aggregator) overviewWindow(code string, from, to time.Time, loc *time.Location, w *query.OverviewWindow) error {
	w.From, w.To = from, to
	if !to.After(from) {
		return nil // the first instant of the day
	}
	r := query.Range{From: from, To: to, Loc: loc}
	h0, h1 := hoursOf(r)
	rows, coarse, err := a.sumRows(kindLink, code, dimCode(dimTotal), h0, h1, false, nil)
	if err != nil {
		return err
	}
	w.Coarse = coarse
	if c := rows[""]; c != nil {
		w.Clicks = c[fCount]
	}
	if w.Clicks == 0 {
		return nil
	}
	sks, err := a.setsOf(kindLink, code, dimTotal, r, []string{""})
	if err != nil {
		return err
	}
	w.UniqueVisitors = estimateOf(sks[""])
	return nil
}

// growth is the change from before to now in percent, one decimal (half
// to even); nil when before is 0.
func growth(now, before int64) *float64 {
	if before == 0 {
		return nil
	}
	g := math.RoundToEven(float64(now-before)/float64(before)*1000) / 10
	return &g
}

// peakHour adds clicks (per UTC hour from h0) up by the hour of the day
// in loc and returns the busiest (the earliest on a tie), or nil when
// there are none. In a zone whose offset is not a whole number of hours,
// a UTC hour counts for the local hour it starts in.
func peakHour(clicks []int64, h0 uint32, loc *time.Location) *query.PeakHour {
	var byHour [24]int64
	var total int64
	for i, n := range clicks {
		if n == 0 {
			continue
		}
		byHour[hourStart(h0+uint32(i)).In(loc).Hour()] += n
		total += n
	}
	if total == 0 {
		return nil
	}
	best := 0
	for h := 1; h < 24; h++ {
		if byHour[h] > byHour[best] {
			best = h
		}
	}
	return &query.PeakHour{Hour: best, Clicks: byHour[best], From: hourStart(h0).In(loc),
		To: hourStart(h0 + uint32(len(clicks))).In(loc)}
}

func hourStart(h uint32) time.Time { return time.UnixMilli(int64(h) * msPerHour).UTC() }

// lastClickTries bounds the hours lastClick reads raw events of: an hour
// whose row has clicks may hold none before now (an edge clock ahead).
const lastClickTries = 3

// lastClick finds the newest non-bot click no later than now: the newest
// hour with clicks in the hour rows, then that hour's raw events.
func (a *Aggregator) lastClick(code string, clicks []int64, h0 uint32, now time.Time) (*time.Time, error) {
	tries := 0
	for i := len(clicks) - 1; i >= 0 && tries < lastClickTries; i-- {
		if clicks[i] == 0 {
			continue
		}
		tries++
		t, err := a.lastClickIn(code, h0+uint32(i), now.UnixMilli())
		if err != nil {
			return nil, err
		}
		if t >= 0 {
			v := time.UnixMilli(t).UTC()
			return &v, nil
		}
	}
	return nil, nil
}

// lastClickIn returns the time of the newest non-bot click of code in hour
// h no later than limit, or -1. Blocks are kept per UTC day in order of
// their first event and span at most maxBlockSpan, so the scan reads the
// blocks that begin from that long before the hour to its end, newest
// first, skips those whose last event is not newer than the best found,
// and stops once no older block can hold a newer one. Within a block only
// records holding the code's bytes are decoded.
func (a *Aggregator) lastClickIn(code string, h uint32, limit int64) (int64, error) {
	lo := int64(h) * msPerHour
	hi := min(lo+msPerHour, limit+1)
	d := dayOf(lo)
	lower := binary.BigEndian.AppendUint64(dayPrefix(tabEvent, d), uint64(max(lo-maxBlockSpan, 0)))
	upper := binary.BigEndian.AppendUint64(dayPrefix(tabEvent, d), uint64(hi))
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return -1, fmt.Errorf("cannot read raw events: %w", err)
	}
	defer it.Close()
	newest := int64(-1)
	needle := []byte(code)
	var ev ingest.Event
	for ok := it.Last(); ok; ok = it.Prev() {
		_, first, last, err := blockSpan(it.Key(), it.Value())
		if err != nil {
			return -1, err
		}
		if newest >= 0 && first+maxBlockSpan <= newest {
			break // every older block ends before the newest found
		}
		if last < lo || last <= newest {
			continue
		}
		err = forEachRecord(it.Key(), it.Value(), func(rec []byte) error {
			if !bytes.Contains(rec, needle) {
				return nil
			}
			if err := ingest.DecodeEvent(rec, &ev); err != nil {
				return fmt.Errorf("cannot read raw block %x: %w", it.Key(), err)
			}
			if ev.Kind == ingest.KindClick && ev.Time >= lo && ev.Time < hi && ev.Time > newest && ev.Code == code && !ev.Bot() {
				newest = ev.Time
			}
			return nil
		})
		if err != nil {
			return -1, err
		}
	}
	return newest, it.Error()
}

// hourTotals calls fn with the total row (dimTotal) of an entity for every
// hour in [h0, h1) of an hour-sized tier (granHour, or granCross for the
// crossing rows at each boundary) that has one. Hours older than the hour
// tier are skipped: their rows are gone, or about to be. An entity's
// rowset of a bucket holds every dimension under composite keys; the
// total is the composite of dimTotal and "".
func (a *Aggregator) hourTotals(kind byte, entity string, gran byte, h0, h1 uint32, fn func(h uint32, c *counters)) error {
	hcut, _ := a.tierCutoffs(a.cfg.Now())
	h0 = max(h0, hcut)
	if h1 <= h0 {
		return nil
	}
	total := dimCode(dimTotal)
	rr := a.newRowReader()
	defer rr.close()
	var kb []byte
	for h := h0; h < h1; h++ {
		kb = rowPrefix(kb[:0], tabRows, gran, h, kind, entity, "")
		v, err := rr.get(kb)
		if err != nil {
			return err
		}
		if v == nil {
			continue
		}
		// Composites sort by dimension code, so the total, dimTotal's
		// composite, is the rowset's first entry when it has one: the
		// rest of a busy site's hour (every page, source, country) is not
		// decoded.
		err = forEachRow(v, func(comp []byte, c *counters) error {
			if string(comp) == total {
				fn(h, c)
			}
			return errStopScan
		})
		if err != nil && err != errStopScan {
			return fmt.Errorf("cannot read rollup %x: %w", kb, err)
		}
	}
	return nil
}
