package rollup

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
)

// MaxTail bounds Tail's n.
const MaxTail = 10000

// Filter selects raw events. The zero Filter selects every event, bots
// included.
type Filter struct {
	Code     string // only clicks on this link code
	SiteID   string // only events of this site
	BotsOnly bool   // only bot-flagged events
}

func (f Filter) match(ev *ingest.Event) bool {
	return (f.Code == "" || ev.Code == f.Code) &&
		(f.SiteID == "" || ev.SiteID == f.SiteID) &&
		(!f.BotsOnly || ev.Bot())
}

// counter names the exact counter that answers f, if one does.
func (f Filter) counter() (class byte, name string, ok bool) {
	switch {
	case f.Code != "" && f.SiteID != "":
		return 0, "", false
	case f.Code != "":
		if f.BotsOnly {
			return classCodeBot, f.Code, true
		}
		return classCode, f.Code, true
	case f.SiteID != "":
		if f.BotsOnly {
			return classSiteBot, f.SiteID, true
		}
		return classSite, f.SiteID, true
	case f.BotsOnly:
		return classBots, "", true
	}
	return classAll, "", true
}

// Count returns how many raw events the aggregator holds that match f. It
// reads one counter for every filter except Code and SiteID together,
// which scans the raw events.
func (a *Aggregator) Count(f Filter) (uint64, error) {
	if err := a.enter(); err != nil {
		return 0, err
	}
	defer a.leave()
	class, name, ok := f.counter()
	if !ok {
		var n uint64
		err := a.scan(true, func(ev *ingest.Event) bool {
			if f.match(ev) {
				n++
			}
			return true
		})
		return n, err
	}
	var c counters
	if err := getCounters(a.db, appendTotalKey(nil, class, name), &c); err != nil {
		return 0, fmt.Errorf("cannot count events: %w", err)
	}
	return uint64(max(c[0], 0)), nil
}

// Tail returns the newest n events that match f (by event time), oldest
// first, as tail(1) prints them. n is capped at MaxTail. Blocks are read
// newest first; a block's events can be newer than the next block's first
// one by the segment's span, so the scan goes on until the blocks start
// more than maxBlockSpan before the n-th newest event found.
func (a *Aggregator) Tail(n int, f Filter) ([]ingest.Event, error) {
	if n <= 0 {
		return nil, nil
	}
	n = min(n, MaxTail)
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	var out []ingest.Event
	newer := func(x, y *ingest.Event) bool {
		if x.Time != y.Time {
			return x.Time > y.Time
		}
		return bytes.Compare(x.ID[:], y.ID[:]) > 0
	}
	err := a.scanBlocks(false, func(first int64, evs []ingest.Event) bool {
		if len(out) >= n && first < out[n-1].Time-maxBlockSpan {
			return false
		}
		for i := range evs {
			if f.match(&evs[i]) {
				e := evs[i]
				e.Props = slices.Clone(e.Props)
				out = append(out, e)
			}
		}
		slices.SortFunc(out, func(x, y ingest.Event) int {
			if newer(&x, &y) {
				return -1
			}
			return 1
		})
		if len(out) > n {
			out = out[:n]
		}
		return true
	})
	slices.Reverse(out)
	return out, err
}

// maxBlockSpan is how much later than its first event a block's events can
// be: a segment is sealed by age in seconds; an hour is far past any
// configuration that makes sense.
const maxBlockSpan = int64(time.Hour / time.Millisecond)

// scan decodes raw events block by block (oldest day first when forward;
// within a day, blocks in time order and events in segment order) until
// fn returns false. The event passed to fn is fresh each time.
func (a *Aggregator) scan(forward bool, fn func(ev *ingest.Event) bool) error {
	return a.scanBlocks(forward, func(_ int64, evs []ingest.Event) bool {
		for i := range evs {
			e := evs[i]
			e.Props = slices.Clone(e.Props)
			if !fn(&e) {
				return false
			}
		}
		return true
	})
}

// scanBlocks calls fn with each block's first event time and its events,
// blocks in key order (newest first unless forward) until fn returns
// false. The events are valid during the call only.
func (a *Aggregator) scanBlocks(forward bool, fn func(first int64, evs []ingest.Event) bool) error {
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabEvent}, UpperBound: []byte{tabEvent + 1}})
	if err != nil {
		return fmt.Errorf("cannot read raw events: %w", err)
	}
	defer it.Close()
	valid := it.First()
	step := it.Next
	if !forward {
		valid, step = it.Last(), it.Prev
	}
	var evs []ingest.Event
	for ; valid; valid = step() {
		evs = evs[:0]
		var ev ingest.Event
		err := forEachInBlock(it.Key(), it.Value(), &ev, func(ev *ingest.Event) error {
			evs = append(evs, *ev)
			evs[len(evs)-1].Props = slices.Clone(ev.Props)
			return nil
		})
		if err != nil {
			return err
		}
		_, first, _, _ := blockSpan(it.Key(), it.Value())
		if !fn(first, evs) {
			return nil
		}
	}
	return it.Error()
}
