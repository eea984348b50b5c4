package ingest

import (
	"encoding/binary"
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
	for _, ev := range []Event{sampleClick(), sampleSiteEvent(), {Kind: KindPageview}, ruledClick()} {
		f.Add(AppendEvent(nil, &ev))
	}
	for _, version := range []byte{eventVersion1, eventVersion2, eventVersion3} {
		ev := sampleSiteEvent()
		ev.PrevVisitorHash = 77
		f.Add(appendLegacyEvent(nil, &ev, version, 1_780_000_000_000, 1280))
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

// appendLegacyEvent encodes ev in version 1, 2 or 3, as binaries before
// version 4 wrote them: 1 and 2 with a client time and a screen width, all
// three without the last four strings (subdivision, city, versions).
func appendLegacyEvent(dst []byte, ev *Event, version byte, clientTime int64, width uint32) []byte {
	dst = append(dst, version, byte(ev.Kind), ev.Flags)
	dst = append(dst, ev.ID[:]...)
	dst = binary.AppendVarint(dst, ev.Time)
	if version <= eventVersion2 {
		dst = binary.AppendVarint(dst, clientTime)
	}
	dst = binary.LittleEndian.AppendUint64(dst, ev.VisitorHash)
	switch {
	case version == eventVersion2:
		dst = binary.LittleEndian.AppendUint64(dst, ev.PrevVisitorHash)
	case version == eventVersion3 && ev.PrevVisitorHash != 0:
		dst = append(dst, 1)
		dst = binary.LittleEndian.AppendUint64(dst, ev.PrevVisitorHash)
	case version == eventVersion3:
		dst = append(dst, 0)
	}
	fields := eventStrings(ev)
	for _, s := range fields[:stringsV3] {
		dst = appendString(dst, *s)
	}
	if version <= eventVersion2 {
		dst = binary.AppendUvarint(dst, uint64(width))
	}
	dst = binary.AppendUvarint(dst, ev.EngagedMS)
	dst = append(dst, ev.ScrollDepth)
	dst = binary.AppendUvarint(dst, uint64(len(ev.Props)))
	for _, p := range ev.Props {
		dst = appendString(dst, p.Key)
		dst = appendString(dst, p.Value)
	}
	return dst
}

// TestDecodeEventOldVersions: versions 1 and 2 carry the client clock and
// the screen width; both are read past and dropped. Versions 1 to 3 have
// no subdivision, city or versions: those decode empty, everything else is
// kept.
func TestDecodeEventOldVersions(t *testing.T) {
	ev := sampleSiteEvent()
	for _, version := range []byte{eventVersion1, eventVersion2, eventVersion3} {
		in := ev
		if version >= eventVersion2 {
			in.PrevVisitorHash = 77
		}
		b := appendLegacyEvent(nil, &in, version, 1_780_000_000_000, 1280)
		var got Event
		if err := DecodeEvent(b, &got); err != nil {
			t.Fatalf("version %d: %v", version, err)
		}
		want := in
		want.Subdivision, want.City, want.BrowserVersion, want.OSVersion = "", "", "", ""
		if !reflect.DeepEqual(got, want) {
			t.Errorf("version %d: got %+v; want %+v", version, got, want)
		}
		if version == eventVersion3 {
			continue
		}
		if again := AppendEvent(nil, &got); again[0] != eventVersion4 || len(again) >= len(b) {
			t.Errorf("version %d re-encoded: got version %d, %d bytes; want version 4, shorter than %d", version, again[0], len(again), len(b))
		}
	}
}

// TestCheckEventMatchesDecoder: CheckEvent refuses exactly what the
// decoder would refuse, field by field.
func TestCheckEventMatchesDecoder(t *testing.T) {
	type mut struct {
		name string
		f    func(*Event)
	}
	muts := []mut{
		{"kind 0", func(e *Event) { e.Kind = 0 }},
		{"kind 5", func(e *Event) { e.Kind = 5 }},
		{"flags", func(e *Event) { e.Flags = 0x80 }},
		{"engaged", func(e *Event) { e.EngagedMS = maxEngagedMS + 1 }},
		{"scroll", func(e *Event) { e.ScrollDepth = maxScrollDepth + 1 }},
		{"props", func(e *Event) { e.Props = make([]Prop, MaxProps+1) }},
		{"prop key", func(e *Event) { e.Props = []Prop{{strings.Repeat("k", MaxPropKeyLen+1), "v"}} }},
		{"prop value", func(e *Event) { e.Props = []Prop{{"k", strings.Repeat("v", MaxPropValLen+1)}} }},
	}
	for i, limit := range stringLimits {
		muts = append(muts, mut{stringNames[i], func(e *Event) { *eventStrings(e)[i] = strings.Repeat("x", limit+1) }})
	}
	for _, m := range muts {
		ev := sampleSiteEvent()
		m.f(&ev)
		var back Event
		decErr := DecodeEvent(AppendEvent(nil, &ev), &back)
		if CheckEvent(&ev) == nil || decErr == nil {
			t.Errorf("%s: CheckEvent %v, DecodeEvent %v; want both to refuse", m.name, CheckEvent(&ev), decErr)
		}
	}
	ev := sampleSiteEvent()
	for i, limit := range stringLimits {
		*eventStrings(&ev)[i] = strings.Repeat("x", limit)
	}
	ev.EngagedMS, ev.ScrollDepth = maxEngagedMS, maxScrollDepth
	var back Event
	if err := CheckEvent(&ev); err != nil {
		t.Errorf("every field at its limit: CheckEvent %v; want nil", err)
	}
	if err := DecodeEvent(AppendEvent(nil, &ev), &back); err != nil {
		t.Errorf("every field at its limit: DecodeEvent %v; want nil", err)
	}
}
