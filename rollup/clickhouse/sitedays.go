package clickhouse

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
)

// Day rows in ClickHouse (migration 10's site_days; DESIGN.md, "Visitor
// sets and the row cache"): a whole clean day's unit rows merged by
// mergeDay, for every dimension, under a hash of its 24 units' versions,
// so the first question after a start reads a day's few rows, not 24
// hours of them. The materializer writes them after a site's units
// (writeSiteDays); a day is written in one INSERT (one month partition,
// one block: all or nothing) that ends with a mark row (dim siteDayMark),
// so a question reading a dimension's day rows knows they are complete
// by the mark, even when the dimension has no row that day. A late event
// gives the day's units new versions, so its rows of the old hash are
// never read again; two aggregators writing one day write equal rows,
// and the reader keeps one of each key.

// siteDayMark is the dimension of a day's mark row (no real dimension
// starts with a NUL byte).
const siteDayMark = "\x00day"

// hashVersions is a day's version: a hash of its 24 units' versions.
func hashVersions(vs []uint64) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for _, v := range vs {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	return h.Sum64()
}

// writeSiteDays writes the day rows of every whole clean day of site
// before the ready hour that has none under its current versions, and
// returns how many days it wrote.
func (b *Backend) writeSiteDays(ctx context.Context, site string) (int, error) {
	ready := b.readyBefore()
	units, hours, err := b.c.siteUnits(ctx, site, ready*msPerHour)
	if err != nil || len(hours) == 0 {
		return 0, err
	}
	first := floorDiv(hours[0], 24) * 24
	type day struct {
		d0       int64
		version  uint64
		versions []uint64
	}
	var days []day
	for d0 := first; d0+24 <= ready; d0 += 24 {
		vs := make([]uint64, 24)
		whole := true
		for i := range vs {
			st, ok := units[d0+int64(i)]
			if !ok || !st.clean {
				whole = false
				break
			}
			vs[i] = st.version
		}
		if whole {
			days = append(days, day{d0, hashVersions(vs), vs})
		}
	}
	if len(days) == 0 {
		return 0, nil
	}
	res, err := b.c.Query(ctx, "SELECT toUInt32(day), version FROM site_days WHERE site = "+String(site)+" AND dim = "+String(siteDayMark)+
		fmt.Sprintf(" AND day >= toDateTime(%d)", days[0].d0*3600))
	if err != nil {
		return 0, fmt.Errorf("cannot read the day marks of site %q: %w", site, err)
	}
	have := map[[2]uint64]bool{}
	for _, raw := range res.Data {
		row := rawRow(raw)
		sec, err1 := row[0].int()
		v, err2 := row[1].uint()
		if err := errors.Join(err1, err2); err != nil {
			return 0, fmt.Errorf("cannot read the day marks of site %q: %w", site, err)
		}
		have[[2]uint64{uint64(sec / 3600), v}] = true
	}
	n := 0
	for _, d := range days {
		if have[[2]uint64{uint64(d.d0), d.version}] {
			continue
		}
		if err := b.writeSiteDay(ctx, site, d.d0, d.version, d.versions); err != nil {
			return n, err
		}
		n++
	}
	b.c.m.siteDaysWritten.Add(n)
	return n, nil
}

// writeSiteDay merges the rows of the day from hour d0 (its units'
// versions vs) per dimension and inserts them with the day's mark.
func (b *Backend) writeSiteDay(ctx context.Context, site string, d0 int64, version uint64, vs []uint64) error {
	var list strings.Builder
	for i, v := range vs {
		if i > 0 {
			list.WriteString(", ")
		}
		list.WriteString(Uint(v))
	}
	body, err := b.c.QueryRowBinary(ctx, fmt.Sprintf("SELECT dim, value, f, l, %s, visitor_set FROM site_rows WHERE site = %s"+
		" AND unit >= toDateTime(%d) AND unit < toDateTime(%d) AND version = arrayElement([%s], intDiv(toUInt32(unit) - %d, 3600) + 1)",
		counterCols, String(site), d0*3600, (d0+24)*3600, list.String(), d0*3600))
	if err != nil {
		return fmt.Errorf("cannot read the rows of site %q for its day rows: %w", site, err)
	}
	byDim := map[string][]siteRow{}
	rd := &rbReader{b: body}
	for len(rd.b) > 0 && rd.err == nil {
		dim := rd.str()
		r, err := readSiteRow(rd)
		if err != nil {
			return fmt.Errorf("cannot read the rows of site %q for its day rows: %w", site, err)
		}
		byDim[dim] = append(byDim[dim], r)
	}
	if rd.err != nil {
		return fmt.Errorf("cannot read the rows of site %q for its day rows: %w", site, rd.err)
	}
	var out []byte
	merged := map[string][]siteRow{}
	for dim, rows := range byDim {
		m, err := mergeDay(d0, [][]siteRow{rows})
		if err != nil {
			return err
		}
		merged[dim] = m
		for i := range m {
			if out, err = appendDayRow(out, site, dim, d0, version, &m[i]); err != nil {
				return err
			}
		}
	}
	if out, err = appendDayRow(out, site, siteDayMark, d0, version, &siteRow{f: d0, l: d0}); err != nil {
		return err
	}
	if err := b.c.Insert(ctx, "INSERT INTO site_days FORMAT RowBinary", bytes.NewReader(out), nil); err != nil {
		return fmt.Errorf("cannot store the day rows of site %q: %w", site, err)
	}
	// The questions this Backend serves read them next: cached now, so
	// the first answer after a pass needs no read (a dimension without
	// rows that day is cached empty).
	for _, dim := range rowDims {
		rows := merged[dim]
		if rows == nil {
			rows = []siteRow{}
		}
		b.sites.put(siteRowKey{site: site, dim: dim, unit: d0, version: version, day: true}, rows)
	}
	return nil
}

// appendDayRow appends one site_days row in RowBinary.
func appendDayRow(b []byte, site, dim string, d0 int64, version uint64, r *siteRow) ([]byte, error) {
	b = appendTermHead(b, site, dim, r.value, d0, r.f, r.l, version, &r.c)
	var set []byte
	if r.set != nil {
		var err error
		if set, err = r.set.appendTo(nil); err != nil {
			return nil, fmt.Errorf("cannot encode the visitors of a day row: %w", err)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(set)))
	return append(b, set...), nil
}

// readSiteRow reads value, f, l, the counters and the visitor set.
func readSiteRow(rd *rbReader) (siteRow, error) {
	var r siteRow
	r.value = rd.str()
	r.f, r.l = int64(rd.u32()), int64(rd.u32())
	for i := range r.c {
		r.c[i] = int64(rd.u64())
	}
	n := rd.uvarint()
	raw := rd.need(int(min(n, uint64(len(rd.b)))))
	if rd.err != nil || len(raw) == 0 {
		return r, rd.err
	}
	set, err := decodeLinkSet(raw)
	r.set = set
	return r, err
}

// readSiteDays reads the day rows of site under dim of the days from
// hours d0s (ascending) under versions: the rows of each day whose mark
// is there, one of each key (two writers write equal rows).
func (b *Backend) readSiteDays(ctx context.Context, site, dim string, d0s []int64, versions []uint64) (map[int64][]siteRow, error) {
	body, err := b.c.QueryRowBinary(ctx, fmt.Sprintf("SELECT toUInt32(day), version, dim, value, f, l, %s, visitor_set FROM site_days WHERE site = %s AND dim IN (%s, %s) AND %s",
		counterCols, String(site), String(dim), String(siteDayMark), b.dayVersionCond(d0s, versions)))
	if err != nil {
		return nil, fmt.Errorf("cannot read the day rows of site %q: %w", site, err)
	}
	type key struct {
		version uint64
		value   string
		f, l    int64
	}
	got := map[int64][]siteRow{}
	marked := map[int64]bool{}
	seen := map[int64]map[key]bool{}
	rd := &rbReader{b: body}
	for len(rd.b) > 0 && rd.err == nil {
		d := int64(rd.u32()) / 3600
		version := rd.u64()
		isMark := rd.str() == siteDayMark
		r, err := readSiteRow(rd)
		if err != nil {
			return nil, fmt.Errorf("cannot read the day rows of site %q: %w", site, err)
		}
		if isMark {
			marked[d] = true
			continue
		}
		k := key{version, r.value, r.f, r.l}
		if seen[d] == nil {
			seen[d] = map[key]bool{}
		}
		if seen[d][k] {
			continue // a second writer's copy
		}
		seen[d][k] = true
		got[d] = append(got[d], r)
	}
	if rd.err != nil {
		return nil, fmt.Errorf("cannot read the day rows of site %q: %w", site, rd.err)
	}
	out := map[int64][]siteRow{}
	for d := range marked {
		out[d] = got[d]
		if out[d] == nil {
			out[d] = []siteRow{}
		}
	}
	return out, nil
}

// siteDayMarks is readSiteDays' check alone: the days of d0s (under
// versions) whose mark is in site_days, each with no rows.
func (b *Backend) siteDayMarks(ctx context.Context, site string, d0s []int64, versions []uint64) (map[int64][]siteRow, error) {
	cond := b.dayVersionCond(d0s, versions)
	body, err := b.c.cachedRowBinary(ctx, "SELECT DISTINCT toUInt32(day) FROM site_days WHERE site = "+String(site)+" AND dim = "+String(siteDayMark)+" AND "+cond, "site_days")
	if err != nil {
		return nil, fmt.Errorf("cannot read the day marks of site %q: %w", site, err)
	}
	out := map[int64][]siteRow{}
	for r := (&rbReader{b: body}); len(r.b) > 0; {
		sec := int64(r.u32())
		if r.err != nil {
			return nil, fmt.Errorf("cannot read the day marks of site %q: %w", site, r.err)
		}
		out[sec/3600] = nil
	}
	return out, nil
}

// dayVersionCond selects the rows of the days from hours d0s (ascending)
// of their versions.
func (b *Backend) dayVersionCond(d0s []int64, versions []uint64) string {
	var vs strings.Builder
	first, last := d0s[0], d0s[len(d0s)-1]
	at := map[int64]uint64{}
	for i, d := range d0s {
		at[d] = versions[i]
	}
	for d := first; d <= last; d += 24 {
		if vs.Len() > 0 {
			vs.WriteString(", ")
		}
		vs.WriteString(Uint(at[d])) // 0 for a day not asked: no row has it
	}
	return fmt.Sprintf("day >= toDateTime(%d) AND day <= toDateTime(%d) AND version = arrayElement([%s], intDiv(toUInt32(day) - %d, 86400) + 1)",
		first*3600, last*3600, vs.String(), first*3600)
}

// storedSums is a breakdown's part from stored day rows, summed in
// ClickHouse: the first question after a start reads a few hundred sums,
// not every value's rows and sets.
type storedSums struct {
	where string // the rows of the days that count
}

// sums are the counters of the stored days' rows per value. Each row is
// read once (DISTINCT: two writers' copies are equal rows).
func (b *Backend) storedCounters(ctx context.Context, s *storedSums) (map[string]*[nCounters]int64, error) {
	var sel strings.Builder
	for _, c := range strings.Split(counterCols, ", ") {
		sel.WriteString(", sum(" + c + ")")
	}
	body, err := b.c.QueryRowBinary(ctx, "SELECT value"+sel.String()+" FROM (SELECT DISTINCT day, version, value, f, l, "+counterCols+
		" FROM site_days WHERE "+s.where+") GROUP BY value")
	if err != nil {
		return nil, fmt.Errorf("cannot sum the day rows: %w", err)
	}
	out := map[string]*[nCounters]int64{}
	rd := &rbReader{b: body}
	for len(rd.b) > 0 && rd.err == nil {
		v := rd.str()
		var c [nCounters]int64
		for i := range c {
			c[i] = int64(rd.u64())
		}
		out[v] = &c
	}
	if rd.err != nil {
		return nil, fmt.Errorf("cannot sum the day rows: %w", rd.err)
	}
	return out, nil
}

// storedSets is the visitor sets of the stored days' f = l rows of
// values, by value (one of each row).
func (b *Backend) storedSets(ctx context.Context, s *storedSums, values []string) (map[string][]*linkSet, error) {
	if len(values) == 0 {
		return map[string][]*linkSet{}, nil
	}
	var in strings.Builder
	for i, v := range values {
		if i > 0 {
			in.WriteString(", ")
		}
		in.WriteString(String(v))
	}
	// Not DISTINCT: hashing every set cost more than the read (154 ms for
	// 480 KB); a second writer's copy is dropped here by its key.
	// PREWHERE: the values are not a prefix of the key, so the sets of
	// every page would be read; the value column first, then only the
	// matching rows' sets.
	body, err := b.c.QueryRowBinary(ctx, "SELECT toUInt32(day), version, value, f, visitor_set FROM site_days PREWHERE value IN ("+in.String()+
		") WHERE "+s.where+" AND f = l AND visitor_set != ''")
	if err != nil {
		return nil, fmt.Errorf("cannot read the visitors of the day rows: %w", err)
	}
	type key struct {
		day, version uint64
		value        string
		f            uint32
	}
	seen := map[key]bool{}
	out := map[string][]*linkSet{}
	rd := &rbReader{b: body}
	for len(rd.b) > 0 && rd.err == nil {
		k := key{day: uint64(rd.u32()), version: rd.u64()}
		k.value = rd.str()
		k.f = rd.u32()
		v := k.value
		n := rd.uvarint()
		raw := rd.need(int(min(n, uint64(len(rd.b)))))
		if rd.err != nil {
			break
		}
		if seen[k] {
			continue // a second writer's copy
		}
		seen[k] = true
		set, err := decodeLinkSet(raw)
		if err != nil {
			return nil, fmt.Errorf("cannot read the visitors of the day rows: %w", err)
		}
		out[v] = append(out[v], set)
	}
	if rd.err != nil {
		return nil, fmt.Errorf("cannot read the visitors of the day rows: %w", rd.err)
	}
	return out, nil
}

// fillDays reads the stored day rows of site under dim of the days from
// hours d0s (under versions) into the cache, in the background: a
// breakdown that summed them in ClickHouse (storedCounters) leaves them
// uncached, and the next one should find them. One read at a time per
// (site, dim); Close waits for it.
func (b *Backend) fillDays(site, dim string, d0s []int64, versions []uint64) {
	key := site + "\x00" + dim
	if _, busy := b.filling.LoadOrStore(key, true); busy {
		return
	}
	go func() {
		defer b.filling.Delete(key)
		// Entered here, not by the caller: it is inside a question, and a
		// second read lock behind a waiting Close would never be granted.
		if b.enter() != nil {
			return
		}
		defer b.leave()
		ctx, cancel := b.ctx()
		defer cancel()
		b.c.m.siteDayFills.Inc()
		got, err := b.readSiteDays(ctx, site, dim, d0s, versions)
		if err != nil {
			b.c.m.siteDayFillFailed.Inc()
			slog.Warn("cannot cache the day rows of a site", "site", site, "dim", dim, "err", err)
			return
		}
		for i, d := range d0s {
			if rows, ok := got[d]; ok {
				b.sites.put(siteRowKey{site: site, dim: dim, unit: d, version: versions[i], day: true}, rows)
			}
		}
	}()
}
