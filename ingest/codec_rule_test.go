package ingest

import (
	"errors"
	"reflect"
	"testing"
)

// ruledClick is a click on a link with redirect rules that followed the
// third rule.
func ruledClick() Event {
	ev := sampleClick()
	ev.Flags |= FlagRules
	ev.Rule = 3
	return ev
}

func TestEventWithRuleRoundTrip(t *testing.T) {
	plain := sampleClick()
	for _, rule := range []uint8{0, 1, 3, 20} {
		ev := ruledClick()
		ev.Rule = rule
		b := AppendEvent(nil, &ev)
		// Version 5 is version 4 and one byte, the rule, at the end.
		v4 := AppendEvent(nil, &plain)
		if b[0] != eventVersion5 || len(b) != len(v4)+1 || b[len(b)-1] != rule || string(b[3:len(b)-1]) != string(v4[3:]) {
			t.Fatalf("rule %d: version %d, %d bytes (version 4: %d); want version 5, one byte more, ending in the rule", rule, b[0], len(b), len(v4))
		}
		var got Event
		if err := DecodeEvent(b, &got); err != nil {
			t.Fatalf("rule %d: %v", rule, err)
		}
		if !reflect.DeepEqual(got, ev) {
			t.Fatalf("rule %d: got %+v; want %+v", rule, got, ev)
		}
	}
	// Events without the flag keep version 4, byte for byte.
	if b := AppendEvent(nil, &plain); b[0] != eventVersion4 {
		t.Fatalf("a click without rules: version %d; want 4", b[0])
	}
}

func TestDecodeEventRuleRejects(t *testing.T) {
	ev := ruledClick()
	v5 := AppendEvent(nil, &ev)
	plain := sampleClick()
	v4 := AppendEvent(nil, &plain)
	site := sampleSiteEvent()
	site.Flags |= FlagRules
	tooHigh := ruledClick()
	tooHigh.Rule = 21
	cases := map[string][]byte{
		"version 5 without the flag": func() []byte { b := append([]byte(nil), v5...); b[2] &^= FlagRules; return b }(),
		"version 4 with the flag":    func() []byte { b := append([]byte(nil), v4...); b[2] |= FlagRules; return b }(),
		"version 5 without the rule": v5[:len(v5)-1],
		"rule 21":                    AppendEvent(nil, &tooHigh),
		"rule on a site event":       AppendEvent(nil, &site),
	}
	for name, b := range cases {
		var got Event
		if err := DecodeEvent(b, &got); !errors.Is(err, ErrCorruptEvent) {
			t.Errorf("%s: got %v; want ErrCorruptEvent", name, err)
		}
	}
	for name, e := range map[string]Event{"rule 21": tooHigh, "site event": site, "rule without flag": func() Event { x := sampleClick(); x.Rule = 2; return x }()} {
		if CheckEvent(&e) == nil {
			t.Errorf("CheckEvent accepted %s", name)
		}
	}
	if err := CheckEvent(&ev); err != nil {
		t.Errorf("CheckEvent(a click with a rule): %v", err)
	}
}
