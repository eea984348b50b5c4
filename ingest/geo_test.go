package ingest

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
)

// tinyMMDB builds a MaxMind DB with one tree node: 0.0.0.0/1 maps to the
// MaxMind layout {"country":{"iso_code":"DE"}}, 128.0.0.0/1 to the
// ip-location-db layout {"country_code":"US"}.
func tinyMMDB() []byte {
	str := func(s string) []byte { return append([]byte{0x40 | byte(len(s))}, s...) }
	var dataA []byte
	dataA = append(dataA, 0xE1)
	dataA = append(dataA, str("country")...)
	dataA = append(dataA, 0xE1)
	dataA = append(dataA, str("iso_code")...)
	dataA = append(dataA, str("DE")...)
	var dataB []byte
	dataB = append(dataB, 0xE1)
	dataB = append(dataB, str("country_code")...)
	dataB = append(dataB, str("US")...)

	const nodeCount = 1
	rec := func(off int) []byte {
		v := nodeCount + 16 + off
		return []byte{byte(v >> 16), byte(v >> 8), byte(v)}
	}
	var b []byte
	b = append(b, rec(0)...)
	b = append(b, rec(len(dataA))...)
	b = append(b, make([]byte, 16)...)
	b = append(b, dataA...)
	b = append(b, dataB...)
	b = append(b, "\xAB\xCD\xEFMaxMind.com"...)
	b = append(b, 0xE6) // map of 6
	b = append(b, str("node_count")...)
	b = append(b, 0xC1, nodeCount)
	b = append(b, str("record_size")...)
	b = append(b, 0xA1, 24)
	b = append(b, str("ip_version")...)
	b = append(b, 0xA1, 4)
	b = append(b, str("database_type")...)
	b = append(b, str("Test-Country")...)
	b = append(b, str("binary_format_major_version")...)
	b = append(b, 0xA1, 2)
	b = append(b, str("binary_format_minor_version")...)
	b = append(b, 0xA0)
	return b
}

func TestCountryFromGeoIP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "country.mmdb")
	writeFile(t, path, tinyMMDB())
	e, err := newEnricher(path)
	if err != nil {
		t.Fatalf("newEnricher: %v", err)
	}
	defer e.close()
	for ip, want := range map[string]string{"1.2.3.4": "DE", "203.0.113.7": "US", "::1": ""} {
		if got := e.country(netip.MustParseAddr(ip)); got != want {
			t.Errorf("country(%s): got %q; want %q", ip, got, want)
		}
	}

	// The pipeline uses the database when no trusted header names a country.
	p := openTestPipeline(t, func(c *Config) { c.GeoIPPath = path })
	p.CaptureClick(clickCtx("http://wm.example/c", "1.2.3.4", nil), []byte("c"))
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if events := readSealed(t, p.cfg.Dir); len(events) != 1 || events[0].Country != "DE" {
		t.Fatalf("got %+v; want one event from DE", events)
	}
}
