package plausible

import (
	"strconv"
	"strings"
)

type dimKind uint8

const (
	dEventName dimKind = iota
	dEventPage
	dEventHost
	dGoal
	dProp
	dVisit
	dEntryPage
	dExitPage
	dEntryHost
	dExitHost
	dHour
	dDay
	dWeek
	dMonth
)

// dimSpec is a dimension ready to compute group codes. Codes of one
// dimension share a code space across the events and visits queries, so
// their groups join (event:page and visit:entry_page both use path ids).
type dimSpec struct {
	name     string
	kind     dimKind
	field    visitField
	propKey  int32
	noneCode int64 // the props code of "(none)"
}

func (e *engine) dimSpecs(dims []string) []dimSpec {
	out := make([]dimSpec, len(dims))
	for i, name := range dims {
		s := dimSpec{name: name, propKey: -1}
		switch {
		case name == "event:name":
			s.kind = dEventName
		case name == "event:page":
			s.kind = dEventPage
		case name == "event:hostname":
			s.kind = dEventHost
		case name == "event:goal":
			s.kind = dGoal
		case strings.HasPrefix(name, "event:props:"):
			s.kind = dProp
			s.propKey = e.d.strs.lookup(name[len("event:props:"):])
			s.noneCode = int64(e.d.strs.lookup(noneV))
			if s.noneCode < 0 {
				s.noneCode = -2
			}
		case name == "visit:entry_page":
			s.kind = dEntryPage
		case name == "visit:exit_page":
			s.kind = dExitPage
		case name == "visit:entry_page_hostname":
			s.kind = dEntryHost
		case name == "visit:exit_page_hostname":
			s.kind = dExitHost
		case name == "time:hour":
			s.kind = dHour
		case name == "time:day":
			s.kind = dDay
		case name == "time:week":
			s.kind = dWeek
		case name == "time:month":
			s.kind = dMonth
		default:
			s.kind = dVisit
			s.field = visitFieldByName[name]
		}
		out[i] = s
	}
	return out
}

// sessionCode is the code of a single-valued dimension for a visit.
func (e *engine) sessionCode(s *dimSpec, si int32) int64 {
	ss := &e.d.sessions[si]
	switch s.kind {
	case dVisit:
		return int64(e.visitLabelCodes(s.field)[ss.attrs])
	case dEntryPage:
		return int64(ss.entryPath)
	case dExitPage:
		return int64(ss.exitPath)
	case dEntryHost:
		return int64(ss.entryHost)
	case dExitHost:
		return int64(ss.exitHost)
	case dHour, dDay, dWeek, dMonth:
		return e.timeCode(s.kind, ss.last)
	}
	return 0 // event dimensions never reach the visits query
}

// eventCode is the code of a single-valued dimension for an event row.
func (e *engine) eventCode(s *dimSpec, r *row, si int32) int64 {
	switch s.kind {
	case dEventName:
		return int64(r.name)
	case dEventPage:
		return int64(r.path)
	case dEventHost:
		return int64(r.host)
	case dProp:
		if v, ok := e.d.propValue(r, s.propKey); ok && v != 0 {
			return int64(v)
		}
		return s.noneCode
	case dHour, dDay, dWeek, dMonth:
		return e.timeCode(s.kind, r.sec())
	}
	return e.sessionCode(s, si)
}

// timeCode buckets a Unix second: time:hour by the instant its local hour
// starts, the others by local date (expression.ex select_dimension).
func (e *engine) timeCode(k dimKind, sec int64) int64 {
	off := e.tz.offset(sec)
	local := sec + off
	if k == dHour {
		return sec - floorMod(local, 3600)
	}
	d := day(floorDiv(local, 86400))
	switch k {
	case dWeek:
		// weekstart_not_before: the Monday, but not before the range.
		if m := d.monday(); m >= e.firstDay {
			return int64(m)
		}
		return int64(e.firstDay)
	case dMonth:
		return int64(d.monthStart())
	}
	return int64(d)
}

// goalCodes lists, 1-based, the considered goals an event satisfies
// (event:goal ARRAY JOIN, expression.ex event_goal_join): page goals match
// page_regex on pageviews, event goals name and props.
func (e *engine) goalCodes(goalDims []int, r *row, buf []int64) []int64 {
	buf = buf[:0]
	for i, gi := range goalDims {
		g := &e.q.goals[gi]
		ok := false
		if g.isEvent() {
			ok = e.d.strs.str(r.name) == g.EventName && e.goalPropsMatch(g, r)
		} else {
			ok = r.name == e.d.pageviewID && g.re.MatchString(e.d.strs.str(r.path))
		}
		if ok {
			buf = append(buf, int64(i+1))
		}
	}
	return buf
}

// dimValue renders a group code as Plausible's JSON dimension value.
func (e *engine) dimValue(s *dimSpec, code int64, goalDims []int) Value {
	switch s.kind {
	case dEventName, dEventPage, dEventHost, dEntryPage, dExitPage, dEntryHost, dExitHost:
		return StringValue(e.d.strs.str(int32(code)))
	case dProp:
		if code < 0 || code == s.noneCode {
			return StringValue(noneV)
		}
		return StringValue(e.d.strs.str(int32(code)))
	case dGoal:
		return StringValue(e.q.goals[goalDims[code-1]].name)
	case dVisit:
		label := e.labels.str(int32(code))
		if s.field == vfCity {
			// city_geoname_id is an integer column: 0 when unknown.
			if label == "" {
				return IntValue(0)
			}
			if n, err := strconv.ParseInt(label, 10, 64); err == nil {
				return IntValue(n)
			}
		}
		return StringValue(label)
	case dHour:
		local := code + e.tz.offset(code)
		d := day(floorDiv(local, 86400))
		b := d.appendISO(make([]byte, 0, 19))
		b = append(b, ' ')
		b = appendPadded(b, int(floorMod(local, 86400)/3600), 2)
		b = append(b, ":00:00"...)
		return StringValue(string(b))
	}
	return StringValue(day(code).String())
}
