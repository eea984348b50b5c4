package ingest

import (
	"testing"

	"github.com/waymark/waymark/internal/testmmdb"
)

// mmdbNet is one network of a test database and the record it maps to
// (internal/testmmdb writes the file).
type mmdbNet = testmmdb.Net

// buildMMDB writes a real MaxMind DB mapping each network to its record
// (testmmdb.Build).
func buildMMDB(t testing.TB, dbType string, ipVersion int, nets []mmdbNet) []byte {
	t.Helper()
	return testmmdb.Build(dbType, ipVersion, nets)
}

// maxmindCity is a record in MaxMind's GeoLite2 City layout, with the
// fields GeoLite2 has around the ones the enricher reads.
func maxmindCity(country string, countryID uint32, sub string, cityID uint32, cityName string) map[string]any {
	rec := map[string]any{
		"continent": map[string]any{"code": "XX", "geoname_id": uint32(6255148), "names": map[string]any{"en": "Somewhere"}},
		"country": map[string]any{"geoname_id": countryID, "iso_code": country,
			"is_in_european_union": true, "names": map[string]any{"en": country + " land"}},
		"registered_country": map[string]any{"geoname_id": countryID, "iso_code": country},
		"location":           map[string]any{"accuracy_radius": uint16(20), "time_zone": "Etc/UTC"},
	}
	if sub != "" {
		rec["subdivisions"] = []any{
			map[string]any{"geoname_id": uint32(1), "iso_code": sub, "names": map[string]any{"en": "Region " + sub}},
			map[string]any{"geoname_id": uint32(2), "iso_code": "ZZZ", "names": map[string]any{"en": "Second level"}},
		}
	}
	if cityID != 0 {
		rec["city"] = map[string]any{"geoname_id": cityID, "names": map[string]any{"en": cityName, "de": cityName}}
		rec["postal"] = map[string]any{"code": "12345"}
	}
	return rec
}
