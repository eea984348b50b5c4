package clickhouse

import (
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// A question's markers come from the marker cache only while no part of
// their tables changed: a late segment stored by a second aggregator
// (its own Client, so its own cache) counts in the first one's next
// answer. By hand: now is day 2 12:00, so day 0 is late. s1's visitor 1
// at day 0 10:00, materialized: day 0 is 1 visit (a bounce) of 1
// pageview, from rows, and asked again its markers are a cache hit. The
// second aggregator stores visitor 2 at 11:00 (a late mark from 11:00):
// 2 visits, 2 visitors, 2 pageviews, both bounces. Keyed by the SQL
// alone, the cache would answer 1 visit.
func TestMarkerCacheSeesAnotherAggregatorsWrite(t *testing.T) {
	srv := sharedServer(t)
	c1 := newClient(t, srv)
	c2, err := New(Config{URL: srv.URL(), Database: c1.db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c2.Close)
	now := dec1.AddDate(0, 0, 2).Add(12 * time.Hour)
	cfg := BackendConfig{Now: func() time.Time { return now }}
	b1, b2 := NewBackend(c1, cfg), NewBackend(c2, cfg)
	mustStore(t, b1, segment("e1", 1, []ingest.Event{pageview("s1", "/", at(0, 10, 0, 0, 0), 1, 0)}), Stored)
	mustMaterialize(t, b1)
	day0 := dayRange(0, 1)
	one := query.SiteMetrics{Visitors: 1, Visits: 1, Pageviews: 1, Events: 1, ViewsPerVisit: 1, BounceRate: 100}
	for i := range 2 {
		m, err := b1.SiteAggregate("s1", day0, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantMetrics(t, "day 0 before the late segment", m, one)
		if i == 0 {
			wantFromRows(t, b1, "s1", day0)
		}
	}
	if hits := c1.m.markerCache.hits.Get(); hits == 0 {
		t.Fatalf("asked twice with nothing written between, the markers were read twice (marker cache hits %d)", hits)
	}
	mustStore(t, b2, segment("e2", 1, []ingest.Event{pageview("s1", "/", at(0, 11, 0, 0, 0), 2, 0)}), Stored)
	m, err := b1.SiteAggregate("s1", day0, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, "day 0 after the other aggregator's late segment", m,
		query.SiteMetrics{Visitors: 2, Visits: 2, Pageviews: 2, Events: 2, ViewsPerVisit: 1, BounceRate: 100})
}
