package rollup

import (
	"fmt"
	"slices"

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
	n, err := getUint64(a.db, appendTotalKey(nil, class, name))
	if err != nil {
		return 0, fmt.Errorf("cannot count events: %w", err)
	}
	return n, nil
}

// Tail returns the newest n events that match f (by event time), oldest
// first, as tail(1) prints them. n is capped at MaxTail.
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
	err := a.scan(false, func(ev *ingest.Event) bool {
		if f.match(ev) {
			out = append(out, *ev)
		}
		return len(out) < n
	})
	slices.Reverse(out)
	return out, err
}

// scan decodes raw events in key order (oldest first when forward) until
// fn returns false. The event passed to fn is fresh each time.
func (a *Aggregator) scan(forward bool, fn func(ev *ingest.Event) bool) error {
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
	for ; valid; valid = step() {
		var ev ingest.Event
		if err := ingest.DecodeEvent(it.Value(), &ev); err != nil {
			return fmt.Errorf("cannot read raw event %x: %w", it.Key(), err)
		}
		if !fn(&ev) {
			return nil
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("cannot read raw events: %w", err)
	}
	return nil
}
