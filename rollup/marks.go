package rollup

// Marks count a visit once under each event value it had: fEventVisits on
// a page, event name or property value (Plausible's visits of an event
// dimension: distinct sessions with such an event), and, for pages and the
// total, fEngVisits and fScrollSum (time on page and scroll depth are per
// session: engaged time over the sessions that engaged, and the mean of
// each session's deepest scroll). As a visit is (contrib.go), a mark is
// counted in the hour of the visit's latest event of the value and in a
// crossing row at every hour boundary between its earliest and latest, so
// a range counts every visit with an event of the value inside it
// (Plausible's uniq(session_id) over the events in range). Its engagement
// counts in the hour of the earliest engagement. Both move when an event
// outside them arrives, so the rows do not depend on arrival order.

// maxMarks bounds the marks of one visit; past it a value counts the visit
// again (an over-count only for visits of more than 64 distinct pages,
// event names and property values).
const maxMarks = 64

func findMark(ms []mark, dim, val string) int {
	for i := range ms {
		if ms[i].val == val && ms[i].dim == dim {
			return i
		}
	}
	return -1
}

// dimID is the delta's id of a dimension code.
func (d *delta) dimID(code string) uint32 {
	if code[0] == dimProp {
		return propDimBase + d.vals.id(code)
	}
	return uint32(code[0])
}

func (f *folder) markCell(ent uint32, m *mark, h uint32) *counters {
	d := f.d
	return d.cell(cellKey{ent, d.dimID(m.dim), d.val(m.val), h})
}

// putMarkVisits adds sign times the visit's count under m: at its last
// hour, and in the crossing rows of the boundaries after its first.
func (f *folder) putMarkVisits(ent uint32, m *mark, sign int64) {
	f.markCell(ent, m, m.last)[fEventVisits] += sign
	lo := m.hour + 1
	if m.last >= maxCrossings && m.last-maxCrossings+1 > lo {
		lo = m.last - maxCrossings + 1
	}
	for h := lo; h <= m.last; h++ {
		f.markCell(ent, m, h|crossingBit)[fEventVisits] += sign
	}
}

// markEvent counts the visit under an event value the first time the visit
// has it, and moves the count when an event of it falls outside the hours
// it spans.
func (f *folder) markEvent(ent uint32, r *run, dim, val string, h uint32) *mark {
	if i := findMark(r.marks, dim, val); i >= 0 {
		m := &r.marks[i]
		if h < m.hour || h > m.last {
			f.putMarkVisits(ent, m, -1)
			m.hour, m.last = min(m.hour, h), max(m.last, h)
			f.putMarkVisits(ent, m, 1)
		}
		return m
	}
	m := mark{dim: f.src.intern(dim), val: f.src.intern(val), hour: h, last: h}
	f.putMarkVisits(ent, &m, 1)
	if len(r.marks) >= maxMarks {
		return nil
	}
	r.marks = append(r.marks, m)
	return &r.marks[len(r.marks)-1]
}

// markEngagement counts the visit as engaged on a page (or, for the total,
// anywhere) in the hour of its earliest engagement there, with its deepest
// scroll.
func (f *folder) markEngagement(ent uint32, r *run, dim, val string, depth uint8, h uint32) {
	m := f.markEvent(ent, r, dim, val, h)
	if m == nil {
		tmp := mark{dim: dim, val: val}
		c := f.markCell(ent, &tmp, h)
		c[fEngVisits]++
		c[fScrollSum] += int64(depth)
		return
	}
	switch {
	case !m.engaged:
		m.engaged, m.engHour, m.maxDepth = true, h, depth
		c := f.markCell(ent, m, h)
		c[fEngVisits]++
		c[fScrollSum] += int64(depth)
		return
	case h < m.engHour:
		old := f.markCell(ent, m, m.engHour)
		old[fEngVisits]--
		old[fScrollSum] -= int64(m.maxDepth)
		c := f.markCell(ent, m, h)
		c[fEngVisits]++
		c[fScrollSum] += int64(m.maxDepth)
		m.engHour = h
	}
	if depth > m.maxDepth {
		f.markCell(ent, m, m.engHour)[fScrollSum] += int64(depth - m.maxDepth)
		m.maxDepth = depth
	}
}

// mergeMarks unions the marks of visits that merge into one: a value two
// of them had counted the visit twice, so both counts are taken back and
// the union's added, and the shallower scroll is taken back.
func (f *folder) mergeMarks(ent uint32, runs []run) []mark {
	var out []mark
	for ri := range runs {
		for _, m := range runs[ri].marks {
			i := findMark(out, m.dim, m.val)
			if i < 0 {
				if len(out) < maxMarks {
					out = append(out, m)
				}
				continue
			}
			k := &out[i]
			f.putMarkVisits(ent, k, -1)
			f.putMarkVisits(ent, &m, -1)
			k.hour, k.last = min(k.hour, m.hour), max(k.last, m.last)
			f.putMarkVisits(ent, k, 1)
			switch {
			case !m.engaged:
			case !k.engaged:
				k.engaged, k.engHour, k.maxDepth = true, m.engHour, m.maxDepth
			default:
				// Keep the earlier engagement hour and the deeper scroll.
				drop, keep := m, *k
				if m.engHour < k.engHour {
					drop, keep = *k, m
				}
				dc := f.markCell(ent, &drop, drop.engHour)
				dc[fEngVisits]--
				dc[fScrollSum] -= int64(drop.maxDepth)
				if drop.maxDepth > keep.maxDepth {
					f.markCell(ent, &keep, keep.engHour)[fScrollSum] += int64(drop.maxDepth - keep.maxDepth)
					keep.maxDepth = drop.maxDepth
				}
				k.engaged, k.engHour, k.maxDepth = true, keep.engHour, keep.maxDepth
			}
		}
	}
	return out
}

// unionMarks is the marks of two merged visits without any accounting
// (merge uses it; change accounts for the counts with mergeMarks).
func unionMarks(a, b []mark) []mark {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := append([]mark(nil), a...)
	for _, m := range b {
		i := findMark(out, m.dim, m.val)
		switch {
		case i < 0:
			if len(out) < maxMarks {
				out = append(out, m)
			}
		default:
			k := &out[i]
			k.hour, k.last = min(k.hour, m.hour), max(k.last, m.last)
			if m.engaged && (!k.engaged || m.engHour < k.engHour) {
				k.engHour = m.engHour
			}
			k.engaged = k.engaged || m.engaged
			k.maxDepth = max(k.maxDepth, m.maxDepth)
		}
	}
	return out
}
