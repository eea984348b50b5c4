package clickhouse

import (
	"fmt"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"

	"github.com/waymark/waymark/ingest"
)

// TestPartsStoreOnceEach: the hand-counted segments of
// TestStatsMatchHandCounts, split by partition as a node with several
// aggregators ships them, and each part stored twice: every part is
// stored once and then a duplicate, and the answers are the hand counts.
func TestPartsStoreOnceEach(t *testing.T) {
	c := newClient(t, sharedServer(t))
	ctx := testCtx(t)
	var sp ingest.Splitter
	parts := 0
	for _, seg := range handSegments() {
		subs, err := sp.Split(seg, nil)
		if err != nil {
			t.Fatal(err)
		}
		// k1, k2 and s1: three partitions at most per segment, and the
		// first segment has all three keys.
		for _, sub := range subs {
			for round, want := range []Outcome{Stored, Duplicate} {
				res, err := c.StoreSegment(ctx, sub.Data)
				if err != nil || res.Outcome != want || res.Ref != sub.Ref {
					t.Fatalf("part %d of seq %d, round %d: %+v, %v; want %v", sub.Ref.Part, sub.Ref.Seq, round, res, err, want)
				}
			}
			parts++
		}
	}
	r, err := c.Query(ctx, "SELECT count(), countIf(part > 0) FROM segments FINAL")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := rawValue(r.Data[0][0]).int(); n != int64(parts) {
		t.Fatalf("%d identities recorded; want one per part (%d)", n, parts)
	}
	link, err := c.LinkStats(ctx, "k1", dec1, dec1.AddDate(0, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Counts{Clicks: 5, BotClicks: 1, Visitors: 3}); link.Totals != want {
		t.Errorf("k1 totals from parts = %+v; want %+v", link.Totals, want)
	}
	site, err := c.SiteStats(ctx, "s1", dec1, dec1.AddDate(0, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Counts{Pageviews: 3, Events: 5, BotEvents: 2, Visitors: 4}); site.Totals != want {
		t.Errorf("s1 totals from parts = %+v; want %+v", site.Totals, want)
	}
}

// TestMigration2OverStoredSegmentsAndAgain: a database at migration 1
// with a stored segment takes migration 2 (the segment reads part 0 and
// is still a duplicate), and migration 2 run again, as after a crash
// before it was recorded, is harmless.
func TestMigration2OverStoredSegmentsAndAgain(t *testing.T) {
	c := newClient(t, sharedServer(t))
	ctx := testCtx(t)
	// Back to migration 1 (its segments table, no record of anything),
	// with a segment recorded the way migration 1 did.
	seg := handSegments()[0]
	for _, q := range []string{
		"DROP TABLE segments",
		migrations[0].statements[1],
		"DROP TABLE schema_migrations",
		fmt.Sprintf("INSERT INTO segments (node, inc, seq, bytes, crc, events, first_time, last_time, stored) VALUES ('e1', 1, 1, %d, %d, 13, now(), now(), now())",
			len(seg), crc32.Checksum(seg, castagnoli)),
	} {
		if err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	all := make([]uint32, len(migrations))
	for i, m := range migrations {
		all[i] = m.version
	}
	applied, err := c.Migrate(ctx)
	if err != nil || !reflect.DeepEqual(applied, all) {
		t.Fatalf("Migrate = %v, %v; want %v (all but 2 no-ops)", applied, err, all)
	}
	if res, err := c.StoreSegment(ctx, seg); err != nil || res.Outcome != Duplicate {
		t.Fatalf("the segment recorded before migration 2: %+v, %v; want a duplicate", res, err)
	}
	// Cut short: the ALTER ran, nothing was recorded.
	if err := c.Exec(ctx, "DROP TABLE schema_migrations"); err != nil {
		t.Fatal(err)
	}
	applied, err = c.Migrate(ctx)
	if err != nil || !reflect.DeepEqual(applied, all) {
		t.Fatalf("Migrate again = %v, %v; want %v without an error", applied, err, all)
	}
	r, err := c.Query(ctx, "SELECT sorting_key FROM system.tables WHERE database = "+String(c.Database())+" AND name = 'segments'")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Trim(string(r.Data[0][0]), `"`); got != "node, inc, seq, part" {
		t.Errorf("segments sorting key %q; want node, inc, seq, part", got)
	}
}
