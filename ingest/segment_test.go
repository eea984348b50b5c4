package ingest

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// buildSegment encodes events as a segment, sealed (with footer) or not.
func buildSegment(events []Event, sealed bool) []byte {
	b := appendSegmentHeader(nil, "node-a", 3, 7, time.UnixMilli(1_780_000_000_000))
	for i := range events {
		b = appendRecord(b, AppendEvent(nil, &events[i]))
	}
	if sealed {
		b = appendFooter(b, len(events))
	}
	return b
}

func threeEvents() []Event {
	a, b, c := sampleClick(), sampleSiteEvent(), Event{Kind: KindPageview, SiteID: "s", Path: "/"}
	return []Event{a, b, c}
}

func TestReadSegmentRoundTrip(t *testing.T) {
	events := threeEvents()
	seg := buildSegment(events, true)
	var got []Event
	h, err := ReadSegment(seg, func(ev *Event) error {
		got = append(got, *ev)
		return nil
	})
	if err != nil {
		t.Fatalf("ReadSegment: %v", err)
	}
	if h.NodeID != "node-a" || h.Seq != 7 || h.Created.UnixMilli() != 1_780_000_000_000 {
		t.Errorf("got header %+v; want node-a/7", h)
	}
	if len(got) != 3 || got[0].Code != "aB3dE7x" || got[1].Path != "/blog/hello" || got[2].SiteID != "s" {
		t.Errorf("got %d events %+v; want the three written", len(got), got)
	}
}

func TestReadSegmentEmptySealed(t *testing.T) {
	n := 0
	if _, err := ReadSegment(buildSegment(nil, true), func(*Event) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("got %d events, err %v; want 0, nil", n, err)
	}
}

// expectCorrupt asserts that seg is rejected and nothing is delivered.
func expectCorrupt(t *testing.T, name string, seg []byte) {
	t.Helper()
	delivered := 0
	_, err := ReadSegment(seg, func(*Event) error { delivered++; return nil })
	if !errors.Is(err, ErrCorruptSegment) {
		t.Errorf("%s: got %v; want ErrCorruptSegment", name, err)
	}
	if delivered != 0 {
		t.Errorf("%s: delivered %d events from a damaged segment; want 0", name, delivered)
	}
}

func TestReadSegmentTruncated(t *testing.T) {
	seg := buildSegment(threeEvents(), true)
	for n := range len(seg) {
		expectCorrupt(t, "truncated", seg[:n])
	}
}

func TestReadSegmentFlippedBit(t *testing.T) {
	seg := buildSegment(threeEvents(), true)
	for i := range len(seg) * 8 {
		bad := append([]byte(nil), seg...)
		bad[i/8] ^= 1 << (i % 8)
		expectCorrupt(t, "flipped bit", bad)
	}
}

func TestReadSegmentOversized(t *testing.T) {
	seg := appendSegmentHeader(nil, "node-a", 3, 1, time.UnixMilli(0))
	huge := binary.AppendUvarint(append([]byte(nil), seg...), MaxRecordBytes+1)
	huge = append(huge, make([]byte, 4+64)...)
	expectCorrupt(t, "oversized length", huge)
	overflow := append(append([]byte(nil), seg...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)
	expectCorrupt(t, "varint overflow", overflow)
	trailing := append(buildSegment(threeEvents(), true), 1)
	expectCorrupt(t, "bytes after footer", trailing)
	expectCorrupt(t, "no footer", buildSegment(threeEvents(), false))
}

func TestReadSegmentRejectsUndecodablePayload(t *testing.T) {
	seg := appendSegmentHeader(nil, "node-a", 3, 1, time.UnixMilli(0))
	ev := sampleClick()
	seg = appendRecord(seg, AppendEvent(nil, &ev))
	seg = appendRecord(seg, []byte{9, 9, 9}) // good CRC, bad event
	seg = appendFooter(seg, 2)
	expectCorrupt(t, "undecodable payload", seg)
}

func TestReadSegmentStopsOnCallbackError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	_, err := ReadSegment(buildSegment(threeEvents(), true), func(*Event) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("got %v after %d events; want stop after 1", err, n)
	}
}

func FuzzReadSegment(f *testing.F) {
	f.Add(buildSegment(threeEvents(), true))
	f.Add(buildSegment(nil, true))
	f.Add(buildSegment(threeEvents(), false))
	f.Add(appendFooter(v1Header("node-a", 1, time.UnixMilli(0)), 0))
	f.Add([]byte("WMSG"))
	f.Add([]byte{})
	f.Add(segmentWithTallies())
	f.Add(appendFooter(appendPartHeader(nil, &SegmentHeader{NodeID: "node-a", Incarnation: 3, Seq: 7}, 5), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		delivered := 0
		_, err := ReadSegmentParts(b, func(_ []byte, ev *Event) error {
			delivered++
			if !ev.Kind.valid() {
				t.Fatalf("delivered an event of kind %d", ev.Kind)
			}
			return nil
		}, func(dt *DropTally) error {
			delivered++
			if dt.Count == 0 || (dt.Scope == ScopeUnknown) != (dt.Name == "") {
				t.Fatalf("delivered a bad tally %+v", *dt)
			}
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrCorruptSegment) {
				t.Fatalf("got %v; want ErrCorruptSegment", err)
			}
			if delivered != 0 {
				t.Fatalf("delivered %d events, then failed", delivered)
			}
			return
		}
		_, records, vErr := verifySealed(b)
		if vErr != nil || records != delivered {
			t.Fatalf("delivered %d of %d records (verify: %v)", delivered, records, vErr)
		}
	})
}

// BenchmarkSegmentCheck compares the shipper's pre-send check (every
// record decoded, as ReadSegment does) with the framing-only check it
// replaced, on a segment of 10,000 clicks and page events.
func BenchmarkSegmentCheck(b *testing.B) {
	events := make([]Event, 0, 10_000)
	for i := range 10_000 {
		ev := sampleClick()
		if i%2 == 1 {
			ev = sampleSiteEvent()
		}
		events = append(events, ev)
	}
	seg := buildSegment(events, true)
	b.Run("framing", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(seg)))
		for b.Loop() {
			if _, _, err := verifySealed(seg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(seg)))
		for b.Loop() {
			if _, _, _, err := checkSegment(seg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
