package clickhouse

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Link day rows (migration 9; DESIGN.md, "Link day rows"): once all 24
// hours of a UTC day are clean, the materializer merges their rows into
// one row per (code, dim, value, day) and then writes the day's marker in
// link_days: the day's run version and the 24 hour versions it merged.
// A question uses a day's rows only when a marker's hour versions are
// exactly the hours' versions it read from link_units now; a late click
// gives its hour a new version (hour versions only grow), so a day row of
// older hours is never read, and the next pass writes the day again.

const hoursPerDay = 24

// linkDayMarker is one run's marker of a day: its rows' version and the
// hour versions they were merged from (0: an hour before the first link
// marker, which has no clicks).
type linkDayMarker struct {
	version uint64
	hours   []uint64
}

// linkDayMarkers reads the markers of the days [d0, d1) (days since the
// epoch), every run's (a merge keeps the highest version of a day).
func (c *Client) linkDayMarkers(ctx context.Context, d0, d1 int64) (map[int64][]linkDayMarker, error) {
	body, err := c.cachedRowBinary(ctx, fmt.Sprintf("SELECT toUInt32(day), version, hours FROM link_days WHERE day >= toDateTime(%d) AND day < toDateTime(%d)",
		max(d0, 0)*86400, max(d1, 0)*86400), "link_days")
	if err != nil {
		return nil, fmt.Errorf("cannot read the link day markers: %w", err)
	}
	out := map[int64][]linkDayMarker{}
	r := &rbReader{b: body}
	for len(r.b) > 0 && r.err == nil {
		d := int64(r.u32()) / 86400
		m := linkDayMarker{version: r.u64()}
		n := r.uvarint()
		if n > uint64(len(r.b)/8) {
			return nil, fmt.Errorf("cannot read the link day markers: %d hours", n)
		}
		m.hours = make([]uint64, n)
		for i := range m.hours {
			m.hours[i] = r.u64()
		}
		if r.err == nil {
			out[d] = append(out[d], m)
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("cannot read the link day markers: %w", r.err)
	}
	return out, nil
}

// dayHourVersions is day d's 24 hour versions from the hour markers
// (first: the first marked hour, whose hours before count as empty when
// it is clean), and whether every one is clean.
func dayHourVersions(units map[int64]unitState, first, d int64) ([]uint64, bool) {
	vs := make([]uint64, hoursPerDay)
	for i := range vs {
		h := d*hoursPerDay + int64(i)
		if h < first {
			if !units[first].clean {
				return nil, false
			}
			continue
		}
		st, ok := units[h]
		if !ok || !st.clean {
			return nil, false
		}
		vs[i] = st.version
	}
	return vs, true
}

// matchingDayMarker is the version of the newest marker of ms that
// merged exactly the hour versions vs.
func matchingDayMarker(ms []linkDayMarker, vs []uint64) (uint64, bool) {
	var best uint64
	ok := false
	for _, m := range ms {
		if slices.Equal(m.hours, vs) && (!ok || m.version > best) {
			best, ok = m.version, true
		}
	}
	return best, ok
}

// materializeLinkDays writes the day rows of every UTC day before the
// ready hour whose hours are all clean (units, as the pass left them)
// and that no marker records with exactly those hour versions. It
// returns the days written.
func (b *Backend) materializeLinkDays(ctx context.Context, units map[int64]unitState, first, ready int64) (int, error) {
	d0, d1 := floorDiv(first, hoursPerDay), floorDiv(ready, hoursPerDay)
	if d1 <= d0 {
		return 0, nil
	}
	markers, err := b.c.linkDayMarkers(ctx, d0, d1)
	if err != nil {
		return 0, err
	}
	done := 0
	for d := d0; d < d1; d++ {
		vs, ok := dayHourVersions(units, first, d)
		if !ok {
			continue
		}
		if _, ok := matchingDayMarker(markers[d], vs); ok {
			continue
		}
		var floor uint64
		for _, m := range markers[d] {
			floor = max(floor, m.version)
		}
		version := max(uint64(time.Now().Add(-versionMargin).UnixNano()), floor+1)
		if err := b.writeLinkDayRows(ctx, d, vs, version); err != nil {
			return done, fmt.Errorf("cannot store the link day rows of %s: %w", time.Unix(d*86400, 0).UTC().Format(time.DateOnly), err)
		}
		if err := b.c.insertLinkDay(ctx, d, version, vs); err != nil {
			return done, err
		}
		b.c.m.linkDaysMaterialized.Inc()
		done++
	}
	return done, nil
}

// insertLinkDay writes day d's marker: its rows are all in.
func (c *Client) insertLinkDay(ctx context.Context, d int64, version uint64, vs []uint64) error {
	if err := c.Exec(ctx, fmt.Sprintf("INSERT INTO link_days (day, version, hours) VALUES (toDateTime(%d), %d, %s)", d*86400, version, hourVersionsArray(vs))); err != nil {
		return fmt.Errorf("cannot mark the link day: %w", err)
	}
	return nil
}

// hourVersionsArray is vs as an SQL array literal.
func hourVersionsArray(vs []uint64) string {
	var sb strings.Builder
	sb.WriteString("[")
	for i, v := range vs {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(Uint(v))
	}
	sb.WriteString("]")
	return sb.String()
}

// writeLinkDayRows merges the hour rows of day d of exactly the versions
// vs, every link and dimension at once, into one row per (code, dim,
// value) under version, with its set's estimate. The hour rows come
// sorted by (code, dim, value), so one group is held at a time.
func (b *Backend) writeLinkDayRows(ctx context.Context, d int64, vs []uint64, version uint64) error {
	body, err := b.c.QueryRowBinary(ctx, fmt.Sprintf("SELECT code, dim, value, clicks, bots, visitor_set FROM link_rows WHERE hour >= toDateTime(%d) AND hour < toDateTime(%d)"+
		" AND version = arrayElement(%s, intDiv(toUInt32(hour) - %d, 3600) + 1) ORDER BY code, dim, value",
		d*86400, (d+1)*86400, hourVersionsArray(vs), d*86400))
	if err != nil {
		return fmt.Errorf("cannot read the day's link rows: %w", err)
	}
	var out []byte
	var cur [3]string
	var clicks, bots uint64
	var set *linkSet
	flush := func() error {
		if set == nil {
			return nil
		}
		for _, s := range cur {
			out = appendString(out, s)
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(d*86400))
		out = binary.LittleEndian.AppendUint64(out, version)
		out = binary.LittleEndian.AppendUint64(out, clicks)
		out = binary.LittleEndian.AppendUint64(out, bots)
		out = binary.LittleEndian.AppendUint64(out, set.estimate())
		enc, err := set.appendTo(nil)
		if err != nil {
			return fmt.Errorf("cannot encode link visitors: %w", err)
		}
		out = appendString(out, string(enc))
		set = nil
		return nil
	}
	r := &rbReader{b: body}
	for len(r.b) > 0 && r.err == nil {
		key := [3]string{r.str(), r.str(), r.str()}
		c, bt := r.u64(), r.u64()
		raw := r.bytes()
		if r.err != nil {
			break
		}
		if set == nil || key != cur {
			if err := flush(); err != nil {
				return err
			}
			cur, clicks, bots, set = key, 0, 0, &linkSet{}
		}
		hs, err := decodeLinkSet(raw)
		if err != nil {
			return err
		}
		clicks += c
		bots += bt
		if err := set.add(hs); err != nil {
			return err
		}
	}
	if r.err != nil {
		return fmt.Errorf("cannot read the day's link rows: %w", r.err)
	}
	if err := flush(); err != nil {
		return err
	}
	if len(out) == 0 {
		return nil
	}
	return b.c.Insert(ctx, "INSERT INTO link_day_rows (code, dim, value, day, version, clicks, bots, visitors, visitor_set) FORMAT RowBinary", bytes.NewReader(out), nil)
}

// readLinkDayRows reads a link dimension's day rows of days (ascending,
// each with its marker's version), as linkRows keyed by day.
func (b *Backend) readLinkDayRows(ctx context.Context, code, dim string, days []int64, versions map[int64]uint64) (map[int64][]linkRow, error) {
	first, last := days[0], days[len(days)-1]
	vs := make([]uint64, last-first+1) // 0 for a day not asked: no row has it
	for _, d := range days {
		vs[d-first] = versions[d]
	}
	body, err := b.c.QueryRowBinary(ctx, fmt.Sprintf("SELECT value, toUInt32(day), clicks, bots, visitors, visitor_set FROM link_day_rows WHERE code = %s AND dim = %s"+
		" AND day >= toDateTime(%d) AND day < toDateTime(%d) AND version = arrayElement(%s, intDiv(toUInt32(day) - %d, 86400) + 1)",
		String(code), String(dim), first*86400, (last+1)*86400, hourVersionsArray(vs), first*86400))
	if err != nil {
		return nil, fmt.Errorf("cannot read the link day rows: %w", err)
	}
	got := map[int64][]linkRow{}
	r := &rbReader{b: body}
	for len(r.b) > 0 && r.err == nil {
		row := linkRow{value: r.str()}
		d := int64(r.u32()) / 86400
		row.clicks, row.bots = int64(r.u64()), int64(r.u64())
		row.estimate = r.u64()
		raw := r.bytes()
		if r.err != nil {
			break
		}
		set, err := decodeLinkSet(raw)
		if err != nil {
			return nil, err
		}
		row.visitors = set
		got[d] = append(got[d], row)
	}
	if r.err != nil {
		return nil, fmt.Errorf("cannot read link day rows: %w", r.err)
	}
	return got, nil
}

// bytes reads a String as the answer's own bytes (not copied).
func (r *rbReader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("truncated RowBinary string of %d bytes", n)
		return nil
	}
	return r.need(int(n))
}
