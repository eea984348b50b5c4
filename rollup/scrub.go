package rollup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
)

// visitorDays is how many hash days of visitor states are kept (today,
// yesterday and the day before): a late event up to about two days old
// still joins its visit.
const visitorDays = 3

// scrubbedKey records the last UTC day whose cross-day links were
// scrubbed, so scrubLinks runs once a day, across restarts too.
var scrubbedKey = []byte("!scrubbed")

// scrubLinks removes, once per UTC day, what in the visitor states ties a
// visitor's hashes of two days together, as soon as the older day's salt
// is gone everywhere (the salt of day T-2 is deleted when day T begins):
// the links that states of hash day T-2 keep to the next day's hash, and
// the previous day's visitor id that visits of hash day T-1 keep when
// they continued past midnight. Only joining a visit across that midnight
// needed them, and no event of it can still arrive in time. Callers hold
// mu.
func (a *Aggregator) scrubLinks(now time.Time) error {
	today := uint32(dayOf(now.UnixMilli()))
	if today < 2 || a.scrubbedThrough(today) {
		return nil
	}
	b := a.db.NewBatch()
	defer b.Close()
	stripped, err := a.stripPrevHashes(b, day(today-1))
	if err != nil {
		return err
	}
	n := 0
	for _, d := range [2]uint32{today - 2, today - 1} {
		k, err := a.scrubDay(b, d)
		if err != nil {
			return err
		}
		n += k
	}
	if err := b.Set(scrubbedKey, binary.BigEndian.AppendUint32(nil, today), nil); err != nil {
		return fmt.Errorf("cannot stage scrub record: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot scrub visitor links: %w", err)
	}
	a.scrubbed = today
	a.visitors.forgetCross(int64(today-1) * msPerDay) // those events carry their visit's id now
	if n > 0 || stripped > 0 {
		a.log.Info("removed cross-day visitor links whose salts are gone", "states", n, "events", stripped)
	}
	return nil
}

// stripPrevHashes rewrites the raw events of day d so that none carries
// the previous day's hash any more: each site event gets its visit's
// visitor id (the hash of the visit's first event) and loses the other
// hash. The visits are rebuilt for that: the day's events and the last
// half hour of the day before, folded as a rebuild folds them. After this
// a rebuild still joins a visit across midnight, through the one id its
// events now share.
func (a *Aggregator) stripPrevHashes(b *pebble.Batch, d day) (int, error) {
	from := int64(d)*msPerDay - visitGapMS
	src := newFreshStates()
	f := newFolder(src)
	if err := foldWindow(a.db, f, from, int64(d+1)*msPerDay); err != nil {
		return 0, err
	}
	idOf := func(ev *ingest.Event) uint64 {
		if ev.Kind == ingest.KindClick || ev.SiteID == "" {
			return ev.VisitorHash
		}
		st := src.m[visitorKey{site: src.siteID(ev.SiteID), hash: ev.VisitorHash}]
		if st == nil {
			return ev.VisitorHash
		}
		for i := range st.runs {
			if r := &st.runs[i]; !r.isLink() && ev.Time >= r.start && ev.Time <= r.alive {
				return r.hash
			}
		}
		return ev.VisitorHash
	}
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: dayPrefix(tabEvent, d), UpperBound: dayPrefix(tabEvent, d+1)})
	if err != nil {
		return 0, fmt.Errorf("cannot read raw events: %w", err)
	}
	defer it.Close()
	n := 0
	var ev ingest.Event
	for it.First(); it.Valid(); it.Next() {
		count, first, last, err := blockSpan(it.Key(), it.Value())
		if err != nil {
			return n, err
		}
		var recs []byte
		changed := false
		err = forEachInBlock(it.Key(), it.Value(), &ev, func(ev *ingest.Event) error {
			if id := idOf(ev); ev.PrevVisitorHash != 0 || id != ev.VisitorHash {
				ev.VisitorHash, ev.PrevVisitorHash = id, 0
				changed = true
				n++
			}
			enc := ingest.AppendEvent(nil, ev)
			recs = binary.AppendUvarint(recs, uint64(len(enc)))
			recs = append(recs, enc...)
			return nil
		})
		if err != nil {
			return n, err
		}
		if !changed {
			continue
		}
		v := append([]byte{blockVersion}, binary.AppendUvarint(nil, count)...)
		v = binary.AppendVarint(v, last-first)
		if err := b.Set(it.Key(), append(v, recs...), nil); err != nil {
			return n, fmt.Errorf("cannot stage scrubbed raw events: %w", err)
		}
	}
	return n, it.Error()
}

// scrubbedThrough reports whether day's scrub has run.
func (a *Aggregator) scrubbedThrough(today uint32) bool {
	if a.scrubbed == 0 {
		v, closer, err := a.db.Get(scrubbedKey)
		if err == nil {
			if len(v) == 4 {
				a.scrubbed = binary.BigEndian.Uint32(v)
			}
			closer.Close()
		} else if !errors.Is(err, pebble.ErrNotFound) {
			a.log.Error("cannot read scrub record", "err", err)
		}
	}
	return a.scrubbed >= today
}

// scrubDay rewrites the states of hash day d that hold a link or a foreign
// visitor id, on disk and in memory.
func (a *Aggregator) scrubDay(b *pebble.Batch, d uint32) (int, error) {
	lo := dayPrefix(tabVisit, day(d))
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: dayPrefix(tabVisit, day(d+1))})
	if err != nil {
		return 0, fmt.Errorf("cannot read visitor states: %w", err)
	}
	defer it.Close()
	n := 0
	var vb []byte
	for it.First(); it.Valid(); it.Next() {
		_, site, hash, ok := parseVisitKey(it.Key())
		if !ok {
			continue
		}
		runs, err := decodeVisitorState(it.Value(), nil)
		if err != nil {
			return n, err
		}
		kept, changed := scrubRuns(runs, hash)
		if !changed {
			continue
		}
		n++
		k := visitorKey{a.visitors.siteID(site), d, hash}
		if st := a.visitors.active[k]; st != nil {
			st.runs, _ = scrubRuns(st.runs, hash)
		}
		if len(kept) == 0 {
			err = b.Delete(it.Key(), nil)
		} else {
			vb = appendVisitorState(vb[:0], kept)
			err = b.Set(it.Key(), vb, nil)
		}
		if err != nil {
			return n, fmt.Errorf("cannot stage scrubbed visitor state: %w", err)
		}
	}
	return n, it.Error()
}

// scrubRuns drops links and gives visits kept under hash their own id.
func scrubRuns(runs []run, hash uint64) ([]run, bool) {
	changed := false
	kept := runs[:0]
	for _, r := range runs {
		if r.isLink() {
			changed = true
			continue
		}
		if r.hash != hash {
			r.hash, changed = hash, true
		}
		kept = append(kept, r)
	}
	return kept, changed
}
