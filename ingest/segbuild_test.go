package ingest

import (
	"errors"
	"testing"
	"time"
)

func TestBuildSegmentReadsBack(t *testing.T) {
	events := threeEvents()
	created := time.UnixMilli(1_780_000_123_456).UTC()
	seg := BuildSegment(SegmentRef{Node: "bench-node", Inc: 7, Seq: 42}, created, events)

	var got []Event
	h, err := ReadSegment(seg, func(ev *Event) error {
		e := *ev
		e.Props = append([]Prop(nil), ev.Props...)
		got = append(got, e)
		return nil
	})
	if err != nil {
		t.Fatalf("ReadSegment: %v", err)
	}
	if h.NodeID != "bench-node" || h.Seq != 42 || !h.Created.Equal(created) {
		t.Errorf("got header %+v; want bench-node/42 created %v", h, created)
	}
	if len(got) != len(events) {
		t.Fatalf("got %d events; want %d", len(got), len(events))
	}
	for i := range events {
		want, have := AppendEvent(nil, &events[i]), AppendEvent(nil, &got[i])
		if string(want) != string(have) {
			t.Errorf("event %d: read back %+v; want %+v", i, got[i], events[i])
		}
	}
	// The shipper's own framing check takes it as sealed too.
	if _, n, err := verifySealed(seg); err != nil || n != len(events) {
		t.Errorf("verifySealed: %d records, %v; want %d, nil", n, err, len(events))
	}
}

func TestBuildSegmentEmpty(t *testing.T) {
	n := 0
	if _, err := ReadSegment(BuildSegment(SegmentRef{Node: "n", Inc: 1, Seq: 1}, time.Unix(0, 0), nil), func(*Event) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("got %d events, err %v; want 0, nil", n, err)
	}
}

func TestBuildSegmentDamageIsCaught(t *testing.T) {
	seg := BuildSegment(SegmentRef{Node: "n", Inc: 1, Seq: 1}, time.Unix(0, 0), threeEvents())
	seg[len(seg)/2] ^= 0x10
	if _, err := ReadSegment(seg, func(*Event) error { return nil }); !errors.Is(err, ErrCorruptSegment) {
		t.Fatalf("flipped bit: got %v; want ErrCorruptSegment", err)
	}
}
