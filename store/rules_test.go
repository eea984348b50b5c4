package store

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleRules() []Rule {
	return []Rule{
		{URL: "https://apps.apple.com/app/1", Devices: RuleDeviceIOS},
		{URL: "https://example.de/", Countries: []string{"DE", "AT"}},
		{URL: "https://example.fr/", Languages: []string{"fr"}, OS: []string{"Windows"}, Browsers: []string{"Chrome", "Edge"}},
		{URL: "https://example.com/qr", Query: []RuleQuery{{Key: "ref", Values: []string{"qr"}}, {Key: "n", Values: []string{"", "2"}}}},
		{URL: "https://example.com/sale", After: 1_900_000_000_000, Before: 1_900_000_360_000},
	}
}

func TestRulesRoundTrip(t *testing.T) {
	in := sampleRules()
	enc, err := EncodeRules(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeRules(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("got %+v; want %+v", out, in)
	}
	if e, _ := EncodeRules(nil); e != "" {
		t.Fatalf("no rules encode as %q; want \"\"", e)
	}
}

// The first bytes of the encoding, worked out by hand from the layout in
// rules.go: version 1, one rule, the device bit, the URL, the device byte.
func TestRulesEncodingByHand(t *testing.T) {
	enc, err := EncodeRules([]Rule{{URL: "http://a", Devices: RuleDeviceAndroid | RuleDeviceTablet}})
	if err != nil {
		t.Fatal(err)
	}
	want := "\x01\x01\x01\x08http://a\x12"
	if enc != want {
		t.Fatalf("got %q; want %q", enc, want)
	}
}

func TestRulesRefused(t *testing.T) {
	many := make([]Rule, MaxRules+1)
	for i := range many {
		many[i] = Rule{URL: "https://a.example/", Devices: RuleDeviceIOS}
	}
	for name, c := range map[string]struct {
		rules []Rule
		want  string
	}{
		"too many":     {many, "at most 20"},
		"no condition": {[]Rule{{URL: "https://a.example/"}}, "rules[0].if: no condition"},
		"no url":       {[]Rule{{Devices: RuleDeviceIOS}}, "rules[0].url"},
		"ftp url":      {[]Rule{{URL: "ftp://a", Devices: RuleDeviceIOS}}, "rules[0].url"},
		"country":      {[]Rule{{URL: "https://a", Devices: 1}, {URL: "https://a", Countries: []string{"de"}}}, `rules[1].if.country: "de"`},
		"language":     {[]Rule{{URL: "https://a", Languages: []string{"f"}}}, "if.language"},
		"device bits":  {[]Rule{{URL: "https://a", Devices: 1 << 7}}, "if.device"},
		"window":       {[]Rule{{URL: "https://a", After: 5, Before: 5}}, `"after" must be earlier`},
		"query twice":  {[]Rule{{URL: "https://a", Query: []RuleQuery{{"a", []string{"1"}}, {"a", []string{"2"}}}}}, "named twice"},
		"query empty":  {[]Rule{{URL: "https://a", Query: []RuleQuery{{"a", nil}}}}, "if.query.a"},
	} {
		_, err := EncodeRules(c.rules)
		if !errors.Is(err, ErrInvalidRules) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v; want ErrInvalidRules with %q", name, err, c.want)
		}
	}
}

func TestDecodeRulesRefusesNonCanonical(t *testing.T) {
	good, _ := EncodeRules([]Rule{{URL: "http://a", Devices: RuleDeviceIOS}})
	for name, b := range map[string]string{
		"version 2":       "\x02" + good[1:],
		"zero rules":      "\x01\x00",
		"21 rules":        "\x01\x15",
		"no conditions":   "\x01\x01\x00\x08http://a",
		"device 0":        "\x01\x01\x01\x08http://a\x00",
		"trailing":        good + "x",
		"truncated":       good[:len(good)-1],
		"overlong count":  "\x01\x81\x00\x01\x08http://a\x01",
		"empty os list":   "\x01\x01\x02\x08http://a\x00",
		"after 0":         "\x01\x01\x40\x08http://a\x00",
		"lower country":   "\x01\x01\x08\x08http://a\x01de",
		"huge url length": "\x01\x01\x01\xff\xff\x03",
	} {
		if _, err := DecodeRules(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v; want ErrCorrupt", name, err)
		}
	}
}

func TestLinkWithRulesRecord(t *testing.T) {
	enc, err := EncodeRules(sampleRules())
	if err != nil {
		t.Fatal(err)
	}
	l := Link{Code: "abc", URL: "https://example.com/", Owner: "o1", Status: StatusActive, Redirect: 302, Rules: enc, Tags: "a"}
	b := AppendLink(nil, &l)
	if b[0] != linkVersionOptions {
		t.Fatalf("version %d; want %d", b[0], linkVersionOptions)
	}
	var got Link
	if err := DecodeLink(b, &got); err != nil {
		t.Fatal(err)
	}
	if got != l {
		t.Fatalf("got %+v; want %+v", got, l)
	}
	// A record whose rules do not decode is corrupt, not a link without.
	bad := l
	bad.Rules = "\x01\x00"
	if err := DecodeLink(AppendLink(nil, &bad), &got); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad rules: got %v; want ErrCorrupt", err)
	}
	if err := checkLink(&bad); err == nil {
		t.Fatal("checkLink accepted bad rules")
	}
}

func FuzzDecodeRules(f *testing.F) {
	enc, _ := EncodeRules(sampleRules())
	f.Add(enc)
	one, _ := EncodeRules([]Rule{{URL: "http://a", Devices: RuleDeviceIOS}})
	f.Add(one)
	f.Add("\x01\x01\x20\x08http://a\x01\x03ref\x01\x02qr")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		rules, err := DecodeRules(s)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// One rule set, one encoding.
		again, err := EncodeRules(rules)
		if err != nil || again != s {
			t.Fatalf("decoded %+v re-encodes as %q, %v; want %q", rules, again, err, s)
		}
	})
}
