package clickhouse

import (
	"testing"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// TestLinkRowCacheNeverServesAnOldVersion: a repeated question reads its
// clean hours from the cache (hits, the same hand counts), and after a
// late click re-materializes 09:00 under a new version the answer holds
// it: a cache keyed without the version would serve the old 09:00 rows.
func TestLinkRowCacheNeverServesAnOldVersion(t *testing.T) {
	c := newClient(t, sharedServer(t))
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 2))
	mustStore(t, b, segment("e1", 1, []ingest.Event{
		click("k1", at(0, 9, 0, 0, 0), 1, false), click("k1", at(0, 9, 30, 0, 0), 2, false), click("k1", at(0, 11, 0, 0, 0), 2, false),
	}), Stored)
	mustMaterialize(t, b)
	day := dayRange(0, 1)
	ask := func(what string, clicks int64, hour9 int64, visitors uint64) {
		t.Helper()
		ls, err := b.LinkStats("k1", day, query.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if ls.Totals.Clicks != clicks || ls.Series[9].Clicks != hour9 || ls.Totals.UniqueVisitors != visitors {
			t.Errorf("%s: totals %+v, 09:00 %d; want %d clicks, %d at 09:00, %d visitors", what, ls.Totals, ls.Series[9].Clicks, clicks, hour9, visitors)
		}
	}
	m := &b.c.m.linkCache
	ask("cold", 3, 2, 2)
	h0, miss0 := m.hits.Get(), m.misses.Get()
	ask("warm", 3, 2, 2)
	if hits, misses := m.hits.Get()-h0, m.misses.Get()-miss0; hits != 15 || misses != 0 {
		t.Errorf("warm question: %d hits, %d misses; want 15 (09:00, the first marked hour, to the day's end) and 0", hits, misses)
	}
	if m.bytes.Get() <= 0 {
		t.Errorf("cache bytes gauge %v; want > 0", m.bytes.Get())
	}
	mustStore(t, b, segment("e1", 2, []ingest.Event{click("k1", at(0, 9, 15, 0, 0), 3, false)}), Stored)
	if n := mustMaterialize(t, b); n == 0 {
		t.Fatal("the late hour was not materialized again")
	}
	ask("re-materialized", 4, 3, 3)
}
