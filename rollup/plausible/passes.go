package plausible

import "strings"

// group accumulates one result row of one part.
type group struct {
	codes []int64

	lastVisitor, lastSession int32
	visitors, visits         int64
	pageviews, events        int64

	topMs          uint64 // engaged ms of engagement events
	topVisits      int64  // visits with an engagement event
	lastTopSession int32

	sdSession  int32 // visit whose max scroll depth is being taken
	sdMax      int32
	sdSum, sdN int64

	bounces, bounceBase int64 // within the bounce_rate entry-page condition
	durSum, pvSum       int64
	sessions            int64
}

func newGroup(codes []int64) *group {
	return &group{codes: codes, lastVisitor: -1, lastSession: -1, lastTopSession: -1, sdSession: -1, sdMax: -1}
}

func (g *group) flushScroll() {
	if g.sdSession >= 0 && g.sdMax >= 0 {
		g.sdSum += int64(g.sdMax)
		g.sdN++
	}
	g.sdSession, g.sdMax = -1, -1
}

// groupTable maps dimension codes to groups.
type groupTable struct {
	nd   int
	m    map[string]*group
	list []*group
	buf  []byte
}

func newGroupTable(nd int) *groupTable { return &groupTable{nd: nd, m: map[string]*group{}} }

func (t *groupTable) get(codes []int64) *group {
	if t.nd == 0 {
		if len(t.list) == 0 {
			t.list = append(t.list, newGroup(nil))
		}
		return t.list[0]
	}
	t.buf = t.buf[:0]
	for _, c := range codes {
		u := uint64(c)
		t.buf = append(t.buf, byte(u), byte(u>>8), byte(u>>16), byte(u>>24), byte(u>>32), byte(u>>40), byte(u>>48), byte(u>>56))
	}
	if g, ok := t.m[string(t.buf)]; ok {
		return g
	}
	g := newGroup(append([]int64(nil), codes...))
	t.m[string(t.buf)] = g
	t.list = append(t.list, g)
	return g
}

func (t *groupTable) lookup(codes []int64) *group {
	if t.nd == 0 {
		if len(t.list) == 0 {
			return nil
		}
		return t.list[0]
	}
	t.buf = t.buf[:0]
	for _, c := range codes {
		u := uint64(c)
		t.buf = append(t.buf, byte(u), byte(u>>8), byte(u>>16), byte(u>>24), byte(u>>32), byte(u>>40), byte(u>>48), byte(u>>56))
	}
	return t.m[string(t.buf)]
}

// partResult is a part's groups, ready to render.
type partResult struct {
	part   part
	specs  []dimSpec
	groups *groupTable
	// Denominators of percentage, conversion_rate, group_conversion_rate.
	total, crTotal int64
	groupTotals    *groupTable
}

func (e *engine) runPart(p part) (*partResult, error) {
	res := &partResult{part: p, specs: e.dimSpecs(p.dims), groups: newGroupTable(len(p.dims))}
	c, err := e.compile(p.filters)
	if err != nil {
		return nil, err
	}
	switch p.table {
	case tblEvents:
		e.eventsPass(res, c)
	case tblSessions:
		var bounceCond *cleaf
		if f := toplevelFilter(p.filters, "event:page"); f != nil {
			entry := *f
			entry.Dimension = "visit:entry_page"
			if bounceCond, err = e.compileLeaf(&entry); err != nil {
				return nil, err
			}
		}
		e.sessionsPass(res, c, bounceCond)
	case tblSmeared:
		e.smearedPass(res, c)
	}
	for _, m := range p.metrics {
		switch m {
		case "percentage":
			if res.total, err = e.totalVisitors(p.filters); err != nil {
				return nil, err
			}
		case "conversion_rate":
			if res.crTotal, err = e.totalVisitors(withoutGoalFilters(p.filters)); err != nil {
				return nil, err
			}
		case "group_conversion_rate":
			// A sub-query with the same dimensions, only visitors, without
			// the top-level goal and props filters, and no goals for an
			// event:goal dimension (SpecialMetrics group_conversion_rate).
			sub := planParts([]string{"visitors"}, p.dims, withoutGoalFilters(p.filters), nil)
			sr, err := e.runPart(sub[0])
			if err != nil {
				return nil, err
			}
			res.groupTotals = sr.groups
		}
	}
	return res, nil
}

// withoutGoalFilters is Query.remove_top_level_filters(["event:goal",
// "event:props"]).
func withoutGoalFilters(filters []Filter) []Filter {
	var out []Filter
	for _, f := range filters {
		if f.IsLeaf() && (strings.HasPrefix(f.Dimension, "event:goal") || strings.HasPrefix(f.Dimension, "event:props")) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// totalVisitors: distinct visitors of the events passing filters
// (SpecialMetrics total_visitors, from the events table).
func (e *engine) totalVisitors(filters []Filter) (int64, error) {
	c, err := e.compile(filters)
	if err != nil {
		return 0, err
	}
	var n int64
	for vi := range e.d.visitors {
		v := &e.d.visitors[vi]
		found := false
		for si := v.sessStart; si < v.sessEnd && !found; si++ {
			s := &e.d.sessions[si]
			for ri := s.rowStart; ri < s.rowEnd; ri++ {
				r := &e.d.rows[ri]
				if r.sess == si && e.inEventRange(r) && e.eventPasses(c, r, si) {
					found = true
					break
				}
			}
		}
		if found {
			n++
		}
	}
	return n, nil
}

func (e *engine) eventsPass(res *partResult, c *compiled) {
	specs := res.specs
	codes := make([]int64, len(specs))
	goalDim := -1
	needSessions := c.sessionDims
	for i := range specs {
		switch specs[i].kind {
		case dGoal:
			goalDim = i
		case dEntryPage, dExitPage, dEntryHost, dExitHost:
			needSessions = true
		}
	}
	filtered := len(c.roots) > 0
	for vi := range e.d.visitors {
		v := &e.d.visitors[vi]
		for si := v.sessStart; si < v.sessEnd; si++ {
			s := &e.d.sessions[si]
			if needSessions && !e.sessionInRange(s) {
				continue
			}
			for ri := s.rowStart; ri < s.rowEnd; ri++ {
				r := &e.d.rows[ri]
				if r.sess != si || r.t < e.evFrom || r.t >= e.evTo {
					continue
				}
				if filtered && !e.evalAll(c, r, si) {
					continue
				}
				for i := range specs {
					if i != goalDim {
						codes[i] = e.eventCode(&specs[i], r, si)
					}
				}
				if goalDim < 0 {
					addEvent(res.groups.get(codes), r, int32(vi), si)
					continue
				}
				e.goalBuf = e.goalCodes(res.part.goalDims, r, e.goalBuf)
				for _, gc := range e.goalBuf {
					codes[goalDim] = gc
					addEvent(res.groups.get(codes), r, int32(vi), si)
				}
			}
		}
	}
	for _, g := range res.groups.list {
		g.flushScroll()
	}
}

func addEvent(g *group, r *row, vi, si int32) {
	if g.lastVisitor != vi {
		g.lastVisitor = vi
		g.visitors++
	}
	if g.lastSession != si {
		g.lastSession = si
		g.visits++
	}
	switch r.kind {
	case Pageview:
		g.pageviews++
		g.events++
	case Engagement:
		g.topMs += uint64(r.engaged)
		if g.lastTopSession != si {
			g.lastTopSession = si
			g.topVisits++
		}
		if r.sd <= 100 {
			if g.sdSession != si {
				g.flushScroll()
				g.sdSession = si
			}
			if int32(r.sd) > g.sdMax {
				g.sdMax = int32(r.sd)
			}
		}
	default:
		g.events++
	}
}

func (e *engine) sessionsPass(res *partResult, c *compiled, bounceCond *cleaf) {
	specs := res.specs
	codes := make([]int64, len(specs))
	for si := range e.d.sessions {
		s := &e.d.sessions[si]
		if !e.sessionInRange(s) || !e.sessionPasses(c, int32(si)) {
			continue
		}
		for i := range specs {
			codes[i] = e.sessionCode(&specs[i], int32(si))
		}
		g := res.groups.get(codes)
		if g.lastVisitor != s.visitor {
			g.lastVisitor = s.visitor
			g.visitors++
		}
		g.visits++
		g.sessions++
		g.durSum += s.duration()
		g.pvSum += int64(s.pageviews)
		if bounceCond == nil || bounceCond.cachedString(e.d.strs, s.entryPath) {
			g.bounceBase++
			if s.bounce {
				g.bounces++
			}
		}
	}
}

// smearedPass counts each visit in every hour it was active: 15-minute
// slots from its start to its last event (timeSlots(start, duration, 900)),
// each in its local hour.
func (e *engine) smearedPass(res *partResult, c *compiled) {
	specs := res.specs
	codes := make([]int64, len(specs))
	hourDim := -1
	for i := range specs {
		if specs[i].kind == dHour {
			hourDim = i
		}
	}
	for si := range e.d.sessions {
		s := &e.d.sessions[si]
		if !e.sessionInRange(s) || !e.sessionPasses(c, int32(si)) {
			continue
		}
		for i := range specs {
			if i != hourDim {
				codes[i] = e.sessionCode(&specs[i], int32(si))
			}
		}
		hours := e.hourBuf[:0]
		for t := floorDiv(s.start, 900) * 900; t <= s.last; t += 900 {
			h := e.timeCode(dHour, t)
			if len(hours) == 0 || hours[len(hours)-1] != h {
				hours = append(hours, h)
			}
		}
		e.hourBuf = hours
		for _, h := range hours {
			codes[hourDim] = h
			g := res.groups.get(codes)
			if g.lastVisitor != s.visitor {
				g.lastVisitor = s.visitor
				g.visitors++
			}
			if g.lastSession != int32(si) {
				g.lastSession = int32(si)
				g.visits++
			}
		}
	}
}
