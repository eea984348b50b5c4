package ingest

import (
	"net/netip"
	"testing"
	"time"
)

func TestLocalSalts(t *testing.T) {
	clock := newFakeClock()
	s := NewLocalSalts(clock.Now)
	today := clock.Now()
	a := s.Salt(today)
	if a == ([16]byte{}) {
		t.Fatal("got a zero salt")
	}
	if b := s.Salt(today.Add(time.Hour)); b != a {
		t.Errorf("same UTC day gave a different salt")
	}
	clock.Advance(24 * time.Hour)
	tomorrow := s.Salt(clock.Now())
	if tomorrow == a {
		t.Errorf("next day reused the salt")
	}
	if s.Salt(today) != a {
		t.Errorf("yesterday's salt was not kept")
	}
	clock.Advance(24 * time.Hour)
	s.Salt(clock.Now())
	for _, ds := range s.Known() {
		if ds.Day < dayNumber(clock.Now())-1 {
			t.Errorf("kept the salt of day %d, older than yesterday", ds.Day)
		}
	}
	older := DaySalt{Day: dayNumber(clock.Now()), Created: clock.Now().Add(-time.Hour).UnixMilli(), Salt: [16]byte{0xff}}
	if !s.Merge(older) || s.Salt(clock.Now()) != older.Salt {
		t.Errorf("Merge of an older salt did not replace today's")
	}
}

func TestSipHashVector(t *testing.T) {
	// Reference vector from the SipHash paper: key 00..0f, message 00..0e.
	var key [16]byte
	for i := range key {
		key[i] = byte(i)
	}
	msg := make([]byte, 15)
	for i := range msg {
		msg[i] = byte(i)
	}
	k0 := uint64(0x0706050403020100)
	k1 := uint64(0x0f0e0d0c0b0a0908)
	if got := sipHash24(k0, k1, msg); got != 0xa129ca6149be45e5 {
		t.Fatalf("got %#x; want 0xa129ca6149be45e5", got)
	}
}

func TestVisitorHash(t *testing.T) {
	salt := [16]byte{7}
	ip := netip.MustParseAddr("203.0.113.7")
	ua := []byte(firefoxUA)
	h1, _ := visitorHash(salt, "site-a", ip, ua, nil)
	h2, _ := visitorHash(salt, "site-a", ip, ua, nil)
	if h1 != h2 {
		t.Fatal("hash is not deterministic")
	}
	for name, h := range map[string]uint64{
		"other site": must(visitorHash(salt, "site-b", ip, ua, nil)),
		"other ip":   must(visitorHash(salt, "site-a", netip.MustParseAddr("203.0.113.8"), ua, nil)),
		"other ua":   must(visitorHash(salt, "site-a", ip, []byte("x"), nil)),
		"other salt": must(visitorHash([16]byte{8}, "site-a", ip, ua, nil)),
	} {
		if h == h1 {
			t.Errorf("%s: got the same hash", name)
		}
	}
}

func must(h uint64, _ []byte) uint64 { return h }
