package ingest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func clicksOf(t *testing.T, b []byte) ([]Event, error) {
	t.Helper()
	var out []Event
	err := ReadSegmentClicks(b, func(ev *Event) error {
		e := *ev
		e.Props = slices.Clone(e.Props)
		out = append(out, e)
		return nil
	})
	return out, err
}

// ReadSegmentClicks gives the clicks ReadSegmentParts gives, in order,
// skipping site events and drop tallies, and refuses damaged framing.
func TestReadSegmentClicks(t *testing.T) {
	evs := []Event{
		{Kind: KindClick, Time: 1000, Code: "k1", Node: "e1", Country: "EE"},
		{Kind: KindPageview, Name: "pageview", Time: 1001, SiteID: "s1", Path: "/", Node: "e1"},
		{Kind: KindClick, Time: 1002, Code: "go.example/k2", Node: "e1", Flags: FlagBot, Browser: "Firefox"},
		{Kind: KindCustom, Name: "signup", Time: 1003, SiteID: "s1", Path: "/", Node: "e1"},
	}
	for i := range evs {
		evs[i].ID[0] = byte(i + 1)
	}
	raw := BuildSegmentParts(SegmentRef{Node: "e1", Inc: 1, Seq: 1}, time.UnixMilli(1000), evs,
		[]DropTally{{Scope: ScopeLink, Name: "k1", Hour: 0, Count: 2}})
	got, err := clicksOf(t, raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Code != "k1" || got[0].Country != "EE" || got[0].ID != evs[0].ID ||
		got[1].Code != "go.example/k2" || !got[1].Bot() || got[1].Browser != "Firefox" {
		t.Fatalf("clicks %+v; want events 0 and 2", got)
	}
	// A flipped byte in a record, a cut before the footer.
	bad := slices.Clone(raw)
	bad[len(bad)-20] ^= 0xff
	if _, err := clicksOf(t, bad); !errors.Is(err, ErrCorruptSegment) {
		t.Errorf("damaged record: %v; want ErrCorruptSegment", err)
	}
	if _, err := clicksOf(t, raw[:len(raw)-12]); !errors.Is(err, ErrCorruptSegment) {
		t.Errorf("cut segment: %v; want ErrCorruptSegment", err)
	}
	stop := errors.New("stop")
	if err := ReadSegmentClicks(raw, func(*Event) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("callback error: %v; want it back", err)
	}
	var codes []string
	if err := ReadSegmentClickCodes(raw, func(code []byte, flags uint8) error {
		codes = append(codes, fmt.Sprintf("%s/%d", code, flags))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(codes) != "[k1/0 go.example/k2/1]" {
		t.Errorf("click codes %v; want [k1/0 go.example/k2/1]", codes)
	}
	if err := ReadSegmentClickCodes(bad, func([]byte, uint8) error { return nil }); !errors.Is(err, ErrCorruptSegment) {
		t.Errorf("click codes of a damaged record: %v; want ErrCorruptSegment", err)
	}
}

// Whatever the bytes, a segment ReadSegmentParts reads gives the same
// clicks through ReadSegmentClicks, and one that does not read gives
// ErrCorruptSegment or the clicks before the damage.
func FuzzReadSegmentClicks(f *testing.F) {
	f.Add(buildSegment(threeEvents(), true))
	f.Add(buildSegment(nil, true))
	f.Add(buildSegment(threeEvents(), false))
	f.Add(segmentWithTallies())
	f.Add([]byte("WMSG"))
	// A click that followed a redirect rule: a version 5 record.
	f.Add(BuildSegment(SegmentRef{Node: "e1", Inc: 1, Seq: 2}, time.UnixMilli(5), []Event{
		{Kind: KindClick, Time: 5, Code: "k9", Node: "e1", Flags: FlagRules | FlagBot, Rule: 1}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var want []Event
		_, werr := ReadSegmentRecords(b, func(_ []byte, ev *Event) error {
			if ev.Kind == KindClick {
				e := *ev
				e.Props = slices.Clone(e.Props)
				want = append(want, e)
			}
			return nil
		})
		got, err := clicksOf(t, b)
		var codes []string
		cerr := ReadSegmentClickCodes(b, func(code []byte, flags uint8) error {
			codes = append(codes, fmt.Sprintf("%q/%d", code, flags))
			return nil
		})
		if err != nil && !errors.Is(err, ErrCorruptSegment) {
			t.Fatalf("got %v; want nil or ErrCorruptSegment", err)
		}
		if werr != nil {
			return
		}
		if err != nil || len(got) != len(want) {
			t.Fatalf("ReadSegmentRecords reads %d clicks; ReadSegmentClicks %d, %v", len(want), len(got), err)
		}
		if cerr != nil || len(codes) != len(want) {
			t.Fatalf("ReadSegmentRecords reads %d clicks; ReadSegmentClickCodes %d, %v", len(want), len(codes), cerr)
		}
		for i := range got {
			if got[i].ID != want[i].ID || got[i].Code != want[i].Code || got[i].Time != want[i].Time {
				t.Fatalf("click %d: %+v; want %+v", i, got[i], want[i])
			}
			if c := fmt.Sprintf("%q/%d", want[i].Code, want[i].Flags); codes[i] != c {
				t.Fatalf("click %d's code and flags %s; want %s", i, codes[i], c)
			}
		}
	})
}
