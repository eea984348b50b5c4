package clickhouse

import (
	"context"
	"fmt"
	"math"
	"slices"
)

// Dirty marks as ranges (migration 8; DESIGN.md, "Dirty from a unit
// on"). A late event at t may change every unit of its site from t's
// hour on (markLate), so a batch's late events of a site are one
// site_dirty row (site, from, no end, version), not a site_units row per
// unit: in aggbench's 30-day load, where every event is late, that was up
// to 720 rows a site in every batch, written again for the same units. A
// batch's late clicks are one row of the links' key '' over their hours,
// in the same INSERT, in place of one of link_units.

// linksKey is the site_dirty key of the link hours' marks: no site has an
// empty id (clicks are the events without one).
const linksKey = ""

// dirtyMark dirties the hours [from, until) under version; until 0: no
// end.
type dirtyMark struct {
	from, until int64
	version     uint64
}

// markersSQL is the SQL of a marker read: markers (hour start in seconds,
// version, 1 if clean, 0, 0) of a query, then key's dirty marks before the
// second sec (from in seconds, version, 0, 1, until in seconds), in one
// request. Read without FINAL (one thread on 18.16): the highest version
// of each key is picked in Go.
func markersSQL(markers, key string, sec uint64) string {
	return markers + " UNION ALL SELECT toUInt32(from_unit), version, toUInt8(0), toUInt8(1), toUInt32(until_unit) FROM site_dirty WHERE site = " +
		String(key) + " AND from_unit < toDateTime(" + Uint(sec) + ")"
}

// siteUnits reads the markers of a site's units before hi (ms), by hour,
// with its dirty marks applied (applyDirty), and the hours in order. Only
// markers of state unitClean count as clean: a 1 is a unit of the rows
// before migration 6 (a visit in the unit where it started), which are
// counted otherwise and are written again; a 0 is a unit dirtied one by
// one (markLate before migration 8, or an old binary), read as before.
//
// A question's plan reads up to its end or later (a visit overlapping it
// may close in any later unit), so past the last marker and the last
// mark's start no hour is filled in: none is clean there anyway, and a
// question far in the future would fill every hour up to it. The
// materializer reads up to the ready hour with every hour filled in
// (siteUnitsToReady): a unit with no marker needs D(h) for its run's
// version.
func (c *Client) siteUnits(ctx context.Context, site string, hi int64) (map[int64]unitState, []int64, error) {
	return c.siteMarkers(ctx, site, hi, false)
}

// siteUnitsToReady is siteUnits with every hour before ready (ms) that a
// mark covers filled in.
func (c *Client) siteUnitsToReady(ctx context.Context, site string, ready int64) (map[int64]unitState, []int64, error) {
	return c.siteMarkers(ctx, site, ready, true)
}

// A question's read (siteUnits) goes through the marker cache
// (markercache.go), so its SQL names no upper bound, which changes from
// one question to the next; markers cuts it at sec.
func (c *Client) siteMarkers(ctx context.Context, site string, hi int64, fill bool) (map[int64]unitState, []int64, error) {
	sec, bound := uint64(max(hi, 0)/1000), uint64(math.MaxUint32)
	var tables []string
	if fill {
		bound = sec
	} else {
		tables = []string{"site_units", "site_dirty"}
	}
	return c.markers(ctx, fill, markersSQL("SELECT toUInt32(unit), version, toUInt8(state = "+Uint(unitClean)+"), toUInt8(0), toUInt32(0) FROM site_units WHERE site = "+
		String(site)+" AND unit < toDateTime("+Uint(bound)+")", site, bound), sec, fmt.Sprintf("the site units of %q", site), tables)
}

// linkUnits reads the markers of the link hours before hi (ms), the
// highest version of each, with the links' dirty marks applied (every
// hour they cover: they end by the ready hour when written).
// A question's read (cached) goes through the marker cache, as
// siteMarkers says.
func (c *Client) linkUnits(ctx context.Context, hi int64, cached bool) (map[int64]unitState, []int64, error) {
	sec, bound := uint64(max(hi, 0)/1000), uint64(max(hi, 0)/1000)
	var tables []string
	if cached {
		bound, tables = math.MaxUint32, []string{"link_units", "site_dirty"}
	}
	return c.markers(ctx, true, markersSQL("SELECT toUInt32(hour), version, state, toUInt8(0), toUInt32(0) FROM link_units WHERE hour < toDateTime("+
		Uint(bound)+")", linksKey, bound), sec, "the link hours", tables)
}

// markers runs a markersSQL read and applies its dirty marks to its
// markers for the hours before the second sec (without fill, only up to
// the last marker or mark boundary).
// With tables, the tables sql reads, the answer may come from the
// marker cache, and sql may read past sec.
func (c *Client) markers(ctx context.Context, fill bool, sql string, sec uint64, what string, tables []string) (map[int64]unitState, []int64, error) {
	// RowBinary: a question reads every held hour's marker (a cold link
	// question spent 15-33 ms on them as JSONCompact).
	var body []byte
	var err error
	if tables != nil {
		body, err = c.cachedRowBinary(ctx, sql, tables...)
	} else {
		body, err = c.QueryRowBinary(ctx, sql)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read %s: %w", what, err)
	}
	units := make(map[int64]unitState, len(body)/15)
	var marks []dirtyMark
	for r := (&rbReader{b: body}); len(r.b) > 0; {
		s, v, st, kind, until := int64(r.u32()), r.u64(), r.u8(), r.u8(), int64(r.u32())
		if r.err != nil {
			return nil, nil, fmt.Errorf("cannot read %s: %w", what, r.err)
		}
		if uint64(s) >= sec {
			continue // read past sec for the cache
		}
		h := s / 3600
		if kind == 1 {
			marks = append(marks, dirtyMark{h, until / 3600, v})
		} else if old, ok := units[h]; !ok || v > old.version {
			units[h] = unitState{v, st == 1}
		}
	}
	end := (int64(sec) + 3599) / 3600
	if !fill {
		stop := int64(math.MinInt64)
		for h := range units {
			stop = max(stop, h+1)
		}
		for _, m := range marks {
			stop = max(stop, m.from+1, m.until)
		}
		end = min(end, stop)
	}
	return units, applyDirty(units, marks, end), nil
}

// applyDirty applies dirty marks to unit markers, for the hours before
// end: a unit h is dirty under D(h), the highest version of the marks
// covering it, and stays clean only if its marker is clean with a version
// above D(h); a dirty unit's version is then the higher of its marker's
// and D(h), so the run that writes it again beats both (the
// materializers' floor). Every hour a mark covers gets a marker. It
// returns the hours with a marker, in order.
func applyDirty(units map[int64]unitState, marks []dirtyMark, end int64) []int64 {
	hours := make([]int64, 0, len(units))
	for h := range units {
		hours = append(hours, h)
	}
	if len(marks) > 0 {
		first := marks[0].from
		for _, m := range marks {
			first = min(first, m.from)
		}
		if n := end - first; n > 0 {
			d := make([]uint64, n)    // D(h) of the ranges
			open := make([]uint64, n) // the open marks' versions by from
			for _, m := range marks {
				if m.until == 0 {
					open[m.from-first] = max(open[m.from-first], m.version)
					continue
				}
				for h := m.from; h < min(m.until, end); h++ {
					d[h-first] = max(d[h-first], m.version)
				}
			}
			var o uint64 // the open marks from at or before h
			for i := range d {
				o = max(o, open[i])
				dv := max(o, d[i])
				if dv == 0 {
					continue
				}
				h := first + int64(i)
				st, ok := units[h]
				if !ok {
					hours = append(hours, h)
				}
				if !ok || !st.clean || st.version <= dv {
					units[h] = unitState{max(st.version, dv), false}
				}
			}
		}
	}
	slices.Sort(hours)
	return hours
}
