package ingest

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
)

// TestEventHandlerRefusesNaN is issue 9 (A2): an engagement with "e":"NaN"
// was accepted with 202, encoded, and then made the aggregator refuse the
// whole segment. It must be a 400, and nothing may reach a segment.
func TestEventHandlerRefusesNaN(t *testing.T) {
	p, url := eventPipeline(t, nil)
	for _, body := range []string{
		`{"n":"engagement","u":"https://a.example/","d":"a.example","e":"NaN","sd":50}`,
		`{"n":"engagement","u":"https://a.example/","d":"a.example","e":10,"sd":"Infinity"}`,
		`{"n":"pageview","u":"https://a.example/","d":"a.example","w":"-Inf"}`,
	} {
		if r := postEvent(t, url, "text/plain", body, nil); r.status != http.StatusBadRequest {
			t.Errorf("%s: got %d %s; want 400", body, r.status, r.body)
		}
	}
	if got := len(closeAndRead(t, p)); got != 0 {
		t.Errorf("got %d events in segments; want none", got)
	}
	if p.Dropped(DropInvalid) != 3 {
		t.Errorf("got %d invalid drops; want 3", p.Dropped(DropInvalid))
	}
}

// TestWriterDropsUndecodableEvent: the writer's last guard counts an event
// the aggregator could not decode as invalid and never writes it.
func TestWriterDropsUndecodableEvent(t *testing.T) {
	p := openTestPipeline(t, nil)
	bad := p.pool.Get().(*pending)
	bad.ev = Event{Kind: KindCustom, SiteID: "s", Name: strings.Repeat("n", MaxNameLen+1)}
	p.enqueue(bad)
	good := p.pool.Get().(*pending)
	good.ev = Event{Kind: KindPageview, SiteID: "s", Name: "pageview", Path: "/"}
	p.enqueue(good)
	events := closeAndRead(t, p)
	if len(events) != 1 || events[0].Name != "pageview" {
		t.Fatalf("got %+v; want only the decodable event", events)
	}
	if p.Dropped(DropInvalid) != 1 {
		t.Errorf("got %d invalid drops; want 1", p.Dropped(DropInvalid))
	}
}

// TestOpenRefusesIDsOverCodecLimit: a node id or region the aggregator
// would refuse in every event is refused when the pipeline opens.
func TestOpenRefusesIDsOverCodecLimit(t *testing.T) {
	long := strings.Repeat("n", MaxShortLen+1)
	for _, c := range []Config{{Dir: t.TempDir(), NodeID: long}, {Dir: t.TempDir(), NodeID: "n", Region: long}} {
		if p, err := Open(c); err == nil {
			p.Close(t.Context())
			t.Errorf("Open with a %d-byte node id or region succeeded; want an error", len(long))
		}
	}
}

// TestEventHandlerAcceptedEventsDecode is the property that every event
// the endpoint accepts is written and decodes: random bodies near and past
// every limit go through the real handler and writer, then every sealed
// segment is read back (ReadSegment decodes each record).
func TestEventHandlerAcceptedEventsDecode(t *testing.T) {
	p, url := eventPipeline(t, func(c *Config) { c.IPRate, c.IPBurst, c.SiteRate, c.SiteBurst = 1e9, 1e9, 1e9, 1e9 })
	rng := rand.New(rand.NewPCG(1, 2))
	accepted, refused := 0, 0
	for range 300 {
		body := randomEventBody(rng)
		r := postEvent(t, url, "text/plain", body, nil)
		switch {
		case r.status == http.StatusAccepted && r.dropped == "":
			accepted++
		case r.status == http.StatusBadRequest || r.status == http.StatusRequestEntityTooLarge:
			refused++
		default:
			t.Fatalf("%.200s: got %d dropped %q", body, r.status, r.dropped)
		}
	}
	events := closeAndRead(t, p)
	if len(events) != accepted {
		t.Fatalf("got %d events in segments; want the %d accepted", len(events), accepted)
	}
	if got := p.Dropped(DropInvalid); got != uint64(refused) {
		t.Errorf("got %d invalid drops; want the %d refused requests (none at the writer)", got, refused)
	}
	if accepted < 100 || refused < 30 {
		t.Errorf("accepted %d, refused %d: the generator should produce plenty of both", accepted, refused)
	}
	for _, ev := range events {
		if err := CheckEvent(&ev); err != nil {
			t.Errorf("stored event fails CheckEvent: %v", err)
		}
	}
}

// randomEventBody makes a body with fields drawn around their limits.
func randomEventBody(rng *rand.Rand) string {
	str := func(n int) string {
		const chars = "abcXYZ09-_./ é😀%\"\\"
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(string([]rune(chars)[rng.IntN(len([]rune(chars)))]))
		}
		return b.String()
	}
	around := func(limit int) int { return max(0, limit-3+rng.IntN(6)) }
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	var parts []string
	switch rng.IntN(4) {
	case 0:
		parts = append(parts, `"n":"pageview"`)
	case 1:
		parts = append(parts, `"n":"engagement"`, fmt.Sprintf(`"e":%d`, rng.IntN(maxEngagedMS+2)-1), fmt.Sprintf(`"sd":%d`, rng.IntN(300)-50))
	default:
		parts = append(parts, `"n":`+q(str(around(MaxNameLen))))
	}
	path := strings.ReplaceAll(str(rng.IntN(MaxPathLen+50)), "%", "%25")
	utm := str(around(MaxUTMLen + 100))
	parts = append(parts, `"u":`+q("https://a.example/"+path[:min(len(path), 1900)]+"?utm_source="+strings.ReplaceAll(utm, "%", "%25")))
	if rng.IntN(2) == 0 {
		parts = append(parts, `"r":`+q("https://"+strings.Repeat("r", around(MaxHostLen))+".example/x"))
	}
	if rng.IntN(2) == 0 {
		var props []string
		for i := range around(MaxProps) {
			props = append(props, fmt.Sprintf(`%q:%q`, fmt.Sprint(i, str(rng.IntN(MaxPropKeyLen/100))), str(around(MaxPropValLen/10))))
		}
		if rng.IntN(5) == 0 {
			props = append(props, fmt.Sprintf(`"long":%q`, str(around(MaxPropValLen))))
		}
		parts = append(parts, `"p":{`+strings.Join(props, ",")+`}`)
	}
	if rng.IntN(2) == 0 {
		parts = append(parts, fmt.Sprintf(`"w":%d`, rng.IntN(3000)-10))
	}
	if rng.IntN(10) == 0 {
		parts = append(parts, `"e":"NaN"`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}
