package ingest

import (
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"testing"
	"time"
)

// TestPrevVisitorHashAfterMidnight: site events in the first 30 minutes of
// a UTC day carry the hash the same visitor got yesterday; later events,
// yesterday's events and clicks carry none.
func TestPrevVisitorHashAfterMidnight(t *testing.T) {
	clock := newFakeClock()
	mid := clock.Now().Truncate(24 * time.Hour)
	p, url := eventPipeline(t, func(c *Config) { c.Now = clock.Now })
	at := func(d time.Duration) {
		clock.mu.Lock()
		clock.t = mid.Add(d)
		clock.mu.Unlock()
	}
	pageview := func() {
		t.Helper()
		r := postEvent(t, url, "text/plain", `{"n":"pageview","u":"https://a.example/","d":"a.example"}`, nil)
		if r.status != http.StatusAccepted || r.dropped != "" {
			t.Fatalf("POST: got %d dropped %q; want 202", r.status, r.dropped)
		}
	}
	clickAt := func() { p.CaptureClick(clickCtx("http://wm.example/aB3dE7x", "127.0.0.1", nil), []byte("aB3dE7x")) }

	at(-10 * time.Minute)
	pageview() // 0: yesterday
	clickAt()  // 1: yesterday's click
	at(0)
	pageview() // 2: first instant of the day
	clickAt()  // 3: a click gets no previous hash
	at(30*time.Minute - time.Millisecond)
	pageview() // 4: last instant of the window
	at(30 * time.Minute)
	pageview() // 5: past the window
	events := closeAndRead(t, p)
	if len(events) != 6 {
		t.Fatalf("got %d events; want 6", len(events))
	}
	yesterday, today := events[0].VisitorHash, events[2].VisitorHash
	if yesterday == 0 || today == 0 || yesterday == today {
		t.Fatalf("got hashes %x yesterday and %x today; want two different ones", yesterday, today)
	}
	for i, want := range []struct{ hash, prev uint64 }{
		{yesterday, 0}, {events[1].VisitorHash, 0}, {today, yesterday}, {events[3].VisitorHash, 0}, {today, yesterday}, {today, 0},
	} {
		if ev := events[i]; ev.VisitorHash != want.hash || ev.PrevVisitorHash != want.prev {
			t.Errorf("event %d (%v at %s): got hash %x prev %x; want %x and %x", i, ev.Kind,
				time.UnixMilli(ev.Time).UTC().Format(time.TimeOnly), ev.VisitorHash, ev.PrevVisitorHash, want.hash, want.prev)
		}
	}
	if events[1].VisitorHash == events[3].VisitorHash {
		t.Errorf("click hashes: got the same %x on both days; want different", events[1].VisitorHash)
	}
}

func TestSinceMidnight(t *testing.T) {
	for _, tc := range []struct{ ms, want int64 }{
		{0, 0}, {86_400_000 + 5, 5}, {-1, 86_399_999}, {-86_400_000, 0},
	} {
		if got := sinceMidnightMS(tc.ms); got != tc.want {
			t.Errorf("sinceMidnightMS(%d): got %d; want %d", tc.ms, got, tc.want)
		}
	}
}

// v1Pageview is a pageview encoded by the version 1 codec, before
// PrevVisitorHash existed: old segments and stored raw events hold these.
const v1Pageview = "0102000102030405060708090a0b0c0d0e0f1080c0b5eec568000807060504030201000273310870616765766965770000022f6100000000000002444500000000000000"

func TestDecodeEventVersion1(t *testing.T) {
	b, err := hex.DecodeString(v1Pageview)
	if err != nil {
		t.Fatal(err)
	}
	var ev Event
	if err := DecodeEvent(b, &ev); err != nil {
		t.Fatalf("DecodeEvent: %v", err)
	}
	if ev.Kind != KindPageview || ev.Time != 1796083200000 || ev.VisitorHash != 0x0102030405060708 ||
		ev.PrevVisitorHash != 0 || ev.SiteID != "s1" || ev.Name != "pageview" || ev.Path != "/a" ||
		ev.Country != "DE" || ev.ID[0] != 1 || ev.ID[15] != 16 {
		t.Errorf("got %+v; want the version 1 pageview", ev)
	}
	again := AppendEvent(nil, &ev)
	var back Event
	if again[0] != eventVersion4 || DecodeEvent(again, &back) != nil || back.Path != "/a" || back.Country != "DE" {
		t.Errorf("re-encoded: got version %d; want a version 4 encoding of the same event", again[0])
	}
}

func TestPrevVisitorHashRoundTrip(t *testing.T) {
	ev := sampleSiteEvent()
	ev.PrevVisitorHash = 0xdeadbeef00000001
	b := AppendEvent(nil, &ev)
	if b[0] != eventVersion4 {
		t.Fatalf("version: got %d; want %d", b[0], eventVersion4)
	}
	plain := ev
	plain.PrevVisitorHash = 0
	if got, want := len(b), len(AppendEvent(nil, &plain))+8; got != want {
		t.Errorf("length: got %d; want %d", got, want)
	}
	var got Event
	if err := DecodeEvent(b, &got); err != nil {
		t.Fatalf("DecodeEvent: %v", err)
	}
	if got.PrevVisitorHash != ev.PrevVisitorHash || got.VisitorHash != ev.VisitorHash || got.Path != ev.Path ||
		got.SiteID != ev.SiteID || len(got.Props) != len(ev.Props) {
		t.Errorf("got %+v; want %+v", got, ev)
	}
	// The marker says a hash follows: a zero one, or another marker, is
	// not what AppendEvent writes.
	off := 3 + 16 // version, kind, flags, id
	var tmp [binary.MaxVarintLen64]byte
	off += binary.PutVarint(tmp[:], ev.Time) + 8
	zeroed := append([]byte(nil), b...)
	clear(zeroed[off+1 : off+9])
	if err := DecodeEvent(zeroed, &got); err == nil {
		t.Errorf("a marked but zero previous hash: got no error; want one")
	}
	marker := append([]byte(nil), b...)
	marker[off] = 2
	if err := DecodeEvent(marker, &got); err == nil {
		t.Errorf("previous-hash marker 2: got no error; want one")
	}
	if err := decodeEvent(b, &got, true); err != nil {
		t.Errorf("validate-only: %v", err)
	}
	// Version 2 (older segments) still decodes, and with a zero hash not.
	v2 := appendLegacyEvent(nil, &ev, eventVersion2, 1_780_000_000_000, 390)
	if err := DecodeEvent(v2, &got); err != nil || got.PrevVisitorHash != ev.PrevVisitorHash {
		t.Errorf("version 2: got %v, previous hash %x", err, got.PrevVisitorHash)
	}
	ev.PrevVisitorHash = 0
	v2zero := appendLegacyEvent(nil, &ev, eventVersion2, 1_780_000_000_000, 390)
	if err := DecodeEvent(v2zero, &got); err == nil {
		t.Errorf("version 2 with a zero previous hash: got no error; want one")
	}
}
