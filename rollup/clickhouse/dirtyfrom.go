package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Dirty from a unit on (migration 8; DESIGN.md, "Dirty from a unit
// on"). A late event at t may change every unit of its site from t's
// hour on (markLate), so a batch's late events of a site are one
// site_dirty row (site, from, version), not a site_units row per unit:
// in aggbench's 30-day load, where every event is late, that was up to
// 720 rows a site in every batch, written again for the same units.

// siteMarkers is the SQL of siteUnits: a site's unit markers (kind 0)
// and its dirty-from marks (kind 1) before the second sec, in one
// request. Read without FINAL (one thread on 18.16): the highest version
// of each key is picked in Go.
func siteMarkers(site string, sec uint64) string {
	s, before := String(site), "toDateTime("+Uint(sec)+")"
	return "SELECT toUInt32(unit), version, toUInt8(state = " + Uint(unitClean) + "), toUInt8(0) FROM site_units WHERE site = " + s + " AND unit < " + before +
		" UNION ALL SELECT toUInt32(from_unit), version, toUInt8(0), toUInt8(1) FROM site_dirty WHERE site = " + s + " AND from_unit < " + before
}

// siteUnits reads the markers of a site's units before hi (ms), by hour,
// with its dirty-from marks applied (applyDirtyFrom), and the hours in
// order. Only markers of state unitClean count as clean: a 1 is a unit of
// the rows before migration 6 (a visit in the unit where it started),
// which are counted otherwise and are written again; a 0 is a unit
// dirtied one by one (markLate before migration 8, or an old binary),
// read as before.
func (c *Client) siteUnits(ctx context.Context, site string, hi int64) (map[int64]unitState, []int64, error) {
	sec := uint64(max(hi, 0) / 1000)
	what := fmt.Sprintf("the site units of %q", site)
	res, err := c.Query(ctx, siteMarkers(site, sec))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read %s: %w", what, err)
	}
	units := make(map[int64]unitState, len(res.Data))
	froms := make(map[int64]uint64)
	for _, raw := range res.Data {
		row := rawRow(raw)
		s, err1 := row[0].int()
		v, err2 := row[1].uint()
		st, err3 := row[2].int()
		kind, err4 := row[3].int()
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return nil, nil, fmt.Errorf("cannot read %s: %w", what, err)
		}
		h := s / 3600
		if kind == 1 {
			froms[h] = max(froms[h], v)
		} else if old, ok := units[h]; !ok || v > old.version {
			units[h] = unitState{v, st == 1}
		}
	}
	hours := applyDirtyFrom(units, froms, (int64(sec)+3599)/3600)
	return units, hours, nil
}

// applyDirtyFrom applies a site's dirty-from marks (from hour -> highest
// version) to its unit markers, for the hours before end: a unit h is
// dirty under D(h) = max(version : from <= h), and stays clean only if
// its marker is clean with a version above D(h); a dirty unit's version
// is then the higher of its marker's and D(h), so the run that writes it
// again beats both (materializeSite's floor). Every hour from the first
// mark on gets a marker. It returns the hours with a marker, in order.
func applyDirtyFrom(units map[int64]unitState, froms map[int64]uint64, end int64) []int64 {
	hours := make([]int64, 0, len(units))
	for h := range units {
		hours = append(hours, h)
	}
	if len(froms) == 0 {
		slices.Sort(hours)
		return hours
	}
	starts := make([]int64, 0, len(froms))
	for h := range froms {
		starts = append(starts, h)
	}
	slices.Sort(starts)
	var d uint64
	next := 0
	for h := starts[0]; h < end; h++ {
		for next < len(starts) && starts[next] <= h {
			d = max(d, froms[starts[next]])
			next++
		}
		st, ok := units[h]
		if !ok {
			hours = append(hours, h)
		}
		if !ok || !st.clean || st.version <= d {
			units[h] = unitState{max(st.version, d), false}
		}
	}
	slices.Sort(hours)
	return hours
}
