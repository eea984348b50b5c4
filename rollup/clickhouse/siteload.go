package clickhouse

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/waymark/waymark/ingest"
)

// Site questions are answered from a site's raw events (sessions.go):
// they are read here, in RowBinary, with FINAL so that a record a retry
// stored twice is read once.

// storedEvent is a site event as the questions read it: the columns every
// one needs inline, the visit attributes behind a pointer, shared by every
// event when the question reads none of them. Smaller than ingest.Event,
// so a million of them stay cheap to hold and move.
type storedEvent struct {
	Time                         int64
	ID                           [16]byte
	VisitorHash, PrevVisitorHash uint64
	EngagedMS                    uint64
	Kind                         ingest.Kind
	Flags, ScrollDepth           uint8
	Path, Name                   string
	*eventAttrs
}

// eventAttrs are an event's visit attributes and properties.
type eventAttrs struct {
	ReferrerHost, UTMSource, UTMMedium, UTMCampaign, UTMTerm, UTMContent       string
	Country, Subdivision, City, Device, Browser, BrowserVersion, OS, OSVersion string
	Props                                                                      []ingest.Prop
}

// noAttrs are the attributes of an event read without them.
var noAttrs = &eventAttrs{}

// attrCols are the columns that live in eventAttrs.
const attrCols = allCols &^ (colPath | colName)

// colSet says which of an event's string columns a question needs; the
// others are read as empty strings, so they cost neither transfer nor
// decoding.
type colSet uint16

const (
	colPath colSet = 1 << iota
	colName
	colReferrer
	colUTM
	colCountry
	colRegion
	colCity
	colDevice
	colBrowser
	colOS
	colProps
	allCols colSet = 1<<iota - 1
)

// dimCols are the columns a native site dimension reads.
var dimCols = map[string]colSet{
	"page": colPath, "entry_page": colPath, "exit_page": colPath, "event": colName,
	"referrer": colReferrer, "source": colReferrer | colUTM, "channel": colReferrer | colUTM,
	"utm_source": colUTM, "utm_medium": colUTM, "utm_campaign": colUTM, "utm_term": colUTM, "utm_content": colUTM,
	"country": colCountry, "region": colRegion, "city": colCity, "device": colDevice,
	"browser": colBrowser, "browser_version": colBrowser, "os": colOS, "os_version": colOS,
}

// siteEventCols are the columns of cols in the order decodeSiteEvents
// reads them, ending with the record's key: a hash of its segment
// identity and record number, equal for the copies a retry stored.
func siteEventCols(cols colSet) string {
	var b strings.Builder
	b.WriteString("toUInt32(time), ms, kind, flags, id, visitor, prev_visitor")
	for _, c := range [...]struct {
		set  colSet
		name string
	}{
		{colName, "name"}, {colPath, "path"}, {colReferrer, "referrer"},
		{colUTM, "utm_source"}, {colUTM, "utm_medium"}, {colUTM, "utm_campaign"}, {colUTM, "utm_term"}, {colUTM, "utm_content"},
		{colCountry, "country"}, {colRegion, "subdivision"}, {colCity, "city"}, {colDevice, "device"},
		{colBrowser, "browser"}, {colBrowser, "browser_version"}, {colOS, "os"}, {colOS, "os_version"},
	} {
		if cols&c.set != 0 {
			b.WriteString(", " + c.name)
		} else {
			b.WriteString(", ''")
		}
	}
	b.WriteString(", engaged_ms, scroll_depth")
	if cols&colProps != 0 {
		b.WriteString(", prop_keys, prop_values")
	} else {
		b.WriteString(", emptyArrayString(), emptyArrayString()")
	}
	b.WriteString(", cityHash64(seg_node, seg_inc, seg_seq, seg_rec) AS k")
	return b.String()
}

// errTooManyEvents is a site question over more raw events than
// BackendConfig.MaxEvents.
var errTooManyEvents = errors.New("too many raw events")

// loadSiteEvents returns the site's non-bot events with fromMS <= Time <
// toMS, ordered by time then id (the order Plausible's session cache sees
// them in), with the string columns of cols. At most limit rows (a
// retry's copies included, so memory stays bounded): past it,
// errTooManyEvents.
//
// It reads without FINAL, which 18.16 runs in one thread, and drops the
// copies of a record itself: they are equal rows, so equal in time, id
// and key, adjacent once sorted.
func (c *Client) loadSiteEvents(ctx context.Context, site string, fromMS, toMS int64, limit int, cols colSet) ([]storedEvent, error) {
	if toMS <= fromMS {
		return nil, nil
	}
	// time is whole seconds: the bounds are widened to seconds here and
	// cut to milliseconds below.
	sql := "SELECT " + siteEventCols(cols) + " FROM events WHERE site = " + String(site) +
		" AND code = '' AND kind IN (2, 3, 4) AND " + notBot +
		" AND time >= toDateTime(" + Uint(uint64(floorDiv(fromMS, 1000))) + ")" +
		" AND time <= toDateTime(" + Uint(uint64(floorDiv(toMS-1, 1000))) + ")" +
		" ORDER BY time, ms, id, k LIMIT " + Uint(uint64(limit)+1)
	b, err := c.QueryRowBinary(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("cannot read the events of site %q: %w", site, err)
	}
	evs, keys, err := decodeSiteEvents(b, cols&attrCols != 0)
	if err != nil {
		return nil, fmt.Errorf("cannot read the events of site %q: %w", site, err)
	}
	if len(evs) > limit {
		c.m.questionsRefused.Inc()
		return nil, fmt.Errorf("%w: more than %d in the range", errTooManyEvents, limit)
	}
	// ClickHouse sorted them; sorted again only if it did not.
	less := func(i, j int) bool {
		a, b := &evs[i], &evs[j]
		if a.Time != b.Time {
			return a.Time < b.Time
		}
		if c := bytes.Compare(a.ID[:], b.ID[:]); c != 0 {
			return c < 0
		}
		return keys[i] < keys[j]
	}
	if !sort.SliceIsSorted(evs, less) {
		order := make([]int, len(evs))
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(x, y int) bool { return less(order[x], order[y]) })
		sorted, sk := make([]storedEvent, len(evs)), make([]uint64, len(evs))
		for x, i := range order {
			sorted[x], sk[x] = evs[i], keys[i]
		}
		evs, keys = sorted, sk
	}
	out := evs[:0]
	for i := range evs {
		if evs[i].Time < fromMS || evs[i].Time >= toMS {
			continue
		}
		if i > 0 && keys[i] == keys[i-1] && evs[i].Time == evs[i-1].Time && evs[i].ID == evs[i-1].ID {
			continue // a retry's copy
		}
		out = append(out, evs[i])
	}
	c.m.siteEventsRead.Add(len(out))
	if len(out) > limit {
		c.m.questionsRefused.Inc()
		return nil, fmt.Errorf("%w: more than %d in the range", errTooManyEvents, limit)
	}
	return out, nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// rbReader reads RowBinary values.
type rbReader struct {
	b   []byte
	err error
}

func (r *rbReader) need(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = errors.New("truncated RowBinary answer")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *rbReader) u8() uint8 {
	if v := r.need(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *rbReader) u16() uint16 {
	if v := r.need(2); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

func (r *rbReader) u32() uint32 {
	if v := r.need(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (r *rbReader) u64() uint64 {
	if v := r.need(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (r *rbReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("bad length in RowBinary answer")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rbReader) skipStr() {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = errors.New("truncated RowBinary string")
		return
	}
	r.need(int(n))
}

func (r *rbReader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = errors.New("truncated RowBinary string")
		return ""
	}
	return string(r.need(int(n)))
}

// decodeSiteEvents reads the rows of siteEventCols, and their keys;
// withAttrs says whether any attribute column was read.
func decodeSiteEvents(b []byte, withAttrs bool) ([]storedEvent, []uint64, error) {
	r := rbReader{b: b}
	const minRow = 75 // bytes of a row whose strings are all empty
	out := make([]storedEvent, 0, len(b)/minRow+1)
	keys := make([]uint64, 0, len(b)/minRow+1)
	interned := make(map[string]*eventAttrs)
	for len(r.b) > 0 && r.err == nil {
		var ev storedEvent
		sec := r.u32()
		ev.Time = int64(sec)*1000 + int64(r.u16())
		ev.Kind = ingest.Kind(r.u8())
		ev.Flags = r.u8()
		copy(ev.ID[:], r.need(16))
		ev.VisitorHash = r.u64()
		ev.PrevVisitorHash = r.u64()
		ev.Name = r.str()
		ev.Path = r.str()
		// The attributes are interned by their bytes: a site has few
		// combinations, and one allocation each instead of one per event.
		start := len(r.b)
		for range 14 {
			r.skipStr()
		}
		a := noAttrs
		if withAttrs && r.err == nil {
			raw := b[len(b)-start : len(b)-len(r.b)]
			if a = interned[string(raw)]; a == nil {
				a = &eventAttrs{}
				ar := rbReader{b: raw}
				for _, p := range [...]*string{&a.ReferrerHost,
					&a.UTMSource, &a.UTMMedium, &a.UTMCampaign, &a.UTMTerm, &a.UTMContent,
					&a.Country, &a.Subdivision, &a.City, &a.Device, &a.Browser, &a.BrowserVersion,
					&a.OS, &a.OSVersion} {
					*p = ar.str()
				}
				interned[string(raw)] = a
			}
		}
		ev.EngagedMS = r.u64()
		ev.ScrollDepth = r.u8()
		nk := r.uvarint()
		if nk > uint64(len(r.b)) {
			return nil, nil, errors.New("bad property count in RowBinary answer")
		}
		names := make([]string, nk)
		for i := range names {
			names[i] = r.str()
		}
		nv := r.uvarint()
		if nv != nk {
			return nil, nil, fmt.Errorf("event with %d property keys and %d values", nk, nv)
		}
		if nk > 0 && withAttrs {
			// Properties are the event's own: its attributes are copied
			// out of the shared ones.
			own := *a
			own.Props = make([]ingest.Prop, len(names))
			for i := range names {
				own.Props[i] = ingest.Prop{Key: names[i], Value: r.str()}
			}
			a = &own
		} else {
			for range names {
				r.skipStr()
			}
		}
		ev.eventAttrs = a
		keys = append(keys, r.u64())
		out = append(out, ev)
	}
	return out, keys, r.err
}
