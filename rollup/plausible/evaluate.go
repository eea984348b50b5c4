package plausible

import (
	"cmp"
	"slices"
	"strconv"
)

// Evaluate answers q exactly from the site's raw events: it scans them (see
// scan.go for the window), rebuilds the visits, runs Plausible's
// sub-queries, joins, orders and paginates them.
func Evaluate(q *Query, src EventSource, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	d, err := scan(q, src, cfg)
	if err != nil {
		return nil, err
	}
	return evaluateDataset(q, cfg, d)
}

func evaluateDataset(q *Query, cfg Config, d *dataset) (*Result, error) {
	e := newEngine(q, cfg, d)
	parts := planParts(q.Metrics, q.Dimensions, q.Filters, q.goalDims)
	results := make([]*partResult, len(parts))
	for i, p := range parts {
		r, err := e.runPart(p)
		if err != nil {
			return nil, err
		}
		results[i] = r
	}
	rows := e.join(results)
	e.sortRows(rows)
	res := &Result{q: q, TotalRows: len(rows)}
	lo := min(q.Pagination.Offset, len(rows))
	hi := min(lo+q.Pagination.Limit, len(rows))
	specs := e.dimSpecs(q.Dimensions)
	for _, jr := range rows[lo:hi] {
		out := Row{Dimensions: make([]Value, len(specs)), Metrics: jr.metrics}
		for i := range specs {
			out.Dimensions[i] = e.dimValue(&specs[i], jr.codes[i], q.goalDims)
		}
		res.Rows = append(res.Rows, out)
	}
	if q.Include.TimeLabels {
		res.TimeLabels = timeLabels(q)
	}
	return res, nil
}

type joinedRow struct {
	codes   []int64
	metrics []Value
}

// join combines the parts on their dimension codes: rows are the first
// part's groups (LEFT JOIN), or every part's with a time:hour dimension
// (FULL JOIN, query_optimizer.ex set_sql_join_type). A metric of a part
// without the row takes ClickHouse's default. Unlike Plausible, a row only
// one side of a FULL JOIN has keeps its own dimension values.
func (e *engine) join(parts []*partResult) []joinedRow {
	if len(parts) == 0 {
		return nil
	}
	metricsOf := func(codes []int64) []Value {
		ms := make([]Value, len(e.q.Metrics))
		for mi, m := range e.q.Metrics {
			for _, p := range parts {
				if has(p.part.metrics, m) {
					g := p.groups.lookup(codes)
					if g == nil && len(e.q.Dimensions) == 0 {
						g = newGroup(nil) // an aggregate over nothing
					}
					ms[mi] = p.metric(m, g)
					break
				}
			}
		}
		return ms
	}
	if len(e.q.Dimensions) == 0 {
		// An aggregate always has exactly one row.
		return []joinedRow{{metrics: metricsOf(nil)}}
	}
	full := has(e.q.Dimensions, "time:hour")
	var rows []joinedRow
	seen := newGroupTable(len(e.q.Dimensions))
	for i, p := range parts {
		if i > 0 && !full {
			break
		}
		for _, g := range p.groups.list {
			if seen.lookup(g.codes) != nil {
				continue
			}
			seen.get(g.codes)
			rows = append(rows, joinedRow{codes: g.codes, metrics: metricsOf(g.codes)})
		}
	}
	return rows
}

// sortRows orders by order_by. Plausible adds no tiebreaker (ties come back
// in whatever order ClickHouse produces); Waymark breaks ties by the
// dimension values, in query order, ascending. NULL sorts last either way,
// as in ClickHouse.
func (e *engine) sortRows(rows []joinedRow) {
	specs := e.dimSpecs(e.q.Dimensions)
	type key struct {
		metric int // metric index, or -1
		dim    int // dimension index, or -1
		desc   bool
	}
	var keys []key
	for _, o := range e.q.OrderBy {
		k := key{metric: -1, dim: -1, desc: o.Desc}
		if i := slices.Index(e.q.Metrics, o.Key); i >= 0 {
			k.metric = i
		} else if i := slices.Index(e.q.Dimensions, o.Key); i >= 0 {
			k.dim = i
		} else {
			continue
		}
		keys = append(keys, k)
	}
	for i := range specs {
		keys = append(keys, key{metric: -1, dim: i})
	}
	labels := make([][]Value, len(rows))
	for i := range rows {
		labels[i] = make([]Value, len(specs))
		for j := range specs {
			labels[i][j] = e.sortValue(&specs[j], rows[i].codes[j])
		}
	}
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		for _, k := range keys {
			var va, vb Value
			if k.metric >= 0 {
				va, vb = rows[a].metrics[k.metric], rows[b].metrics[k.metric]
			} else {
				va, vb = labels[a][k.dim], labels[b][k.dim]
			}
			if c := compareValues(va, vb, k.desc); c != 0 {
				return c
			}
		}
		return 0
	})
	sorted := make([]joinedRow, len(rows))
	for i, j := range idx {
		sorted[i] = rows[j]
	}
	copy(rows, sorted)
}

// sortValue is what ClickHouse sorts a dimension by: the shown string, the
// time, the goal's position, the city id.
func (e *engine) sortValue(s *dimSpec, code int64) Value {
	switch s.kind {
	case dHour, dDay, dWeek, dMonth, dGoal:
		return IntValue(code)
	}
	v := e.dimValue(s, code, e.q.goalDims)
	if s.kind == dVisit && s.field == vfCity && v.Kind == String {
		if n, err := strconv.ParseInt(v.Str, 10, 64); err == nil {
			return IntValue(n)
		}
	}
	return v
}

func compareValues(a, b Value, desc bool) int {
	if a.Kind == Null || b.Kind == Null {
		switch {
		case a.Kind == b.Kind:
			return 0
		case a.Kind == Null:
			return 1
		}
		return -1
	}
	var c int
	switch {
	case a.Kind == String && b.Kind == String:
		c = cmp.Compare(a.Str, b.Str)
	case a.Kind == String:
		c = 1
	case b.Kind == String:
		c = -1
	default:
		c = cmp.Compare(a.number(), b.number())
	}
	if desc {
		return -c
	}
	return c
}

func (v Value) number() float64 {
	if v.Kind == Float {
		return v.Float
	}
	return float64(v.Int)
}
