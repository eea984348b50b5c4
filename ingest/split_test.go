package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// The 64-bit FNV-1a test vectors of its authors (draft-eastlake-fnv):
// the partition of a key is the hash modulo 64, its low six bits.
func TestPartitionIsFNV1aModulo64(t *testing.T) {
	for _, c := range []struct {
		key  string
		hash uint64
	}{{"", 0xcbf29ce484222325}, {"a", 0xaf63dc4c8601ec8c}, {"foobar", 0x85944171f73967e8}} {
		if got := fnv1a(c.key); got != c.hash {
			t.Fatalf("fnv1a(%q) = %#x; want %#x", c.key, got, c.hash)
		}
	}
	// 0x8c & 63 = 12, 0xe8 & 63 = 40.
	if p := PartitionOf(&Event{Kind: KindClick, Code: "a"}); p != 12 {
		t.Fatalf("click on a: partition %d; want 12", p)
	}
	if p := PartitionOf(&Event{Kind: KindPageview, SiteID: "foobar", Code: ""}); p != 40 {
		t.Fatalf("pageview of foobar: partition %d; want 40", p)
	}
}

func TestPartitionOwnersAreRendezvous(t *testing.T) {
	names := []string{"agg-1", "agg-2", "agg-3"}
	var owners [Partitions]int
	PartitionOwners(names, &owners)
	count := map[string]int{}
	for p, o := range owners {
		if o < 0 || o >= len(names) {
			t.Fatalf("partition %d has owner %d", p, o)
		}
		count[names[o]]++
	}
	for _, n := range names {
		// 64 partitions over 3: each gets some, none nearly all.
		if count[n] < 8 || count[n] > 40 {
			t.Fatalf("owners unbalanced: %v", count)
		}
	}
	// The same set in another order: the same owner names.
	rev := []string{"agg-3", "agg-1", "agg-2"}
	var owners2 [Partitions]int
	PartitionOwners(rev, &owners2)
	for p := range owners {
		if names[owners[p]] != rev[owners2[p]] {
			t.Fatalf("partition %d: %s in one order, %s in another", p, names[owners[p]], rev[owners2[p]])
		}
	}
	// agg-2 gone: only its partitions move, and they move to the others.
	rest := []string{"agg-1", "agg-3"}
	var owners3 [Partitions]int
	PartitionOwners(rest, &owners3)
	for p := range owners {
		was, now := names[owners[p]], rest[owners3[p]]
		if was != "agg-2" && was != now {
			t.Fatalf("partition %d moved from %s to %s though %s is alive", p, was, now, was)
		}
	}
	// Alone: one owner of everything; none: -1.
	PartitionOwners([]string{"x"}, &owners)
	var none [Partitions]int
	PartitionOwners(nil, &none)
	for p := range owners {
		if owners[p] != 0 || none[p] != -1 {
			t.Fatalf("partition %d: owner %d alone, %d with none", p, owners[p], none[p])
		}
	}
}

// splitWorld is a segment with clicks on 20 links and events of 20
// sites, interleaved, and two tallies.
func splitWorld(t *testing.T) ([]byte, []Event) {
	t.Helper()
	var evs []Event
	for i := range 400 {
		ev := Event{Kind: KindClick, Code: fmt.Sprintf("link-%d", i%20), Time: int64(1_780_000_000_000 + i), VisitorHash: uint64(i)}
		if i%2 == 1 {
			ev = Event{Kind: KindPageview, SiteID: fmt.Sprintf("site-%d", i%20), Path: "/p", Time: int64(1_780_000_000_000 + i), VisitorHash: uint64(i)}
		}
		ev.ID[0] = byte(i)
		evs = append(evs, ev)
	}
	seg := BuildSegmentParts(SegmentRef{Node: "edge-a", Inc: 3, Seq: 9}, time.UnixMilli(1_780_000_000_000).UTC(), evs,
		[]DropTally{{Scope: ScopeLink, Name: "link-4", Hour: 494_444, Count: 3}, {Scope: ScopeUnknown, Hour: 494_444, Count: 2}})
	return seg, evs
}

func TestSplitCutsOnePartPerPartition(t *testing.T) {
	seg, evs := splitWorld(t)
	var s Splitter
	subs, err := s.Split(seg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) < 2 {
		t.Fatalf("%d parts from 40 keys; want several", len(subs))
	}
	var got []Event
	tallies := map[string]uint16{}
	records := 0
	for i, sub := range subs {
		if i > 0 && sub.Ref.Part <= subs[i-1].Ref.Part {
			t.Fatalf("parts out of order: %d after %d", sub.Ref.Part, subs[i-1].Ref.Part)
		}
		want := SegmentRef{Node: "edge-a", Inc: 3, Seq: 9, Part: sub.Ref.Part}
		if sub.Ref != want {
			t.Fatalf("ref %+v; want %+v", sub.Ref, want)
		}
		n := 0
		h, err := ReadSegmentParts(sub.Data, func(_ []byte, ev *Event) error {
			if p := PartitionOf(ev); p+1 != int(sub.Ref.Part) {
				t.Fatalf("event of %q%q (partition %d) in part %d", ev.SiteID, ev.Code, p, sub.Ref.Part)
			}
			got = append(got, *ev)
			n++
			return nil
		}, func(dt *DropTally) error {
			tallies[dt.Name] = sub.Ref.Part
			n++
			return nil
		})
		if err != nil {
			t.Fatalf("part %d does not read as a segment: %v", sub.Ref.Part, err)
		}
		if h.Ref() != want || !h.Created.Equal(time.UnixMilli(1_780_000_000_000)) || h.Version != segmentVersion3 {
			t.Fatalf("part header %+v", h)
		}
		if n != sub.Records {
			t.Fatalf("part %d: %d records read, %d said", sub.Ref.Part, n, sub.Records)
		}
		records += n
	}
	if records != 402 {
		t.Fatalf("%d records in the parts; want 400 events + 2 tallies", records)
	}
	// Every event once, and within each key in the order written.
	slices.SortStableFunc(got, func(a, b Event) int { return int(a.Time - b.Time) })
	if len(got) != len(evs) {
		t.Fatalf("%d events; want %d", len(got), len(evs))
	}
	for i := range evs {
		if got[i].ID != evs[i].ID || got[i].Code != evs[i].Code || got[i].SiteID != evs[i].SiteID {
			t.Fatalf("event %d: %+v; want %+v", i, got[i], evs[i])
		}
	}
	if tallies["link-4"] != uint16(PartitionOf(&Event{Code: "link-4"})+1) || tallies[""] != 1 {
		t.Fatalf("tallies went to parts %v", tallies)
	}
}

func TestSplitIsDeterministic(t *testing.T) {
	seg, _ := splitWorld(t)
	var a, b Splitter
	first, err := a.Split(seg, nil)
	if err != nil {
		t.Fatal(err)
	}
	keep := map[uint16][]byte{}
	for _, s := range first {
		keep[s.Ref.Part] = bytes.Clone(s.Data)
	}
	// Another splitter, skipping every other part: the parts it cuts are
	// byte for byte the same.
	i := 0
	second, err := b.Split(seg, func(uint16) bool { i++; return i%2 == 0 })
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != (len(first)+1)/2 {
		t.Fatalf("%d parts with every other skipped, of %d", len(second), len(first))
	}
	for _, s := range second {
		if !bytes.Equal(s.Data, keep[s.Ref.Part]) {
			t.Fatalf("part %d differs between two splits", s.Ref.Part)
		}
	}
	// The same splitter again, reusing its buffers.
	again, _ := a.Split(seg, nil)
	for _, s := range again {
		if !bytes.Equal(s.Data, keep[s.Ref.Part]) {
			t.Fatalf("part %d differs on a second split", s.Ref.Part)
		}
	}
}

func TestSplitRefusesAPartAndDamage(t *testing.T) {
	seg, _ := splitWorld(t)
	var s Splitter
	subs, _ := s.Split(seg, nil)
	part := bytes.Clone(subs[0].Data)
	if _, err := s.Split(part, nil); !errors.Is(err, ErrCorruptSegment) {
		t.Fatalf("splitting a part: %v; want ErrCorruptSegment", err)
	}
	bad := bytes.Clone(seg)
	bad[len(bad)/2] ^= 0xff
	if _, err := s.Split(bad, nil); !errors.Is(err, ErrCorruptSegment) {
		t.Fatalf("splitting a damaged segment: %v; want ErrCorruptSegment", err)
	}
}

func TestPartHeaderRoundTripsAndZeroPartIsRefused(t *testing.T) {
	h := SegmentHeader{NodeID: "edge-b", Incarnation: 5, Seq: 77, Created: time.UnixMilli(1_780_000_000_123).UTC()}
	b := appendFooter(appendPartHeader(nil, &h, 64), 0)
	got, err := PeekSegmentHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Ref() != (SegmentRef{Node: "edge-b", Inc: 5, Seq: 77, Part: 64}) || !got.Created.Equal(h.Created) {
		t.Fatalf("read back %+v", got)
	}
	zero := appendPartHeader(nil, &h, 0)
	if _, err := PeekSegmentHeader(zero); !errors.Is(err, ErrCorruptSegment) {
		t.Fatalf("part 0 in a version 3 header: %v; want ErrCorruptSegment", err)
	}
}

func TestBatchCarriesPartsOnlyWhenSplit(t *testing.T) {
	seg := buildSegment(threeEvents(), true)
	whole := AppendBatch(nil, []BatchSegment{{Ref: SegmentRef{Node: "node-a", Inc: 3, Seq: 7}, Data: seg}})
	if whole[4] != batchVersion2 {
		t.Fatalf("a batch of whole segments is version %d; want 2 (the wire as before)", whole[4])
	}
	var s Splitter
	subs, err := s.Split(seg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var in []BatchSegment
	for _, sub := range subs {
		in = append(in, BatchSegment{Ref: sub.Ref, Data: sub.Data})
	}
	body := AppendBatch(nil, in)
	if body[4] != batchVersion3 {
		t.Fatalf("a batch of parts is version %d; want 3", body[4])
	}
	var out []BatchSegment
	if err := ReadBatch(body, "", 1<<20, func(bs BatchSegment) error { out = append(out, bs); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d segments back; want %d", len(out), len(in))
	}
	for i := range in {
		if out[i].Ref != in[i].Ref || !bytes.Equal(out[i].Data, in[i].Data) {
			t.Fatalf("segment %d: %+v back; want %+v", i, out[i].Ref, in[i].Ref)
		}
	}
}

// BenchmarkSplit is the shipper's cost of cutting a sealed segment of
// 4,096 events over 200 links and sites into parts, per event.
func BenchmarkSplit(b *testing.B) {
	var evs []Event
	for i := range 4096 {
		ev := sampleClick()
		ev.Code = fmt.Sprintf("link-%d", i%100)
		if i%2 == 1 {
			ev = sampleSiteEvent()
			ev.SiteID = fmt.Sprintf("site-%d", i%100)
		}
		evs = append(evs, ev)
	}
	seg := BuildSegment(SegmentRef{Node: "edge-a", Inc: 1, Seq: 1}, time.Now(), evs)
	var s Splitter
	b.ReportAllocs()
	b.SetBytes(int64(len(seg)))
	b.ResetTimer()
	for range b.N {
		if _, err := s.Split(seg, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs)), "ns/event")
}

// A segment written before incarnations (version 1, incarnation 0) still
// ships: its parts carry incarnation 0 and read back.
func TestSplitAVersion1Segment(t *testing.T) {
	b := v1Header("node-a", 4, time.UnixMilli(1_780_000_000_000))
	evs := threeEvents()
	for i := range evs {
		b = appendRecord(b, AppendEvent(nil, &evs[i]))
	}
	b = appendFooter(b, len(evs))
	var s Splitter
	subs, err := s.Split(b, nil)
	if err != nil || len(subs) == 0 {
		t.Fatalf("split of a version 1 segment: %d parts, %v", len(subs), err)
	}
	n := 0
	for _, sub := range subs {
		h, err := ReadSegment(sub.Data, func(*Event) error { n++; return nil })
		if err != nil || h.Incarnation != 0 || h.Seq != 4 || h.Part != sub.Ref.Part {
			t.Fatalf("part %d: %+v, %v", sub.Ref.Part, h, err)
		}
	}
	if n != len(evs) {
		t.Fatalf("%d events in the parts; want %d", n, len(evs))
	}
}
