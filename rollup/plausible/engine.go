package plausible

// engine evaluates one query over a scanned dataset.
type engine struct {
	q   *Query
	cfg Config
	d   *dataset

	first, last      int64 // seconds, inclusive
	evFrom, evTo     int64 // ms, [evFrom, evTo)
	sessStartMin     int64 // visits must start at or after this second
	firstDay         day   // the range's first date in the site timezone
	tz               *tzCache
	labels           *interner // shown values of visit dimensions
	visitRaw         [numVisitFields][]string
	visitCodes       [numVisitFields][]int32
	goalBuf, hourBuf []int64
}

func newEngine(q *Query, cfg Config, d *dataset) *engine {
	e := &engine{q: q, cfg: cfg, d: d, tz: newTZCache(q.Timezone), labels: newInterner()}
	e.first, e.last = q.From.Unix(), q.To.Unix()-1
	e.evFrom, e.evTo = e.first*1000, (e.last+1)*1000
	e.sessStartMin = e.first - 7*86400
	e.firstDay = localDay(q.Timezone, e.first)
	return e
}

func (e *engine) inEventRange(r *row) bool { return r.t >= e.evFrom && r.t < e.evTo }

// sessionInRange is the sessions time filter of where_builder.ex: active
// in the range and started at most 7 days before it.
func (e *engine) sessionInRange(s *session) bool {
	return !s.truncated && s.start >= e.sessStartMin && s.last >= e.first && s.start <= e.last
}

type table uint8

const (
	tblEvents table = iota
	tblSessions
	tblSmeared // visitors and visits per active hour (time:hour)
)

// part is one of the sub-queries Plausible splits a query into
// (QueryOptimizer.split, TableDecider.partition_metrics).
type part struct {
	table    table
	metrics  []string
	dims     []string
	filters  []Filter
	goalDims []int
}

// withVisitors is Util.maybe_add_visitors_metric.
func withVisitors(metrics []string) []string {
	for _, m := range metrics {
		if m == "percentage" || m == "conversion_rate" || m == "group_conversion_rate" || m == "time_on_page" {
			if !has(metrics, "visitors") {
				return append(append([]string{}, metrics...), "visitors")
			}
			break
		}
	}
	return metrics
}

func planParts(metrics, dims []string, filters []Filter, goalDims []int) []part {
	metrics = withVisitors(metrics)
	mEvent, mSession, mEither := partitionBy(metrics, metricScope)
	fEvent, fSession, _ := partitionBy(filterDimensions(filters, 0, anyDepth, behavioralAny), dimensionScope)
	dEvent, dSession, _ := partitionBy(dims, dimensionScope)
	cat := func(a, b []string) []string { return append(append([]string{}, a...), b...) }
	var tables []part
	switch {
	case len(mEvent) == 0 && len(fEvent) == 0 && len(dEvent) == 0:
		tables = []part{{table: tblSessions, metrics: cat(mSession, mEither)}}
	case len(mSession) == 0 && len(fSession) == 0 && len(dSession) == 0:
		tables = []part{{table: tblEvents, metrics: cat(mEvent, mEither)}}
	case len(mEvent) == 0 && len(dEvent) == 0:
		tables = []part{{table: tblSessions, metrics: cat(mSession, mEither)}}
	case len(mSession) == 0 && len(dSession) == 0:
		tables = []part{{table: tblEvents, metrics: cat(mEvent, mEither)}}
	default:
		tables = []part{{table: tblEvents, metrics: cat(mEvent, mEither)}, {table: tblSessions, metrics: mSession}}
	}
	hourly := has(dims, "time:hour")
	var out []part
	for _, p := range tables {
		p.goalDims = goalDims
		if p.table == tblEvents {
			p.dims, p.filters = dims, filters
			out = append(out, p)
			continue
		}
		p.dims, p.filters = sessionDims(dims), filters
		if has(dims, "event:page") {
			p.filters = renameEventPage(filters)
		}
		if hourly {
			var smearable, rest []string
			for _, m := range p.metrics {
				if m == "visitors" || m == "visits" {
					smearable = append(smearable, m)
				} else {
					rest = append(rest, m)
				}
			}
			if len(rest) > 0 {
				q := p
				q.metrics = rest
				out = append(out, q)
			}
			if len(smearable) > 0 {
				q := p
				q.table, q.metrics = tblSmeared, smearable
				out = append(out, q)
			}
			continue
		}
		if len(p.metrics) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// sessionDims: the visits query groups event:page by entry page.
func sessionDims(dims []string) []string {
	out := make([]string, len(dims))
	for i, d := range dims {
		if d == "event:page" {
			d = "visit:entry_page"
		}
		out[i] = d
	}
	return out
}

// renameEventPage turns event:page filters into entry page filters for the
// visits query (Filters.rename_dimensions_used_in_filter). Waymark leaves
// has_done/has_not_done alone: there the filter means a page visited.
func renameEventPage(filters []Filter) []Filter {
	out := make([]Filter, len(filters))
	for i, f := range filters {
		switch {
		case f.IsLeaf():
			if f.Dimension == "event:page" {
				f.Dimension = "visit:entry_page"
			}
		case f.Op == OpHasDone || f.Op == OpHasNotDone:
		default:
			f.Children = renameEventPage(f.Children)
		}
		out[i] = f
	}
	return out
}
