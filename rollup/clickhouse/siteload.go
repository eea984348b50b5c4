package clickhouse

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/waymark/waymark/ingest"
)

// Site questions are answered from a site's raw events (sessions.go):
// they are read here, in RowBinary, with FINAL so that a record a retry
// stored twice is read once.

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
	b.WriteString(", cityHash64(seg_node, seg_inc, seg_seq, seg_rec)")
	return b.String()
}

// errTooManyEvents is a site question over more raw events than
// BackendConfig.MaxEvents.
var errTooManyEvents = errors.New("too many raw events")

// loadSiteEvents returns the site's non-bot events with fromMS <= Time <
// toMS, ordered by time then id (the order Plausible's session cache sees
// them in), with the string columns of cols. At most limit rows: past it,
// errTooManyEvents.
//
// It reads without FINAL, which 18.16 runs in one thread, and drops the
// copies of a record itself: they are equal rows, so equal in time, id
// and key, adjacent once sorted.
func (c *Client) loadSiteEvents(ctx context.Context, site string, fromMS, toMS int64, limit int, cols colSet) ([]ingest.Event, error) {
	if toMS <= fromMS {
		return nil, nil
	}
	// time is whole seconds: the bounds are widened to seconds here and
	// cut to milliseconds below.
	sql := "SELECT " + siteEventCols(cols) + " FROM events WHERE site = " + String(site) +
		" AND code = '' AND kind IN (2, 3, 4) AND " + notBot +
		" AND time >= toDateTime(" + Uint(uint64(floorDiv(fromMS, 1000))) + ")" +
		" AND time <= toDateTime(" + Uint(uint64(floorDiv(toMS-1, 1000))) + ")" +
		" LIMIT " + Uint(2*uint64(limit)+1)
	b, err := c.QueryRowBinary(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("cannot read the events of site %q: %w", site, err)
	}
	evs, keys, err := decodeSiteEvents(b, site)
	if err != nil {
		return nil, fmt.Errorf("cannot read the events of site %q: %w", site, err)
	}
	if len(evs) > 2*limit {
		return nil, fmt.Errorf("%w: more than %d in the range", errTooManyEvents, limit)
	}
	order := make([]int32, 0, len(evs))
	for i := range evs {
		if evs[i].Time >= fromMS && evs[i].Time < toMS {
			order = append(order, int32(i))
		}
	}
	slices.SortFunc(order, func(i, j int32) int {
		a, b := &evs[i], &evs[j]
		if a.Time != b.Time {
			if a.Time < b.Time {
				return -1
			}
			return 1
		}
		if c := bytes.Compare(a.ID[:], b.ID[:]); c != 0 {
			return c
		}
		return cmp.Compare(keys[i], keys[j])
	})
	out := make([]ingest.Event, 0, len(order))
	for k, i := range order {
		if k > 0 && keys[i] == keys[order[k-1]] && evs[i].Time == evs[order[k-1]].Time && evs[i].ID == evs[order[k-1]].ID {
			continue // a retry's copy
		}
		out = append(out, evs[i])
	}
	if len(out) > limit {
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

func (r *rbReader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = errors.New("truncated RowBinary string")
		return ""
	}
	return string(r.need(int(n)))
}

// decodeSiteEvents reads the rows of siteEventCols, and their keys.
func decodeSiteEvents(b []byte, site string) ([]ingest.Event, []uint64, error) {
	r := rbReader{b: b}
	var out []ingest.Event
	var keys []uint64
	for len(r.b) > 0 && r.err == nil {
		var ev ingest.Event
		sec := r.u32()
		ev.Time = int64(sec)*1000 + int64(r.u16())
		ev.Kind = ingest.Kind(r.u8())
		ev.Flags = r.u8()
		copy(ev.ID[:], r.need(16))
		ev.VisitorHash = r.u64()
		ev.PrevVisitorHash = r.u64()
		ev.SiteID = site
		for _, p := range [...]*string{&ev.Name, &ev.Path, &ev.ReferrerHost,
			&ev.UTMSource, &ev.UTMMedium, &ev.UTMCampaign, &ev.UTMTerm, &ev.UTMContent,
			&ev.Country, &ev.Subdivision, &ev.City, &ev.Device, &ev.Browser, &ev.BrowserVersion,
			&ev.OS, &ev.OSVersion} {
			*p = r.str()
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
		for i := range names {
			ev.Props = append(ev.Props, ingest.Prop{Key: names[i], Value: r.str()})
		}
		keys = append(keys, r.u64())
		out = append(out, ev)
	}
	return out, keys, r.err
}
