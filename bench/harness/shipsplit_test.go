package harness

import (
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
)

// TestEncodeSplitFollowsThePartitionRule cuts generated segments for two
// aggregators and checks, by decoding the batches, that every event is
// in exactly one part, in the batch of the aggregator that owns its
// partition by the rule an edge applies (site id, else link code).
func TestEncodeSplitFollowsThePartitionRule(t *testing.T) {
	gen, err := NewSpreadGen(SpreadConfig{
		Seed: 3, Events: 3000, Start: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Days: 1,
		Sites: []string{"s1", "s2", "s3", "s4"}, Links: []string{"a", "b", "c", "d", "e", "f", "g", "h"},
		Visitors: 500, Pages: 20, ClickShare: 0.5, Node: "edge", Region: "local",
	})
	if err != nil {
		t.Fatal(err)
	}
	var segs [][]ingest.Event
	want := map[[16]byte]int{} // event id -> owner
	names := []string{"agg1", "agg2"}
	var owners [ingest.Partitions]int
	ingest.PartitionOwners(names, &owners)
	var ev ingest.Event
	for i := 0; gen.Next(&ev); i++ {
		if i%1000 == 0 {
			segs = append(segs, nil)
		}
		segs[len(segs)-1] = append(segs[len(segs)-1], ev)
		want[ev.ID] = owners[ingest.PartitionOf(&ev)]
	}
	if len(want) != 3000 {
		t.Fatalf("%d distinct event ids; want 3000", len(want))
	}
	s, err := NewSegmentShipper("http://unused", "token", "edge")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batches, err := s.EncodeSplit(segs, &owners, len(names))
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) != 2 || batches[0] == nil || batches[1] == nil {
		t.Fatalf("batches %v; want one for each of 2 aggregators", batches)
	}
	seen := map[[16]byte]bool{}
	for o, b := range batches {
		events := 0
		err := ingest.ReadBatch(b.Body, "zstd", 1<<30, func(bs ingest.BatchSegment) error {
			if bs.Ref.Part == 0 || owners[bs.Ref.Part-1] != o {
				t.Errorf("batch of aggregator %d holds part %d (owner %d)", o, bs.Ref.Part, owners[max(int(bs.Ref.Part)-1, 0)])
			}
			_, err := ingest.ReadSegmentRecords(bs.Data, func(_ []byte, ev *ingest.Event) error {
				if seen[ev.ID] {
					t.Errorf("event %x in two parts", ev.ID)
				}
				seen[ev.ID] = true
				if w, ok := want[ev.ID]; !ok || w != o {
					t.Errorf("event %x (site %q, code %q) sent to aggregator %d; its partition's owner is %d", ev.ID, ev.SiteID, ev.Code, o, w)
				}
				events++
				return nil
			})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if events != b.Events || events == 0 {
			t.Errorf("aggregator %d: %d events decoded, batch says %d", o, events, b.Events)
		}
	}
	if len(seen) != 3000 {
		t.Errorf("%d events in the parts; want all 3000", len(seen))
	}
}
