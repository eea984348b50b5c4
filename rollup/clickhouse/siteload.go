package clickhouse

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/waymark/waymark/ingest"
)

// Site questions are answered from a site's raw events (sessions.go):
// they are read here, in RowBinary, with FINAL so that a record a retry
// stored twice is read once.

// siteEventCols are the columns a site event is read with, in the order
// decodeSiteEvents reads them.
const siteEventCols = `toUInt32(time), ms, kind, flags, id, visitor, prev_visitor, name, path, referrer,
    utm_source, utm_medium, utm_campaign, utm_term, utm_content, country, subdivision, city,
    device, browser, browser_version, os, os_version, engaged_ms, scroll_depth, prop_keys, prop_values`

// errTooManyEvents is a site question over more raw events than
// BackendConfig.MaxEvents.
var errTooManyEvents = errors.New("too many raw events")

// loadSiteEvents returns the site's non-bot events with fromMS <= Time <
// toMS, ordered by time then id (the order Plausible's session cache sees
// them in). At most limit events: past it, errTooManyEvents.
func (c *Client) loadSiteEvents(ctx context.Context, site string, fromMS, toMS int64, limit int) ([]ingest.Event, error) {
	if toMS <= fromMS {
		return nil, nil
	}
	// time is whole seconds: the bounds are widened to seconds here and
	// cut to milliseconds below.
	sql := "SELECT " + siteEventCols + " FROM events FINAL WHERE site = " + String(site) +
		" AND code = '' AND kind IN (2, 3, 4) AND " + notBot +
		" AND time >= toDateTime(" + Uint(uint64(floorDiv(fromMS, 1000))) + ")" +
		" AND time <= toDateTime(" + Uint(uint64(floorDiv(toMS-1, 1000))) + ")" +
		" LIMIT " + Uint(uint64(limit)+1)
	b, err := c.QueryRowBinary(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("cannot read the events of site %q: %w", site, err)
	}
	evs, err := decodeSiteEvents(b, site)
	if err != nil {
		return nil, fmt.Errorf("cannot read the events of site %q: %w", site, err)
	}
	if len(evs) > limit {
		return nil, fmt.Errorf("%w: more than %d in the range", errTooManyEvents, limit)
	}
	kept := evs[:0]
	for i := range evs {
		if evs[i].Time >= fromMS && evs[i].Time < toMS {
			kept = append(kept, evs[i])
		}
	}
	slices.SortFunc(kept, func(a, b ingest.Event) int {
		if a.Time != b.Time {
			if a.Time < b.Time {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.ID[:], b.ID[:])
	})
	return kept, nil
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

// decodeSiteEvents reads the rows of siteEventCols.
func decodeSiteEvents(b []byte, site string) ([]ingest.Event, error) {
	r := rbReader{b: b}
	var out []ingest.Event
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
			return nil, errors.New("bad property count in RowBinary answer")
		}
		keys := make([]string, nk)
		for i := range keys {
			keys[i] = r.str()
		}
		nv := r.uvarint()
		if nv != nk {
			return nil, fmt.Errorf("event with %d property keys and %d values", nk, nv)
		}
		for i := range keys {
			ev.Props = append(ev.Props, ingest.Prop{Key: keys[i], Value: r.str()})
		}
		out = append(out, ev)
	}
	return out, r.err
}
