package ingest

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestEventRoundTrip(t *testing.T) {
	for _, ev := range []Event{sampleClick(), sampleSiteEvent(), {Kind: KindPageview}} {
		b := AppendEvent(nil, &ev)
		var got Event
		if err := DecodeEvent(b, &got); err != nil {
			t.Fatalf("DecodeEvent(%v): %v", ev.Kind, err)
		}
		if len(ev.Props) == 0 {
			got.Props = nil
		}
		if !reflect.DeepEqual(got, ev) {
			t.Errorf("round trip of %v: got %+v; want %+v", ev.Kind, got, ev)
		}
	}
}

func TestDecodeEventReusesProps(t *testing.T) {
	ev := sampleSiteEvent()
	b := AppendEvent(nil, &ev)
	var got Event
	for range 2 {
		if err := DecodeEvent(b, &got); err != nil {
			t.Fatal(err)
		}
	}
	if len(got.Props) != 2 {
		t.Fatalf("got %d props; want 2", len(got.Props))
	}
}

func TestDecodeEventRejects(t *testing.T) {
	good := sampleSiteEvent()
	valid := AppendEvent(nil, &good)
	mutate := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), valid...))
	}
	long := Event{Kind: KindCustom, Name: strings.Repeat("x", MaxNameLen+1)}
	many := Event{Kind: KindCustom}
	for range MaxProps + 1 {
		many.Props = append(many.Props, Prop{"k", "v"})
	}
	deep := Event{Kind: KindEngagement, ScrollDepth: 101}
	cases := map[string][]byte{
		"empty":          nil,
		"version":        mutate(func(b []byte) []byte { b[0] = 9; return b }),
		"kind":           mutate(func(b []byte) []byte { b[1] = 0; return b }),
		"flags":          mutate(func(b []byte) []byte { b[2] = 0x80; return b }),
		"trailing":       append(append([]byte(nil), valid...), 0),
		"long name":      AppendEvent(nil, &long),
		"too many props": AppendEvent(nil, &many),
		"scroll depth":   AppendEvent(nil, &deep),
	}
	for i := 1; i < len(valid); i++ {
		cases["truncated/"+string(rune('a'+i%26))+strings.Repeat("'", i/26)] = valid[:i]
	}
	for name, b := range cases {
		var ev Event
		err := DecodeEvent(b, &ev)
		if !errors.Is(err, ErrCorruptEvent) {
			t.Errorf("%s: got %v; want ErrCorruptEvent", name, err)
		}
	}
}

func TestAppendEventAllocatesNothing(t *testing.T) {
	ev := sampleSiteEvent()
	buf := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(100, func() { buf = AppendEvent(buf[:0], &ev) })
	if allocs != 0 {
		t.Fatalf("got %v allocs per AppendEvent; want 0", allocs)
	}
}

func FuzzDecodeEvent(f *testing.F) {
	for _, ev := range []Event{sampleClick(), sampleSiteEvent(), {Kind: KindPageview}} {
		f.Add(AppendEvent(nil, &ev))
	}
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0})
	f.Add([]byte{1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var ev, check Event
		err := DecodeEvent(b, &ev)
		if vErr := decodeEvent(b, &check, true); (err == nil) != (vErr == nil) {
			t.Fatalf("validate-only disagrees: full %v, validate %v", err, vErr)
		}
		if err != nil {
			if !errors.Is(err, ErrCorruptEvent) {
				t.Fatalf("got %v; want an ErrCorruptEvent", err)
			}
			return
		}
		again := AppendEvent(nil, &ev)
		var ev2 Event
		if err := DecodeEvent(again, &ev2); err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		if len(ev.Props) == 0 {
			ev.Props, ev2.Props = nil, nil
		}
		if !reflect.DeepEqual(ev, ev2) {
			t.Fatalf("re-encode changed the event: %+v vs %+v", ev, ev2)
		}
	})
}

func BenchmarkAppendEvent(b *testing.B) {
	ev := sampleSiteEvent()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendEvent(buf[:0], &ev)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodeEvent(b *testing.B) {
	ev := sampleSiteEvent()
	buf := AppendEvent(nil, &ev)
	var out Event
	b.ReportAllocs()
	for b.Loop() {
		if err := DecodeEvent(buf, &out); err != nil {
			b.Fatal(err)
		}
	}
}
