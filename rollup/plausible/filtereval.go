package plausible

import (
	"regexp"
	"strings"
)

// Filter evaluation. Each leaf reads the data its dimension names: event
// dimensions the event row, visit dimensions the visit's first-event
// attributes (every Plausible event row carries a copy of them), entry and
// exit pages the rebuilt visit. Plausible's SQL instead evaluates each
// table's WHERE with the other table's leaves replaced by true, which
// differs only inside or/not trees that mix event and visit-only
// dimensions (and for not over event dimensions with visit metrics, where
// Plausible returns nothing); Waymark evaluates such trees as written.

type leafTarget uint8

const (
	tEventName leafTarget = iota
	tEventPage
	tEventHost
	tGoal
	tProp
	tVisit
	tEntryPage
	tExitPage
	tEntryHost
	tExitHost
	tSegment // never matches: Waymark has no saved segments
)

type cnode struct {
	op   string
	kids []*cnode
	leaf *cleaf
	// hasDone caches has_done per visit: 0 unknown, 1 false, 2 true.
	hasDone []int8
}

type cleaf struct {
	base   string // OpIs, OpContains or OpMatches
	negate bool
	target leafTarget
	field  visitField
	cs     bool
	values []string // is: mapped, lowered when !cs; contains: lowered when !cs
	res    []*regexp.Regexp
	// emptyToo: a contains filter on a source-like field whose clause
	// "Direct / None" contains also matches empty values.
	emptyToo bool
	// Props leaves.
	propKey      int32 // -1 when no event has the key
	noneIncluded bool
	// Goal leaves: the goals any clause selects.
	goals      []int
	goalsProps bool
	cache      []int8 // by string id or attrs index
	goalCache  map[uint64]bool
}

type compiled struct {
	roots []*cnode
	// eventDims: a leaf (behavioral ones included) on an event dimension,
	// so a visit qualifies through one of its events
	// (TableDecider.sessions_join_events?). sessionDims: one on an
	// entry/exit dimension (events_join_sessions?).
	eventDims, sessionDims bool
}

func (e *engine) compile(filters []Filter) (*compiled, error) {
	c := &compiled{}
	for _, d := range filterDimensions(filters, 0, anyDepth, behavioralAny) {
		switch dimensionScope(d) {
		case scopeEvent:
			c.eventDims = true
		case scopeSession:
			c.sessionDims = true
		}
	}
	for i := range filters {
		n, err := e.compileNode(&filters[i])
		if err != nil {
			return nil, err
		}
		c.roots = append(c.roots, n)
	}
	return c, nil
}

func (e *engine) compileNode(f *Filter) (*cnode, error) {
	n := &cnode{op: f.Op}
	if !f.IsLeaf() {
		for i := range f.Children {
			k, err := e.compileNode(&f.Children[i])
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, k)
		}
		if f.Op == OpHasDone || f.Op == OpHasNotDone {
			n.hasDone = make([]int8, len(e.d.sessions))
		}
		return n, nil
	}
	l, err := e.compileLeaf(f)
	n.leaf = l
	return n, err
}

func (e *engine) compileLeaf(f *Filter) (*cleaf, error) {
	l := &cleaf{cs: f.CaseSensitive, propKey: -1}
	switch f.Op {
	case OpIs, OpIsNot:
		l.base, l.negate = OpIs, f.Op == OpIsNot
	case OpContains, OpContainsNot:
		l.base, l.negate = OpContains, f.Op == OpContainsNot
	default:
		l.base, l.negate = OpMatches, f.Op == OpMatchesNot
	}
	dim := f.Dimension
	mapValues := true
	switch {
	case dim == "event:name":
		l.target, mapValues = tEventName, false
	case dim == "event:page":
		l.target = tEventPage
	case dim == "event:hostname":
		l.target = tEventHost
	case dim == "event:goal":
		l.target = tGoal
		for gi := range e.q.goals {
			for _, c := range f.Values {
				if goalNameMatches(e.q.goals[gi].name, f, c) {
					l.goals = append(l.goals, gi)
					l.goalsProps = l.goalsProps || len(e.q.goals[gi].CustomProps) > 0
					break
				}
			}
		}
		l.goalCache = map[uint64]bool{}
		return l, nil
	case strings.HasPrefix(dim, "event:props:"):
		l.target, mapValues = tProp, false
		l.propKey = e.d.strs.lookup(dim[len("event:props:"):])
		l.noneIncluded = has(f.Values, noneV)
		l.cache = make([]int8, len(e.d.strs.strs))
	case dim == "visit:entry_page":
		l.target = tEntryPage
	case dim == "visit:exit_page":
		l.target = tExitPage
	case dim == "visit:entry_page_hostname":
		l.target = tEntryHost
	case dim == "visit:exit_page_hostname":
		l.target = tExitHost
	case dim == "segment":
		l.target = tSegment
		return l, nil
	default:
		l.target = tVisit
		l.field = visitFieldByName[dim]
		l.cache = make([]int8, e.d.attrs.len())
	}
	if l.cache == nil {
		l.cache = make([]int8, len(e.d.strs.strs))
	}
	switch l.base {
	case OpIs:
		for _, v := range f.Values {
			if mapValues {
				if v == notSet || (v == noRef && l.target == tVisit && l.field.noRefField()) {
					v = ""
				}
			}
			if !l.cs {
				v = strings.ToLower(v)
			}
			l.values = append(l.values, v)
		}
	case OpContains:
		for _, v := range f.Values {
			if l.target == tVisit && l.field.noRefField() {
				if l.cs && strings.Contains(noRef, v) || !l.cs && strings.Contains(strings.ToLower(noRef), strings.ToLower(v)) {
					l.emptyToo = true
				}
			}
			if !l.cs {
				v = asciiLower(v)
			}
			l.values = append(l.values, v)
		}
	case OpMatches:
		for _, v := range f.Values {
			re, err := regexp.Compile(v)
			if err != nil {
				return nil, queryErr("Invalid filter regular expression %s: %v", inspect(v), err)
			}
			l.res = append(l.res, re)
		}
	}
	return l, nil
}

// goalNameMatches is Goals.matches?: is compares display names, contains
// looks for the clause in them, both lowercased without case_sensitive.
func goalNameMatches(name string, f *Filter, clause string) bool {
	if !f.CaseSensitive {
		name, clause = strings.ToLower(name), strings.ToLower(clause)
	}
	if f.Op == OpContains {
		return strings.Contains(name, clause)
	}
	return name == clause
}

// matchValue applies the leaf's operator (before negation) to a stored
// value: is with lower() on the column (ASCII), contains with
// multiSearchAny(CaseInsensitive), matches with RE2.
func (l *cleaf) matchValue(x string) bool {
	switch l.base {
	case OpIs:
		if !l.cs {
			x = asciiLower(x)
		}
		for _, v := range l.values {
			if x == v {
				return true
			}
		}
		return false
	case OpContains:
		if l.emptyToo && x == "" {
			return true
		}
		if !l.cs {
			x = asciiLower(x)
		}
		for _, v := range l.values {
			if strings.Contains(x, v) {
				return true
			}
		}
		return false
	}
	for _, re := range l.res {
		if re.MatchString(x) {
			return true
		}
	}
	return false
}

func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// cachedString evaluates the leaf on interned string id, memoized.
func (l *cleaf) cachedString(strs *interner, id int32) bool {
	switch l.cache[id] {
	case 1:
		return false
	case 2:
		return true
	}
	ok := l.matchValue(strs.str(id)) != l.negate
	l.cache[id] = 1
	if ok {
		l.cache[id] = 2
	}
	return ok
}

// propValue is the value of key on r: Plausible's
// meta.value[indexOf(meta.key, k)], the first occurrence.
func (d *dataset) propValue(r *row, key int32) (int32, bool) {
	if key < 0 {
		return 0, false
	}
	for _, p := range d.props[r.props : r.props+int32(r.nprops)] {
		if p.key == key {
			return p.value, true
		}
	}
	return 0, false
}

func (e *engine) evalLeaf(l *cleaf, r *row, si int32) bool {
	s := &e.d.sessions[si]
	switch l.target {
	case tEventName, tEventPage, tEventHost:
		if r == nil {
			return true
		}
		id := r.name
		if l.target == tEventPage {
			id = r.path
		} else if l.target == tEventHost {
			id = r.host
		}
		return l.cachedString(e.d.strs, id)
	case tProp:
		if r == nil {
			return true
		}
		v, ok := e.d.propValue(r, l.propKey)
		switch {
		case !ok && l.base == OpIs:
			// is: events without the key match only "(none)"; is_not:
			// they match unless "(none)" is listed.
			return l.noneIncluded != l.negate
		case !ok:
			return false // contains and matches need the key, negated or not
		}
		return l.cachedString(e.d.strs, v)
	case tGoal:
		if r == nil {
			return true
		}
		return e.goalFilterMatch(l, r)
	case tVisit:
		a := s.attrs
		switch l.cache[a] {
		case 1:
			return false
		case 2:
			return true
		}
		ok := l.matchValue(e.visitValues(l.field)[a]) != l.negate
		l.cache[a] = 1
		if ok {
			l.cache[a] = 2
		}
		return ok
	case tEntryPage:
		return l.cachedString(e.d.strs, s.entryPath)
	case tExitPage:
		return l.cachedString(e.d.strs, s.exitPath)
	case tEntryHost:
		return l.cachedString(e.d.strs, s.entryHost)
	case tExitHost:
		return l.cachedString(e.d.strs, s.exitHost)
	}
	return false
}

// goalFilterMatch is Goals.add_filter: any selected goal's condition. Page
// goals compare the path literally unless it has a "*".
func (e *engine) goalFilterMatch(l *cleaf, r *row) bool {
	key := uint64(uint32(r.name))<<32 | uint64(uint32(r.path))
	if !l.goalsProps {
		if v, ok := l.goalCache[key]; ok {
			return v
		}
	}
	ok := false
	for _, gi := range l.goals {
		g := &e.q.goals[gi]
		if g.isEvent() {
			ok = e.d.strs.str(r.name) == g.EventName && e.goalPropsMatch(g, r)
		} else if r.name == e.d.pageviewID {
			path := e.d.strs.str(r.path)
			if g.literal {
				ok = path == g.PagePath
			} else {
				ok = g.re.MatchString(path)
			}
		}
		if ok {
			break
		}
	}
	if !l.goalsProps {
		l.goalCache[key] = ok
	}
	return ok
}

// goalPropsMatch: meta.value[indexOf(meta.key, k)] = v for every goal prop;
// a missing key reads as "".
func (e *engine) goalPropsMatch(g *compiledGoal, r *row) bool {
	for _, p := range g.CustomProps {
		v := ""
		if id, ok := e.d.propValue(r, e.d.strs.lookup(p.Key)); ok {
			v = e.d.strs.str(id)
		}
		if v != p.Value {
			return false
		}
	}
	return true
}

func (e *engine) evalNode(n *cnode, r *row, si int32) bool {
	switch n.op {
	case OpAnd:
		for _, k := range n.kids {
			if !e.evalNode(k, r, si) {
				return false
			}
		}
		return true
	case OpOr:
		for _, k := range n.kids {
			if e.evalNode(k, r, si) {
				return true
			}
		}
		return false
	case OpNot:
		return !e.evalNode(n.kids[0], r, si)
	case OpHasDone:
		return e.hasDone(n, si)
	case OpHasNotDone:
		return !e.hasDone(n, si)
	}
	if n.leaf.target == tSegment {
		return false
	}
	return e.evalLeaf(n.leaf, r, si)
}

// hasDone: the visit has an event in the range matching the inner filter.
func (e *engine) hasDone(n *cnode, si int32) bool {
	switch n.hasDone[si] {
	case 1:
		return false
	case 2:
		return true
	}
	s := &e.d.sessions[si]
	ok := false
	for ri := s.rowStart; ri < s.rowEnd && !ok; ri++ {
		r := &e.d.rows[ri]
		ok = e.inEventRange(r) && e.evalNode(n.kids[0], r, si)
	}
	n.hasDone[si] = 1
	if ok {
		n.hasDone[si] = 2
	}
	return ok
}

func (e *engine) evalAll(c *compiled, r *row, si int32) bool {
	for _, n := range c.roots {
		if !e.evalNode(n, r, si) {
			return false
		}
	}
	return true
}

// eventPasses: an event row of the range passing every filter, within a
// visit of the range when an entry/exit filter is used (the events query
// then joins the sessions query).
func (e *engine) eventPasses(c *compiled, r *row, si int32) bool {
	if c.sessionDims && !e.sessionInRange(&e.d.sessions[si]) {
		return false
	}
	return e.evalAll(c, r, si)
}

// sessionPasses: a visit of the range passing every filter; with event
// filters, one of its events in the range must pass them all at once.
func (e *engine) sessionPasses(c *compiled, si int32) bool {
	if len(c.roots) == 0 {
		return true
	}
	if !c.eventDims {
		return e.evalAll(c, nil, si)
	}
	s := &e.d.sessions[si]
	for ri := s.rowStart; ri < s.rowEnd; ri++ {
		r := &e.d.rows[ri]
		if e.inEventRange(r) && e.evalAll(c, r, si) {
			return true
		}
	}
	return false
}
