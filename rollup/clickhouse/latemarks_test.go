package clickhouse

import (
	"fmt"
	"strings"
	"testing"

	"github.com/waymark/waymark/ingest"
)

// A batch's late events mark their sites' units dirty with one INSERT.
// Hand-worked: now is day 20 00:00, so with the default 5 minutes of
// lateness and the 30-minute visit gap the units up to day 19 23:00 are
// marked; every unit from a late event's hour on may change (a visit it
// joins closes after it). s1's late events span day 2 10:00 to 11:30: day
// 2 10:00 to day 19 23:00, 14 + 17*24 = 422 units; s2's one event at day
// 5 06:15: day 5 06:00 to day 19 23:00, 18 + 14*24 = 354.
func TestLateMarksOfABatchInOneInsert(t *testing.T) {
	c := newClient(t, sharedServer(t))
	ctx := testCtx(t)
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 20))
	seg1 := segment("e1", 1, []ingest.Event{pageview("s1", "/", at(2, 10, 0, 0, 0), 1, 0), pageview("s2", "/", at(5, 6, 15, 0, 0), 2, 0)})
	seg2 := segment("e1", 2, []ingest.Event{pageview("s1", "/a", at(2, 11, 30, 0, 0), 1, 0)})
	reqs := c.m.requests.Get()
	out, errs := b.StoreSegments(ctx, [][]byte{seg1, seg2})
	for i := range out {
		if errs[i] != nil || out[i].Outcome != Stored {
			t.Fatalf("segment %d: %+v, %v; want stored", i, out[i], errs[i])
		}
	}
	if got := c.m.requests.Get() - reqs; got != 4 {
		t.Errorf("a batch with late events of two sites took %d requests; want 4 (lookup, events, units, identities)", got)
	}
	want := []string{
		fmt.Sprintf("s1 422 %d %d", at(2, 10, 0, 0, 0)/1000, at(19, 23, 0, 0, 0)/1000),
		fmt.Sprintf("s2 354 %d %d", at(5, 6, 0, 0, 0)/1000, at(19, 23, 0, 0, 0)/1000),
	}
	if got := dirtyUnits(t, c); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("dirty units (site count first last): %q; want %q", got, want)
	}

}

func dirtyUnits(t *testing.T, c *Client) []string {
	t.Helper()
	r, err := c.Query(testCtx(t), "SELECT site, count(), min(toUInt32(unit)), max(toUInt32(unit)) FROM site_units FINAL WHERE state = 0 GROUP BY site ORDER BY site")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, raw := range r.Data {
		row := rawRow(raw)
		site, _ := row[0].str()
		n, _ := row[1].uint()
		first, _ := row[2].uint()
		last, _ := row[3].uint()
		out = append(out, fmt.Sprintf("%s %d %d %d", site, n, first, last))
	}
	return out
}
