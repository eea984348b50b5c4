package testmmdb

import (
	"net"
	"testing"

	"github.com/oschwald/maxminddb-golang"
)

func TestBuildReadsBack(t *testing.T) {
	b := Build("GeoLite2-Country", 6, []Net{
		{Prefix: "81.2.69.0/24", Record: Country("DE", 2921044)},
		{Prefix: "2a02:8100::/32", Record: Country("AT", 2782113)},
	})
	r, err := maxminddb.FromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[string]string{"81.2.69.142": "DE", "2a02:8100::1": "AT", "192.0.2.1": ""} {
		var rec struct {
			Country struct {
				ISO string `maxminddb:"iso_code"`
			} `maxminddb:"country"`
		}
		if err := r.Lookup(net.ParseIP(ip), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Country.ISO != want {
			t.Errorf("%s: got %q; want %q", ip, rec.Country.ISO, want)
		}
	}
}
