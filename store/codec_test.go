package store

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"
)

var sampleLinks = []Link{
	{Redirect: 307}, // the zero Link has no valid redirect
	{Code: "aB3xY9q", URL: "https://example.com/a?b=c", Owner: "own_1", CreatedAt: 1_700_000_000_000, UpdatedAt: 1_700_000_000_500, Status: StatusActive, Redirect: 302, Index: 42},
	{Code: "my-alias", URL: "https://example.org/ü", Owner: "o", ExpiresAt: -1, ClickLimit: math.MaxInt64, Status: StatusLimited, Redirect: 308, Index: math.MaxUint64},
	{Code: "x", URL: string(bytes.Repeat([]byte("u"), 5000)), CreatedAt: math.MinInt64, Status: StatusReview, Redirect: 301},
	{Code: "edited1", URL: "https://example.net/new", Owner: "own_1", UpdatedAt: 9, Redirect: 302, Index: 7, ReviewUntil: 86_400_009}, // version 2
	{Code: "edited2", URL: "https://example.net/", Redirect: 307, ReviewUntil: math.MinInt64},
	{Code: "noq", URL: "https://example.net/?a=1", Redirect: 302, Index: 3, NoForwardQuery: true},
	{Code: "noq2", URL: "https://example.net/", Redirect: 301, Index: 4, NoForwardQuery: true, ReviewUntil: 86_400_001},
	{Code: "tagged", URL: "https://example.net/", Redirect: 302, Index: 5, Tags: "sms,spring"},
	{Code: "tagged2", URL: "https://example.net/", Redirect: 302, Index: 6, NoForwardQuery: true, ReviewUntil: 9, Tags: "a-b_c,q4"},
	{Code: "go.acme.com/launch", URL: "https://acme.example/", Owner: "o", Redirect: 302, Index: 5},
	{Code: "xn--bcher-kva.example/aB3xY9q", URL: "https://b.example/", Redirect: 307, NoForwardQuery: true, ReviewUntil: 9},
	{Code: "go.acme.com/t", URL: "https://acme.example/t", Redirect: 302, NoForwardQuery: true, ReviewUntil: 9, Tags: "sms"},
	{Code: "locked", URL: "https://a.example/", Redirect: 302, PasswordHash: samplePHC},                          // issue 13.2
	{Code: "ruled", URL: "https://example.net/", Redirect: 302, Index: 8, Rules: "\x01\x01\x01\x08http://a\x01"}, // rules alone
	{Code: "go.acme.com/r", URL: "https://acme.example/r", Redirect: 307, NoForwardQuery: true, ReviewUntil: 9, Tags: "sms", Rules: "\x01\x01\x01\x08http://a\x01"},
	{Code: "go.acme.com/all", URL: "https://a.example/", Redirect: 307, NoForwardQuery: true, ReviewUntil: 9, Tags: "sms", Rules: "\x01\x01\x01\x08http://a\x01", PasswordHash: samplePHC, Preview: "\x01T\x01D\x13https://i.example/x"}, // every option
}

var sampleOwners = []Owner{
	{},
	{ID: "own_1", Name: "Ada Lovelace", CreatedAt: 1_700_000_000_000},
	{ID: "o\x00x", Name: "\xff", CreatedAt: -5},
	{ID: "own_2", Name: "Spammer", CreatedAt: 1, Suspended: true, SuspendedAt: 1_700_000_000_000, SuspendReason: "phishing campaign"}, // version 2
	{ID: "own_3", Suspended: true},                                                                                                    // version 2, no reason
}

var sampleSites = []Site{
	{},
	{ID: "site_1", Domain: "example.com", Timezone: "Europe/Berlin", Owner: "own_1", CreatedAt: 1_700_000_000_000},
	{ID: "site_2", Domain: "a.example", Owner: "own_1", IgnoreDNT: true}, // version 2, settings only
	{ID: "site_3", Domain: "b.example", Timezone: "UTC", Owner: "own_2", CreatedAt: 5, Goals: []Goal{ // version 2 with goals
		{ID: "g1", EventName: "Signup", DisplayName: "Signup"},
		{ID: "g2", PagePath: "/blog/**", DisplayName: "Visit /blog/**"},
	}},
}

var sampleIdempotency = []Idempotency{
	{},
	{RequestHash: [32]byte{1, 2, 3, 31: 0xff}, Status: 201, Response: []byte(`{"code":"aB3xY9q"}`), CreatedAt: 1_700_000_000_000},
	{Status: 409, Response: []byte{}, CreatedAt: math.MaxInt64},
}

var sampleHistory = []HistoryEntry{
	{At: 1_700_000_000_000, Actor: "own_1", Action: ActionCreate, Changes: []FieldChange{{Field: "url", New: "https://example.com/"}}},
	{At: -1, Actor: ActorOperator, Action: ActionBlock, Reason: "phishing kit, ticket 42", Changes: []FieldChange{{Field: "status", Old: "active", New: "blocked"}}},
	{Actor: ActorOperator, Action: "report_dismissed", Reason: "ü"}, // no changes
}

// codecCase drives the generic checks over one record type.
type codecCase struct {
	name    string
	samples [][]byte
	decode  func([]byte) (any, error)
	encode  func(any) []byte
}

func codecCases() []codecCase {
	var links, owners, sites, idems, hist [][]byte
	for i := range sampleHistory {
		hist = append(hist, AppendHistory(nil, &sampleHistory[i]))
	}
	for i := range sampleLinks {
		links = append(links, AppendLink(nil, &sampleLinks[i]))
	}
	for i := range sampleOwners {
		owners = append(owners, AppendOwner(nil, &sampleOwners[i]))
	}
	for i := range sampleSites {
		sites = append(sites, AppendSite(nil, &sampleSites[i]))
	}
	for i := range sampleIdempotency {
		idems = append(idems, AppendIdempotency(nil, &sampleIdempotency[i]))
	}
	return []codecCase{
		{"link", links,
			func(b []byte) (any, error) { var v Link; err := DecodeLink(b, &v); return v, err },
			func(v any) []byte { l := v.(Link); return AppendLink(nil, &l) }},
		{"owner", owners,
			func(b []byte) (any, error) { var v Owner; err := DecodeOwner(b, &v); return v, err },
			func(v any) []byte { o := v.(Owner); return AppendOwner(nil, &o) }},
		{"site", sites,
			func(b []byte) (any, error) { var v Site; err := DecodeSite(b, &v); return v, err },
			func(v any) []byte { s := v.(Site); return AppendSite(nil, &s) }},
		{"history", hist,
			func(b []byte) (any, error) { var v HistoryEntry; err := DecodeHistory(b, &v); return v, err },
			func(v any) []byte { h := v.(HistoryEntry); return AppendHistory(nil, &h) }},
		{"idempotency", idems,
			func(b []byte) (any, error) { var v Idempotency; err := DecodeIdempotency(b, &v); return v, err },
			func(v any) []byte { r := v.(Idempotency); return AppendIdempotency(nil, &r) }},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for i := range sampleLinks {
		var got Link
		if err := DecodeLink(AppendLink(nil, &sampleLinks[i]), &got); err != nil || got != sampleLinks[i] {
			t.Errorf("link %d: decoded %+v, %v; want %+v", i, got, err, sampleLinks[i])
		}
	}
	for i := range sampleOwners {
		var got Owner
		if err := DecodeOwner(AppendOwner(nil, &sampleOwners[i]), &got); err != nil || got != sampleOwners[i] {
			t.Errorf("owner %d: decoded %+v, %v; want %+v", i, got, err, sampleOwners[i])
		}
	}
	for i := range sampleSites {
		var got Site
		if err := DecodeSite(AppendSite(nil, &sampleSites[i]), &got); err != nil || !reflect.DeepEqual(got, sampleSites[i]) {
			t.Errorf("site %d: decoded %+v, %v; want %+v", i, got, err, sampleSites[i])
		}
	}
	for i, want := range sampleIdempotency {
		var got Idempotency
		err := DecodeIdempotency(AppendIdempotency(nil, &want), &got)
		if err != nil || got.RequestHash != want.RequestHash || got.Status != want.Status ||
			!bytes.Equal(got.Response, want.Response) || got.CreatedAt != want.CreatedAt {
			t.Errorf("idempotency %d: decoded %+v, %v; want %+v", i, got, err, want)
		}
	}
}

func TestAppendRecordKeepsPrefix(t *testing.T) {
	prefix := []byte("prefix")
	b := AppendLink(bytes.Clone(prefix), &sampleLinks[1])
	if !bytes.HasPrefix(b, prefix) {
		t.Fatalf("AppendLink dropped the prefix: %q", b)
	}
	var l Link
	if err := DecodeLink(b[len(prefix):], &l); err != nil || l != sampleLinks[1] {
		t.Fatalf("DecodeLink after prefix = %+v, %v", l, err)
	}
}

// The decoded record must not alias the input, which Pebble reuses.
func TestDecodeIdempotencyCopiesResponse(t *testing.T) {
	b := AppendIdempotency(nil, &sampleIdempotency[1])
	var rec Idempotency
	if err := DecodeIdempotency(b, &rec); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if string(rec.Response) != string(sampleIdempotency[1].Response) {
		t.Fatalf("Response changed with the input buffer: %q", rec.Response)
	}
}

func TestDecodeRejectsDamagedRecords(t *testing.T) {
	for _, c := range codecCases() {
		for si, good := range c.samples {
			bad := map[string][]byte{
				"empty":            nil,
				"extended":         append(bytes.Clone(good), 0),
				"extended by 0x80": append(bytes.Clone(good), 0x80),
				"version+1":        append([]byte{good[0] + 1}, good[1:]...),
				"version 0":        append([]byte{0}, good[1:]...),
			}
			for n := 1; n < len(good); n++ {
				if _, err := c.decode(good[:n]); !errors.Is(err, ErrCorrupt) {
					t.Errorf("%s %d truncated to %d of %d bytes: %v; want ErrCorrupt", c.name, si, n, len(good), err)
				}
			}
			for what, b := range bad {
				if _, err := c.decode(b); !errors.Is(err, ErrCorrupt) {
					t.Errorf("%s %d %s: %v; want ErrCorrupt", c.name, si, what, err)
				}
			}
		}
	}
}

func TestDecodeLinkRejectsBadFields(t *testing.T) {
	for name, mut := range map[string]func(*Link){
		"status past the last": func(l *Link) { l.Status = statusCount },
		"status 255":           func(l *Link) { l.Status = 255 },
		"redirect 0":           func(l *Link) { l.Redirect = 0 },
		"redirect 200":         func(l *Link) { l.Redirect = 200 },
		"redirect 303":         func(l *Link) { l.Redirect = 303 },
	} {
		l := sampleLinks[1]
		mut(&l)
		var got Link
		if err := DecodeLink(AppendLink(nil, &l), &got); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v; want ErrCorrupt", name, err)
		}
	}
	// A redirect that only looks valid after truncation to 16 bits:
	// 302 + 65536 must not decode as 302.
	b := AppendLink(nil, &sampleLinks[1])
	good := appendUvarint(nil, 302)
	i := bytes.LastIndex(b, append(good, appendUvarint(nil, sampleLinks[1].Index)...))
	if i < 0 {
		t.Fatal("cannot find the redirect field")
	}
	forged := append(append(bytes.Clone(b[:i]), appendUvarint(nil, 302+1<<16)...), b[i+len(good):]...)
	var got Link
	if err := DecodeLink(forged, &got); !errors.Is(err, ErrCorrupt) {
		t.Errorf("redirect 302+65536 decoded as %d, %v; want ErrCorrupt", got.Redirect, err)
	}
}

// A varint written with more bytes than needed decodes to the same number
// but would re-encode differently; decoders accept only the shortest form so
// every record has exactly one encoding.
func TestDecodeRejectsOverlongVarints(t *testing.T) {
	o := Owner{ID: "a", Name: "b", CreatedAt: 0}
	good := AppendOwner(nil, &o)
	overlongLen := append([]byte{ownerVersion1, 0x81, 0x00}, good[2:]...) // ID length 1 as two bytes
	overlongInt := append(bytes.Clone(good[:len(good)-1]), 0x80, 0x00)    // CreatedAt 0 as two bytes
	for name, b := range map[string][]byte{"length": overlongLen, "integer": overlongInt} {
		var got Owner
		if err := DecodeOwner(b, &got); !errors.Is(err, ErrCorrupt) {
			t.Errorf("overlong %s %x decoded as %+v, %v; want ErrCorrupt", name, b, got, err)
		}
	}
}

func TestStatusNames(t *testing.T) {
	for s := Status(0); s < statusCount; s++ {
		got, ok := ParseStatus(s.String())
		if !ok || got != s {
			t.Errorf("ParseStatus(%q) = %v, %v; want %v", s.String(), got, ok, s)
		}
	}
	if _, ok := ParseStatus("gone"); ok {
		t.Errorf("ParseStatus(gone) ok; want false")
	}
	if got := Status(9).String(); got != "status(9)" {
		t.Errorf("Status(9).String() = %q", got)
	}
}

// fuzzDecode checks one decoder: never panic, and a record that decodes
// re-encodes to exactly the input bytes.
func fuzzDecode(f *testing.F, c codecCase) {
	for _, s := range c.samples {
		f.Add(s)
		f.Add(s[:len(s)/2])
		f.Add(append(bytes.Clone(s), 1))
	}
	f.Add([]byte{})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := c.decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode %x: %v; want ErrCorrupt", b, err)
			}
			return
		}
		if again := c.encode(v); !bytes.Equal(again, b) {
			t.Fatalf("decode %x = %+v re-encodes as %x", b, v, again)
		}
		v2, err := c.decode(c.encode(v))
		if err != nil || !reflect.DeepEqual(v, v2) {
			t.Fatalf("second decode = %+v, %v; want %+v", v2, err, v)
		}
	})
}

func caseNamed(name string) codecCase {
	for _, c := range codecCases() {
		if c.name == name {
			return c
		}
	}
	panic("BUG: no codec case " + name)
}

func FuzzDecodeLink(f *testing.F)        { fuzzDecode(f, caseNamed("link")) }
func FuzzDecodeHistory(f *testing.F)     { fuzzDecode(f, caseNamed("history")) }
func FuzzDecodeOwner(f *testing.F)       { fuzzDecode(f, caseNamed("owner")) }
func FuzzDecodeSite(f *testing.F)        { fuzzDecode(f, caseNamed("site")) }
func FuzzDecodeIdempotency(f *testing.F) { fuzzDecode(f, caseNamed("idempotency")) }

// TestLinkOptionsEncoding checks version 3 against bytes written out by
// hand, that a link without options keeps its version 1 bytes, and that
// version 3 refuses what it cannot mean.
func TestLinkOptionsEncoding(t *testing.T) {
	l := Link{Code: "ab", URL: "u", Owner: "o", Status: StatusActive, Redirect: 302, Index: 5, NoForwardQuery: true}
	want := []byte{3, 2, 'a', 'b', 1, 'u', 1, 'o', 0, 0, 0, 0, 0, 0xae, 0x02, 5, linkOptNoForwardQuery}
	if got := AppendLink(nil, &l); !bytes.Equal(got, want) {
		t.Fatalf("version 3: got %x; want %x", got, want)
	}
	l.NoForwardQuery = false
	if got := AppendLink(nil, &l); got[0] != linkVersion || len(got) != len(want)-1 {
		t.Fatalf("without options: got %x; want version 1, one byte shorter", got)
	}
	for name, b := range map[string][]byte{
		"no option set":  {3, 2, 'a', 'b', 1, 'u', 1, 'o', 0, 0, 0, 0, 0, 0xae, 0x02, 5, 0},
		"unknown option": {3, 2, 'a', 'b', 1, 'u', 1, 'o', 0, 0, 0, 0, 0, 0xae, 0x02, 5, linkOptNoForwardQuery | 0x80},
		"window missing": {3, 2, 'a', 'b', 1, 'u', 1, 'o', 0, 0, 0, 0, 0, 0xae, 0x02, 5, linkOptNoForwardQuery | linkOptReview},
	} {
		var got Link
		if err := DecodeLink(b, &got); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v; want ErrCorrupt", name, err)
		}
	}
}
