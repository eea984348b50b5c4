package rollup

import (
	"slices"
	"strings"

	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
)

var goalsEstimated = []string{"total_visitors", "visitors", "conversion_rate"}

// goalUnionByPoint is how many matching pages a page goal unions by point
// reads of their sets (cached per range); past it, the sets of every page
// in each bucket are scanned once.
const goalUnionByPoint = 64

// SiteGoalStats computes the conversions of goals on site over r.
func (a *Aggregator) SiteGoalStats(site string, goals []store.Goal, r query.Range) (*query.SiteGoals, error) {
	if err := query.CheckRange(r); err != nil {
		return nil, err
	}
	if err := a.enter(); err != nil {
		return nil, err
	}
	defer a.leave()
	out := &query.SiteGoals{From: r.From, To: r.To, Timezone: r.Location().String(), Goals: []query.GoalStat{}, Estimated: goalsEstimated}
	tot, err := a.setsOf(kindSite, site, dimTotal, r, []string{""})
	if err != nil {
		return nil, err
	}
	out.TotalVisitors = estimateOf(tot[""])
	var events, pages map[string]*counters // read once, for every goal
	for i := range goals {
		g := &goals[i]
		st := query.GoalStat{ID: g.ID, DisplayName: g.DisplayName, GoalType: g.Type()}
		var converted uint64
		if g.IsPage() {
			p := g.PagePath
			st.PagePath = &p
			if pages == nil {
				if pages, err = a.rows(kindSite, site, dimPage, r, false, nil); err != nil {
					return nil, err
				}
			}
			m := g.Matcher()
			var matched []string
			for v, c := range pages {
				if c[fCount] > 0 && m.MatchPage(v) {
					matched = append(matched, v)
					st.Events += c[fCount]
				}
			}
			if converted, err = a.unionOf(site, dimPage, r, matched); err != nil {
				return nil, err
			}
		} else {
			n := g.EventName
			st.EventName = &n
			if events == nil {
				if events, err = a.rows(kindSite, site, dimEventName, r, false, nil); err != nil {
					return nil, err
				}
			}
			if c := events[n]; c != nil && c[fEvents] > 0 {
				st.Events = c[fEvents]
				if converted, err = a.unionOf(site, dimEventName, r, []string{n}); err != nil {
					return nil, err
				}
			}
		}
		// An estimate of a subset can come out above the whole's.
		st.Visitors = min(converted, out.TotalVisitors)
		if out.TotalVisitors > 0 {
			st.ConversionRate = round2(float64(st.Visitors) / float64(out.TotalVisitors) * 100)
		}
		out.Goals = append(out.Goals, st)
	}
	slices.SortStableFunc(out.Goals, func(x, y query.GoalStat) int {
		if x.Visitors != y.Visitors {
			if x.Visitors > y.Visitors {
				return -1
			}
			return 1
		}
		return strings.Compare(x.DisplayName, y.DisplayName)
	})
	return out, nil
}

// unionOf estimates the visitors of the union of values of a site
// dimension over r.
func (a *Aggregator) unionOf(site string, dim byte, r query.Range, values []string) (uint64, error) {
	var sets map[string]*visitorAcc
	var err error
	switch {
	case len(values) == 0:
		return 0, nil
	case len(values) > goalUnionByPoint:
		keep := make(map[string]bool, len(values))
		for _, v := range values {
			keep[v] = true
		}
		sets, err = a.sets(kindSite, site, dim, r, func(v string) bool { return keep[v] }, false)
	default:
		sets, err = a.setsOf(kindSite, site, dim, r, values)
	}
	if err != nil {
		return 0, err
	}
	if len(values) == 1 {
		return estimateOf(sets[values[0]]), nil
	}
	var u visitorSet
	for _, v := range values {
		if err := unionAdd(&u, sets[v]); err != nil {
			return 0, err
		}
	}
	return u.estimate(), nil
}

// unionCompactAt is how many listed hashes a union holds before it is
// compacted (a sketch past maxListHashes distinct ones).
const unionCompactAt = 1 << 12

// unionAdd unions v into u. Once u is a sketch, listed hashes go straight
// into it: a sketch needs no sorting to drop duplicates, and sorting the
// lists of a thousand pages at the end is most of the work otherwise.
func unionAdd(u *visitorSet, v *visitorAcc) error {
	if v == nil || v.n == 0 {
		return nil
	}
	src := &v.set
	if v.n == 1 {
		src = &v.one.set
	}
	if u.sk == nil {
		if err := u.merge(src); err != nil {
			return err
		}
		if len(u.hashes) > unionCompactAt {
			u.compact()
		}
		return nil
	}
	for _, h := range src.hashes {
		u.sk.InsertHash(h)
	}
	if src.sk != nil {
		return u.sk.Merge(src.sk)
	}
	return nil
}
