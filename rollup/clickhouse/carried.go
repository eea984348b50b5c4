package clickhouse

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/waymark/waymark/ingest"
)

// Visits carried across midnight (migration6; DESIGN.md, "Visits carried
// across days"). A run of units reads its day's events from midnight
// only; the visits still open at that midnight come from the state the
// previous day's last run wrote, so no window ever reaches back to the
// start of a visit, however long it is.

// carriedVisit is a visit open at a midnight: what sessionize had of it
// then, and its events so far (their attributes only on the first, the
// one a visit's values are read from).
type carriedVisit struct {
	v    visit
	keys []uint64 // later days' hashes that are aliases of the visit
	evs  []storedEvent
}

// closesBy reports whether no event at or after t can join visit v.
func (v *visit) closesBy(t int64) bool { return v.alive+visitGapMS < t }

// openAt lists the visits of d that an event at or after t could join.
func (d *siteData) openAt(t int64) []carriedVisit {
	byVisit := d.eventsByVisit()
	var out []carriedVisit
	for vi := range d.visits {
		v := d.visits[vi]
		if v.closesBy(t) {
			continue
		}
		cv := carriedVisit{v: v}
		for h, id := range d.alias {
			if id == v.id && h != id && d.cur[h] == int32(vi) {
				cv.keys = append(cv.keys, h)
			}
		}
		slices.Sort(cv.keys)
		for _, k := range byVisit[vi] {
			cv.evs = append(cv.evs, d.evs[k])
		}
		out = append(out, cv)
	}
	return out
}

// eventsByVisit lists each visit's event indexes, in time order.
func (d *siteData) eventsByVisit() [][]int32 {
	byVisit := make([][]int32, len(d.visits))
	for k, vi := range d.of {
		if vi >= 0 {
			byVisit[vi] = append(byVisit[vi], int32(k))
		}
	}
	return byVisit
}

// seeded prepends the carried visits' events to evs (all of them later)
// and returns the events and each one's carried visit (-1: not carried;
// nil without a seed).
func seeded(seed []carriedVisit, evs []storedEvent) ([]storedEvent, []int32) {
	if len(seed) == 0 {
		return evs, nil
	}
	type tagged struct {
		ev storedEvent
		vi int32
	}
	var pre []tagged
	for vi := range seed {
		for _, ev := range seed[vi].evs {
			pre = append(pre, tagged{ev, int32(vi)})
		}
	}
	sort.SliceStable(pre, func(i, j int) bool {
		a, b := &pre[i].ev, &pre[j].ev
		if a.Time != b.Time {
			return a.Time < b.Time
		}
		return bytes.Compare(a.ID[:], b.ID[:]) < 0
	})
	all := make([]storedEvent, 0, len(pre)+len(evs))
	of := make([]int32, 0, len(pre)+len(evs))
	for _, p := range pre {
		all = append(all, p.ev)
		of = append(of, p.vi)
	}
	all = append(all, evs...)
	for range evs {
		of = append(of, -1)
	}
	return all, of
}

// errStateMissing means a run found no clean marker for the hour before
// its day, so the visits carried into the day are unknown.
var errStateMissing = errors.New("the visits open at midnight are not materialized")

// loadCarried reads the visits of site open at the hour boundary (hours
// since the epoch) written under version; version 0 is "none".
func (c *Client) loadCarried(ctx context.Context, site string, hour int64, version uint64) ([]carriedVisit, error) {
	if version == 0 {
		return nil, nil
	}
	b, err := c.QueryRowBinary(ctx, "SELECT visit, state FROM site_open_visits WHERE site = "+String(site)+
		" AND unit = toDateTime("+Uint(uint64(hour*3600))+") AND version = "+Uint(version)+" ORDER BY visit")
	if err != nil {
		return nil, fmt.Errorf("cannot read the visits of site %q open at %d: %w", site, hour*3600, err)
	}
	r := rbReader{b: b}
	var out []carriedVisit
	var last uint64
	for len(r.b) > 0 && r.err == nil {
		id := r.u64()
		state := r.str()
		if len(out) > 0 && id == last {
			continue // a retried insert's copy
		}
		last = id
		cv, err := decodeCarried([]byte(state))
		if err != nil {
			return nil, fmt.Errorf("cannot read the visits of site %q open at %d: %w", site, hour*3600, err)
		}
		out = append(out, cv)
	}
	if r.err != nil {
		return nil, fmt.Errorf("cannot read the visits of site %q open at %d: %w", site, hour*3600, r.err)
	}
	return out, nil
}

// appendCarriedRows appends site_open_visits rows in RowBinary.
func appendCarriedRows(b []byte, site string, hour int64, version uint64, cvs []carriedVisit) []byte {
	for i := range cvs {
		b = appendString(b, site)
		b = binary.LittleEndian.AppendUint32(b, uint32(hour*3600))
		b = binary.LittleEndian.AppendUint64(b, cvs[i].v.id)
		b = binary.LittleEndian.AppendUint64(b, version)
		b = appendString(b, string(encodeCarried(&cvs[i])))
	}
	return b
}

func appendI64(b []byte, v int64) []byte { return binary.LittleEndian.AppendUint64(b, uint64(v)) }

// encodeCarried is a carried visit's state column.
func encodeCarried(cv *carriedVisit) []byte {
	v := &cv.v
	b := binary.LittleEndian.AppendUint64(nil, v.id)
	b = appendI64(b, v.start)
	b = appendI64(b, v.end)
	b = appendI64(b, v.alive)
	b = binary.AppendUvarint(b, uint64(v.pv))
	b = binary.AppendUvarint(b, uint64(v.custom))
	b = binary.AppendUvarint(b, uint64(v.interact))
	b = appendString(b, v.entry)
	b = appendString(b, v.exit)
	ret := byte(0)
	if v.returning {
		ret = 1
	}
	b = append(b, ret)
	b = binary.AppendUvarint(b, uint64(len(cv.keys)))
	for _, k := range cv.keys {
		b = binary.LittleEndian.AppendUint64(b, k)
	}
	b = binary.AppendUvarint(b, uint64(len(cv.evs)))
	for i := range cv.evs {
		ev := &cv.evs[i]
		b = appendI64(b, ev.Time)
		b = append(b, ev.ID[:]...)
		b = binary.LittleEndian.AppendUint64(b, ev.VisitorHash)
		b = binary.LittleEndian.AppendUint64(b, ev.PrevVisitorHash)
		b = binary.LittleEndian.AppendUint64(b, ev.EngagedMS)
		b = append(b, byte(ev.Kind), ev.Flags, ev.ScrollDepth)
		b = appendString(b, ev.Path)
		b = appendString(b, ev.Name)
		if i == 0 {
			for _, s := range ev.eventAttrs.strings() {
				b = appendString(b, *s)
			}
		}
	}
	return b
}

// strings are the attributes' string fields, in a fixed order.
func (a *eventAttrs) strings() []*string {
	return []*string{&a.ReferrerHost, &a.UTMSource, &a.UTMMedium, &a.UTMCampaign, &a.UTMTerm, &a.UTMContent,
		&a.Country, &a.Subdivision, &a.City, &a.Device, &a.Browser, &a.BrowserVersion, &a.OS, &a.OSVersion}
}

// decodeCarried reads encodeCarried's bytes.
func decodeCarried(b []byte) (carriedVisit, error) {
	r := rbReader{b: b}
	var cv carriedVisit
	v := &cv.v
	v.id = r.u64()
	v.start, v.end, v.alive = int64(r.u64()), int64(r.u64()), int64(r.u64())
	v.pv, v.custom, v.interact = int(r.uvarint()), int(r.uvarint()), int(r.uvarint())
	v.entry, v.exit = r.str(), r.str()
	v.returning = r.u8() == 1
	nk := r.uvarint()
	if nk > uint64(len(r.b)) {
		return cv, errors.New("bad alias count in a carried visit")
	}
	for range nk {
		cv.keys = append(cv.keys, r.u64())
	}
	ne := r.uvarint()
	if ne == 0 || ne > uint64(len(r.b)) {
		return cv, errors.New("bad event count in a carried visit")
	}
	cv.evs = make([]storedEvent, ne)
	for i := range cv.evs {
		ev := &cv.evs[i]
		ev.Time = int64(r.u64())
		copy(ev.ID[:], r.need(16))
		ev.VisitorHash, ev.PrevVisitorHash, ev.EngagedMS = r.u64(), r.u64(), r.u64()
		ev.Kind, ev.Flags, ev.ScrollDepth = ingest.Kind(r.u8()), r.u8(), r.u8()
		ev.Path, ev.Name = r.str(), r.str()
		ev.eventAttrs = noAttrs
		if i == 0 {
			a := &eventAttrs{}
			for _, s := range a.strings() {
				*s = r.str()
			}
			ev.eventAttrs = a
		}
	}
	if r.err == nil && len(r.b) > 0 {
		return cv, errors.New("trailing bytes in a carried visit")
	}
	return cv, r.err
}
