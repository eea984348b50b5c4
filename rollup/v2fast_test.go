package rollup

import (
	"fmt"
	"math"
	"testing"

	"github.com/waymark/waymark/rollup/plausible"
	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
)

// TestV2FastMatchesRaw: every query shape the fast path takes gives the
// raw engine's answer (rollup/plausible, the reference implementation of
// Plausible's definitions) over the generated world delivered in time
// order: counts exactly, visitors within the sketch's bound. The
// hand-computed scenarios of the definitions themselves are in
// rollup/plausible.
func TestV2FastMatchesRaw(t *testing.T) {
	checkV2Fast(t, generate(11).InTimeOrder(), false)
}

// TestV2FastShuffledArrival: delivered in random order, the counts are
// still exact (a visit's counts depend only on its events), and visitors
// are never fewer than the raw engine's: a late event that changes a
// visit's values (or, before midnight, its visitor id) leaves its visitor
// under the old ones too (a sketch takes nobody back; rollup/DESIGN.md).
func TestV2FastShuffledArrival(t *testing.T) {
	checkV2Fast(t, generate(11), true)
}

func checkV2Fast(t *testing.T, w *genWorld, visitorsAtLeast bool) {
	a, _ := feedWorld(t, w)
	site := store.Site{ID: genSite, Domain: genSite, Timezone: genTZ}
	ranges := []string{`["2026-11-28","2026-11-29"]`, `"7d"`, `["2026-11-29T06:00:00-05:00","2026-11-30T06:59:59-05:00"]`}
	shapes := []string{
		`"metrics":["visitors","visits","pageviews","events","bounce_rate","visit_duration","views_per_visit"]`,
		`"metrics":["visitors","visits","pageviews","events","bounce_rate","visit_duration"],"dimensions":["visit:source"]`,
		`"metrics":["visits","bounce_rate","visitors"],"dimensions":["visit:country"]`,
		`"metrics":["visits","visit_duration"],"dimensions":["visit:entry_page"]`,
		`"metrics":["visits","bounce_rate"],"dimensions":["visit:exit_page"]`,
		`"metrics":["visitors","pageviews","visits","bounce_rate","visit_duration"],"dimensions":["event:page"]`,
		`"metrics":["pageviews","events","visitors"],"dimensions":["time:day"]`,
		`"metrics":["visits","bounce_rate","visit_duration"],"dimensions":["time:day"]`,
		`"metrics":["visitors","visits"],"dimensions":["visit:device"],"order_by":[["visits","asc"]]`,
		`"metrics":["visitors","visits","pageviews","bounce_rate"],"dimensions":["visit:region"]`,
		`"metrics":["visits","visitors"],"dimensions":["visit:city"],"order_by":[["visit:city","desc"]]`,
		`"metrics":["visits","visit_duration","visitors"],"dimensions":["visit:browser_version"]`,
		`"metrics":["visits","events"],"dimensions":["visit:os_version"]`,
	}
	for _, dr := range ranges {
		for _, shape := range shapes {
			body := []byte(fmt.Sprintf(`{"site_id":%q,"date_range":%s,%s}`, genSite, dr, shape))
			q, err := plausible.Parse(body, query.PlausibleSite(site, a.firstDay(classSite, site.ID)), base)
			if err != nil {
				t.Fatalf("Parse(%s): %v", body, err)
			}
			fast, ok, err := a.v2Fast(q, site.ID)
			if err != nil || !ok {
				t.Fatalf("v2Fast(%s): ok %v, err %v; want an answer", body, ok, err)
			}
			raw, err := plausible.Evaluate(q, rawSource{a}, a.v2Config())
			if err != nil {
				t.Fatalf("Evaluate(%s): %v", body, err)
			}
			compareResults(t, string(body), q, fast, raw, visitorsAtLeast)
		}
	}
}

func compareResults(t *testing.T, what string, q *plausible.Query, fast, raw *plausible.Result, visitorsAtLeast bool) {
	t.Helper()
	if len(fast.Rows) != len(raw.Rows) {
		t.Errorf("%s: %d rows from the rollups, %d from the raw events\n fast %+v\n raw  %+v", what, len(fast.Rows), len(raw.Rows), fast.Rows, raw.Rows)
		return
	}
	rawByDims := make(map[string]plausible.Row)
	for _, r := range raw.Rows {
		rawByDims[fmt.Sprint(r.Dimensions)] = r
	}
	for _, fr := range fast.Rows {
		rr, ok := rawByDims[fmt.Sprint(fr.Dimensions)]
		if !ok {
			t.Errorf("%s: row %v from the rollups only", what, fr.Dimensions)
			continue
		}
		for i, m := range q.Metrics {
			fv, rv := fr.Metrics[i], rr.Metrics[i]
			if m == "visitors" {
				if visitorsAtLeast && float64(fv.Int) >= float64(rv.Int)-hllBound(rv.Int) {
					continue
				}
				if d := math.Abs(float64(fv.Int - rv.Int)); d > hllBound(rv.Int) {
					t.Errorf("%s %v: visitors %d; raw %d", what, fr.Dimensions, fv.Int, rv.Int)
				}
				continue
			}
			if fv != rv {
				t.Errorf("%s %v: %s %+v; raw %+v", what, fr.Dimensions, m, fv, rv)
			}
		}
	}
}
