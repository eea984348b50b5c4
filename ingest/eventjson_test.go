package ingest

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// parseBody runs the real reader and returns a copy of its result.
func parseBody(body string) (parsedEvent, *badRequest) {
	ep := getEventParser()
	defer ep.release()
	in, bad := ep.parse([]byte(body))
	if bad != nil {
		return parsedEvent{}, bad
	}
	return flatten(in), nil
}

func FuzzEventJSON(f *testing.F) {
	for _, s := range eventJSONSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gotBad := parseBody(string(body))
		want, wantBad := refParseEventJSON(body)
		switch {
		case (gotBad == nil) != (wantBad == nil):
			t.Fatalf("body %q: reader says %v, reference says %v", body, gotBad, wantBad)
		case gotBad != nil:
			if gotBad.field != wantBad.field {
				t.Fatalf("body %q: reader refuses %q, reference %q", body, gotBad, wantBad)
			}
			return
		case !got.equal(want):
			t.Fatalf("body %q:\nreader    %+v\nreference %+v", body, got, want)
		}
		// What the endpoint accepts, the writer can write and the
		// aggregator decode.
		ev := Event{Kind: got.kind, Flags: got.flags, Name: got.name, SiteID: "s", Node: "n", Path: got.path,
			ReferrerHost: got.refHost, Props: got.props, EngagedMS: got.engagedMS, ScrollDepth: got.scrollDepth,
			UTMSource: got.utm[0], UTMMedium: got.utm[1], UTMCampaign: got.utm[2], UTMTerm: got.utm[3], UTMContent: got.utm[4]}
		if err := CheckEvent(&ev); err != nil {
			t.Fatalf("body %q: an accepted event fails CheckEvent: %v", body, err)
		}
		var back Event
		if err := DecodeEvent(AppendEvent(nil, &ev), &back); err != nil {
			t.Fatalf("body %q: an accepted event does not round-trip: %v", body, err)
		}
	})
}

var eventJSONSeeds = []string{
	`{"n":"pageview","u":"https://a.example/x?utm_source=s#h","d":"a.example,b.example","r":"https://ref.example/p","w":1024}`,
	`{"name":"signup","url":"https://a.example/","props":"{\"k\":1}","h":true,"i":"false"}`,
	`{"n":"engagement","u":"https://a.example/","e":"12","sd":250}`,
	`{"n":"engagement","u":"https://a.example/","d":"a.example","e":"NaN","sd":10}`,
	`{"n":"pageview","u":"https://a.example/","w":"Infinity"}`,
	`{"n":"pageview","u":"https://a.example/","h":1e999}`,
	`{"n":null,"u":1}`,
	`{"n":"x","n":null,"u":"https://a.example/"}`,
	`{"n":1,"n":"x","u":"https://a.example/"}`,
	`{"N":"pageview","u":"https://a.example/"}`,
	`{"\u006e":"pageview","u":"https://a.example/p%C3%A9?utm_campaign=a+b%21&utm_campaign=2"}`,
	`{"n":"p\u00e9 \ud83d\ude00 \ud800 x","u":"https://WWW.A.example:8443/a%2Fb"}`,
	`{"n":"x","u":"https://a.example/","p":{"b":"2","a":true,"c":null,"d":[1],"e":{},"f":1.5e3,"a":"last"}}`,
	`{"n":"x","u":"https://a.example/","m":"{\"k\":\"v\"}","meta":{"z":"y"}}`,
	`{"n":"x","u":"https://a.example/","t":1780000000000,"v":"3","unknown":[{"deep":[null,true,false]}]}`,
	`{"n":"x","u":"https://user@a.example/","d":" WWW.A.Example. "}`,
	`{"n":"x","u":"https://[::1]:80/p","d":"a.example"}`,
	`{"n":"x","u":"http://a.example/ space?utm_source=%zz&utm_source=ok"}`,
	`{"n":"x","u":"https://a.example/p;x?utm_medium=a;b&utm_term=t#frag","h":"1"}`,
	`{"n":"x","u":"ftp://a.example/","r":"https://ÄRGER.example/"}`,
	`{"n":"x","u":"https:/no-host","d":"a.example"}`,
	`{"n":"x","u":"https://a.example"}  `,
	`{"n":"x","u":"https://a.example"} x`,
	`{"n":"x",}`,
	`[{"n":"x"}]`,
	`null`,
	`"str"`,
	`{}`,
	`nope`,
	`{"n":"x","u":"https://a.example/","x":` + strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth) + `}`,
	`{"n":"x","u":"https://a.example/","x":` + strings.Repeat("[", maxJSONDepth-1) + strings.Repeat("]", maxJSONDepth-1) + `}`,
}

// TestEventJSONFields checks each field of the body against values worked
// out by hand from the documented rules.
func TestEventJSONFields(t *testing.T) {
	const u = `"u":"https://a.example/docs"`
	base := parsedEvent{name: "pageview", kind: KindPageview, domains: []string{"a.example"}, host: "a.example", path: "/docs"}
	with := func(f func(*parsedEvent)) parsedEvent {
		p := base
		f(&p)
		return p
	}
	for _, tc := range []struct {
		name, body string
		want       parsedEvent
	}{
		{"short keys", `{"n":"pageview",` + u + `}`, base},
		{"long keys", `{"name":"pageview","url":"https://a.example/docs","domain":"a.example"}`, base},
		{"short key wins", `{"name":"signup","n":"pageview",` + u + `}`, base},
		{"last occurrence wins", `{"n":"signup","n":"pageview",` + u + `}`, base},
		{"null is absent", `{"n":null,"name":"pageview",` + u + `}`, base},
		{"name trimmed", `{"n":"  pageview\t",` + u + `}`, base},
		{"custom event", `{"n":"Signup",` + u + `}`, with(func(p *parsedEvent) { p.name, p.kind = "Signup", KindCustom })},
		{"escaped key and name", `{"\u006e":"p\u00e9\ud83d\ude00",` + u + `}`, with(func(p *parsedEvent) { p.name, p.kind = "pé😀", KindCustom })},
		{"lone surrogate", `{"n":"a\ud800b",` + u + `}`, with(func(p *parsedEvent) { p.name, p.kind = "a\uFFFDb", KindCustom })},
		{"escapes", `{"n":"\"\\\/\b\f\n\r\t",` + u + `}`, with(func(p *parsedEvent) { p.name, p.kind = "\"\\/\b", KindCustom })}, // trailing white space trimmed
		{"invalid utf-8", "{\"n\":\"a\xffb\"," + u + "}", with(func(p *parsedEvent) { p.name, p.kind = "a\uFFFDb", KindCustom })},
		{"domain list", `{"n":"pageview",` + u + `,"d":" WWW.A.example, b.example ,a.example,,"}`,
			with(func(p *parsedEvent) { p.domains = []string{"a.example", "b.example"} })},
		{"host with port and www", `{"n":"pageview","u":"https://WWW.A.Example:8443/docs"}`, base},
		{"path decoded, query dropped", `{"n":"pageview","u":"https://a.example/d%C3%A9j%C3%A0?x=1#top"}`,
			with(func(p *parsedEvent) { p.path = "/déjà" })},
		{"no path", `{"n":"pageview","u":"https://a.example?utm_source=x"}`,
			with(func(p *parsedEvent) { p.path, p.utm[0] = "/", "x" })},
		{"hash mode", `{"n":"pageview","u":"https://a.example/docs#/b%20c","h":1}`, with(func(p *parsedEvent) { p.path = "/docs#/b c" })},
		{"hash mode, long key", `{"n":"pageview","u":"https://a.example/docs#x","hashMode":"1"}`, with(func(p *parsedEvent) { p.path = "/docs#x" })},
		{"utm values", `{"n":"pageview","u":"https://a.example/docs?utm_source=a+b&utm_medium=%2F&utm_campaign=c&utm_term=t&utm_content=x&utm_content=y&utm_source=z"}`,
			with(func(p *parsedEvent) { p.utm = [5]string{"a b", "/", "c", "t", "x"} })},
		{"utm pair with ; skipped", `{"n":"pageview","u":"https://a.example/docs?utm_source=a;b&utm_source=ok"}`,
			with(func(p *parsedEvent) { p.utm[0] = "ok" })},
		{"referrer host only", `{"n":"pageview",` + u + `,"r":"https://user:pw@WWW.Google.com:443/search?q=secret"}`,
			with(func(p *parsedEvent) { p.refHost = "google.com" })},
		{"internal referrer", `{"n":"pageview",` + u + `,"referrer":"https://a.example/home"}`, base},
		{"non-interactive", `{"n":"pageview",` + u + `,"i":false}`, with(func(p *parsedEvent) { p.flags = FlagNonInteractive })},
		{"non-interactive string", `{"n":"pageview",` + u + `,"interactive":" false "}`, with(func(p *parsedEvent) { p.flags = FlagNonInteractive })},
		{"interactive 1", `{"n":"pageview",` + u + `,"i":1}`, base},
		{"engagement", `{"n":"engagement",` + u + `,"e":"4200","sd":87.9}`,
			with(func(p *parsedEvent) {
				p.name, p.kind, p.engagedMS, p.scrollDepth = "engagement", KindEngagement, 4200, 87
			})},
		{"scroll depth clamped", `{"n":"engagement",` + u + `,"e":0,"sd":130}`,
			with(func(p *parsedEvent) { p.name, p.kind, p.scrollDepth = "engagement", KindEngagement, 100 })},
		{"width dropped", `{"n":"pageview",` + u + `,"w":1280,"screen_width":"991"}`, base},
		{"no width", `{"n":"pageview",` + u + `,"w":0}`, base},
		{"props object", `{"n":"pageview",` + u + `,"p":{"b":"2","a":true,"c":null,"d":[1],"e":{"x":1},"f":1.5e3,"g":"","":"x","a":"last"}}`,
			with(func(p *parsedEvent) { p.props = []Prop{{"a", "last"}, {"b", "2"}, {"f", "1.5e3"}} })},
		{"props string", `{"n":"pageview",` + u + `,"props":"{\"k\":\"v\",\"n\":5}"}`,
			with(func(p *parsedEvent) { p.props = []Prop{{"k", "v"}, {"n", "5"}} })},
		{"props: first set wins", `{"n":"pageview",` + u + `,"p":null,"m":{"m":"1"},"meta":{"x":"2"}}`,
			with(func(p *parsedEvent) { p.props = []Prop{{"m", "1"}} })},
		{"props not an object", `{"n":"pageview",` + u + `,"p":[1,2],"props":{"x":"y"}}`, base},
		{"props string not JSON", `{"n":"pageview",` + u + `,"p":"nope"}`, base},
		{"unknown keys skipped", `{"n":"pageview",` + u + `,"t":1780000000000,"v":3,"x":{"y":[null,true,"z"]}}`, base},
		{"top-level white space", " \t\r\n{\"n\":\"pageview\"," + u + "}\n ", base},
	} {
		got, bad := parseBody(tc.body)
		if bad != nil {
			t.Errorf("%s: got %v; want it accepted", tc.name, bad)
			continue
		}
		if !got.equal(tc.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestEventJSONRejects(t *testing.T) {
	const u = `"u":"https://a.example/"`
	for _, tc := range []struct{ body, field string }{
		{``, "request"},
		{`nope`, "request"},
		{`[1]`, "request"},
		{`"x"`, "request"},
		{`{"n":"x",` + u + `} trailing`, "request"},
		{`{"n":"x",` + u + `,}`, "request"},
		{`{"n":"x" ` + u + `}`, "request"},
		{`{"n":1,` + u + `}`, "request"},
		{`{"n":"x",` + u + `,"e":{}}`, "request"},
		{`{"n":"x",` + u + `,"w":"wide"}`, "request"},
		{`{"n":"x",` + u + `,"w":01}`, "request"},
		{`{"n":"x",` + u + `,"w":1e999}`, "request"},
		{"{\"n\":\"a\x01\"," + u + "}", "request"},
		{`{"n":"a\x",` + u + `}`, "request"},
		{`{"n":"x",` + u + `,"deep":` + strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth) + `}`, "request"},
		{`null`, "name"},
		{`{"n":"  ",` + u + `}`, "name"},
		{`{"n":"` + strings.Repeat("n", 121) + `",` + u + `}`, "name"},
		{`{"n":"x"}`, "url"},
		{`{"n":"x","u":"/relative","d":"a.example"}`, "url"},
		{`{"n":"x","u":"mailto:me@a.example","d":"a.example"}`, "url"},
		{`{"n":"x","u":"https://a.example/%zz"}`, "url"},
		{`{"n":"x","u":"https://a.example/#%zz"}`, "url"},
		{`{"n":"x","u":"https:/no-host"}`, "domain"},
		{`{"n":"x",` + u + `,"d":" , "}`, "domain"},
		{`{"n":"x",` + u + `,"d":"` + manyDomains(11) + `"}`, "domain"},
		{`{"n":"x",` + u + `,"r":"https://r.example/` + strings.Repeat("r", 2000) + `"}`, "referrer"},
		{`{"n":"x",` + u + `,"p":{"` + strings.Repeat("k", 301) + `":"v"}}`, "props"},
		{`{"n":"engagement",` + u + `,"e":5}`, "engagement"},
		{`{"n":"engagement",` + u + `,"e":-1,"sd":5}`, "e"},
		{`{"n":"engagement",` + u + `,"e":2592000000,"sd":5}`, "e"},
		// Every number must be finite (issue 9, A2).
		{`{"n":"engagement",` + u + `,"e":"NaN","sd":5}`, "e"},
		{`{"n":"engagement",` + u + `,"e":5,"sd":"-Inf"}`, "sd"},
		{`{"n":"x",` + u + `,"w":"Infinity"}`, "w"},
		{`{"n":"x",` + u + `,"screen_width":"nan"}`, "screen_width"},
		{`{"n":"x",` + u + `,"h":"+Inf"}`, "h"},
		{`{"n":"x",` + u + `,"hashMode":"NaN"}`, "hashMode"},
		{`{"n":"x",` + u + `,"i":"NaN"}`, "i"},
		{`{"n":"x",` + u + `,"interactive":"inf"}`, "interactive"},
	} {
		if _, bad := parseBody(tc.body); bad == nil || bad.field != tc.field {
			t.Errorf("%.80q: got %v; want a 400 about %q", tc.body, bad, tc.field)
		}
	}
}

func manyDomains(n int) string {
	d := make([]string, n)
	for i := range d {
		d[i] = fmt.Sprintf("s%d.example", i)
	}
	return strings.Join(d, ",")
}

func TestParsePageURLFastAgreesWithNetURL(t *testing.T) {
	for _, raw := range []string{
		"https://a.example/", "https://a.example", "https://A.Example.:80/x/y?utm_source=a&x#f",
		"http://a.example?", "http://a.example/?a?b", "https://a.example/p%2Fq%zz", "https://a.example/#%41",
		"HTTPS://www.a.example/", "ftp://a.example/x", "data:text/html,hi", "https:", "https:x", ":x",
		"1http://a.example/", "https:///p", "https://:80/p", "https://a.example:x/", "https://a:1:2/",
		"https://a.example/?utm_term=%41%42+c&utm_term=2&utm_content=%zz&utm_content=ok",
	} {
		for _, hash := range []bool{false, true} {
			var scratch []byte
			got, ok, handled := parsePageURLFast(raw, hash, &scratch)
			if !handled {
				continue
			}
			want, wantOK := parsePageURL(raw, hash)
			if ok != wantOK || (ok && got != want) {
				t.Errorf("%q hash %v: fast %+v %v; net/url %+v %v", raw, hash, got, ok, want, wantOK)
			}
		}
	}
}

func FuzzPageURL(f *testing.F) {
	f.Add("https://a.example/x?utm_source=s#h", true)
	f.Add("http://A.example:8080/%41?utm_medium=a+b", false)
	f.Fuzz(func(t *testing.T, raw string, hash bool) {
		var scratch []byte
		got, ok, handled := parsePageURLFast(raw, hash, &scratch)
		if !handled {
			return
		}
		want, wantOK := parsePageURL(raw, hash)
		if ok != wantOK || (ok && got != want) {
			t.Fatalf("%q hash %v: fast %+v %v; net/url %+v %v", raw, hash, got, ok, want, wantOK)
		}
	})
}

// TestEventJSONAllocatesNothing: the reader allocates nothing in the
// steady state, for a body with escapes and props too.
func TestEventJSONAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	for _, body := range []string{
		`{"n":"pageview","u":"https://a.example/docs/start?utm_source=tw","d":"a.example","r":"https://www.google.com/","w":1280}`,
		`{"n":"Sign\u0075p","u":"https://A.example/d%C3%A9?utm_campaign=x+y#h","h":1,"p":{"plan":"pro","seats":5,"b":true},"i":"false"}`,
		`{"n":"engagement","u":"https://a.example/","d":"a.example,b.example","e":"4200","sd":50,"props":"{\"k\":\"v\"}"}`,
	} {
		b := []byte(body)
		parse := func() {
			ep := getEventParser()
			if _, bad := ep.parse(b); bad != nil {
				t.Fatalf("%s: %v", body, bad)
			}
			ep.release()
		}
		parse()
		if allocs := testing.AllocsPerRun(200, parse); allocs != 0 {
			t.Errorf("%s: got %v allocs per parse; want 0", body, allocs)
		}
	}
}

// TestSmallIntMatchesParseFloat: the integer fast path gives exactly
// ParseFloat's value (sign of zero included) and declines the rest.
func TestSmallIntMatchesParseFloat(t *testing.T) {
	for _, s := range []string{"0", "-0", "7", "007", "1280", "-12", "999999999999999", "123456789012345"} {
		v, ok := smallInt(s)
		want, err := strconv.ParseFloat(s, 64)
		if !ok || err != nil || v != want || math.Signbit(v) != math.Signbit(want) {
			t.Errorf("smallInt(%q) = %v, %v; want %v", s, v, ok, want)
		}
	}
	for _, s := range []string{"", "-", "+5", "1.5", "1e3", "1234567890123456", "12a", " 1", "0x10", "inf", "--1"} {
		if _, ok := smallInt(s); ok {
			t.Errorf("smallInt(%q) took it; want ParseFloat to decide", s)
		}
	}
}

// TestPlainASCII8: every byte value at every position of a word of
// otherwise plain bytes, against the byte-by-byte rule.
func TestPlainASCII8(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	for pos := range 8 {
		for c := range 256 {
			for _, fill := range []byte{'a', ' ', '~', '!', '#', '[', ']'} {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				want := plain(byte(c))
				if got := plainASCII8(binary.LittleEndian.Uint64(w[:])); got != want {
					t.Fatalf("%q: got %v; want %v", w, got, want)
				}
			}
		}
	}
}
