package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/internal/testmmdb"
)

// TestE2ERedirectRules runs redirect rules through the built binary: a
// link with device, country (from a real GeoIP database file), language
// and query rules; each request gets the Location worked out by hand, and
// the stats broken down by rule show the clicks counted by hand.
func TestE2ERedirectRules(t *testing.T) {
	dir := t.TempDir()
	// 81.2.69.0/24 is in Germany, 2.16.6.0/24 in France; anything else is
	// unknown to the database.
	db := testmmdb.Build("GeoLite2-Country", 6, []testmmdb.Net{
		{Prefix: "81.2.69.0/24", Record: testmmdb.Country("DE", 2921044)},
		{Prefix: "2.16.6.0/24", Record: testmmdb.Country("FR", 3017382)},
	})
	dbPath := filepath.Join(dir, "country.mmdb")
	if err := os.WriteFile(dbPath, db, 0o644); err != nil {
		t.Fatal(err)
	}
	// --dev trusts loopback, so X-Forwarded-For names the visitor; no
	// country header is sent, so the country comes from the database.
	p := startNode(t, filepath.Join(dir, "data"), "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
		"--raft-addr", "127.0.0.1:0", "--geoip-db", dbPath)
	base := "http://" + p.http
	waitFor(t, "readyz", 30*time.Second, func() bool { return do(t, "GET", base+"/readyz", "", "").status == 200 })
	var key string
	waitFor(t, "dev-api-key", 30*time.Second, func() bool {
		key = readKeyMaybe(filepath.Join(dir, "data", "dev-api-key"))
		return key != ""
	})

	// The API calls go through the OpenAPI validator: request and answer
	// must match docs/openapi.yaml.
	v := newSpecValidator(t, base)
	r := v.send(t, "POST", base+"/v1/links", key, `{"url":"https://main.example/","rules":[
		{"if":{"device":["ios"]},"url":"https://apps.example/ios"},
		{"if":{"country":["DE","AT"]},"url":"https://shop.example/de"},
		{"if":{"language":["fr"]},"url":"https://shop.example/fr"},
		{"if":{"query":{"ref":"qr"}},"url":"https://shop.example/qr"}]}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	code := r.json(t)["code"].(string)
	var view struct {
		Rules []struct {
			If  map[string]any `json:"if"`
			URL string         `json:"url"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(v.send(t, "GET", base+"/v1/links/"+code, key, "").body, &view); err != nil {
		t.Fatal(err)
	}
	if len(view.Rules) != 4 || view.Rules[1].URL != "https://shop.example/de" || view.Rules[3].If["query"].(map[string]any)["ref"] != "qr" {
		t.Fatalf("GET shows rules %+v", view.Rules)
	}

	const (
		iphone  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
		windows = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
		de, fr  = "81.2.69.142", "2.16.6.10"
		us      = "198.51.100.7" // not in the database
	)
	cases := []struct {
		name, path, ua, ip, lang, want string
		times                          int
		rule                           string // the breakdown value: rule index + 1, "0" the fallback
	}{
		{"iphone in France", "/" + code, iphone, fr, "fr", "https://apps.example/ios", 3, "1"},
		{"windows in Germany", "/" + code, windows, de, "fr", "https://shop.example/de", 2, "2"},
		{"windows in France, French", "/" + code, windows, fr, "fr-FR,fr;q=0.9,en;q=0.5", "https://shop.example/fr", 4, "3"},
		{"unknown place, French", "/" + code, windows, us, "fr", "https://shop.example/fr", 1, "3"},
		{"scanned QR code", "/" + code + "?ref=qr", windows, us, "en-US", "https://shop.example/qr?ref=qr", 5, "4"},
		{"nothing matches", "/" + code + "?ref=mail", windows, fr, "en", "https://main.example/?ref=mail", 2, "0"},
	}
	want := map[string]int{}
	total := 0
	for _, c := range cases {
		for range c.times {
			red := do(t, "GET", base+c.path, "", "", "User-Agent", c.ua, "X-Forwarded-For", c.ip, "Accept-Language", c.lang)
			if red.status != 302 || red.header.Get("Location") != c.want {
				t.Fatalf("%s: %d Location %q; want 302 %q", c.name, red.status, red.header.Get("Location"), c.want)
			}
			if cc := red.header.Get("Cache-Control"); cc != "no-store" {
				t.Fatalf("%s: Cache-Control %q; want no-store", c.name, cc)
			}
		}
		want[c.rule] += c.times
		total += c.times
	}
	// HEAD answers the same and is not a click.
	if red := do(t, "HEAD", base+"/"+code, "", "", "User-Agent", iphone); red.header.Get("Location") != "https://apps.example/ios" {
		t.Fatalf("HEAD: Location %q", red.header.Get("Location"))
	}

	// By hand: rule 1 (ios) 3, rule 2 (DE) 2, rule 3 (fr) 4 + 1 = 5,
	// rule 4 (qr) 5, fallback 2; 17 clicks.
	if total != 17 || want["1"] != 3 || want["2"] != 2 || want["3"] != 5 || want["4"] != 5 || want["0"] != 2 {
		t.Fatalf("BUG: the hand count is %v of %d", want, total)
	}
	now := time.Now().UTC()
	rng := "from=" + now.AddDate(0, 0, -1).Format(time.DateOnly) + "&to=" + now.AddDate(0, 0, 1).Format(time.DateOnly) + "&tz=UTC"
	var got map[string]int
	var last string
	waitFor(t, "the clicks in the breakdown by rule", 60*time.Second, func() bool {
		b := v.send(t, "GET", base+"/v1/links/"+code+"/stats/breakdown?dimension=rule&"+rng, key, "")
		last = string(b.body)
		if b.status != 200 {
			return false
		}
		var out struct {
			Total   int `json:"total"`
			Results []struct {
				Value  string `json:"value"`
				Clicks int    `json:"clicks"`
			} `json:"results"`
		}
		if json.Unmarshal(b.body, &out) != nil || out.Total < total {
			return false
		}
		got = map[string]int{}
		for _, x := range out.Results {
			got[x.Value] = x.Clicks
		}
		return true
	})
	if len(got) != len(want) {
		t.Fatalf("breakdown by rule %v; want %v (%s)", got, want, last)
	}
	for v, n := range want {
		if got[v] != n {
			t.Fatalf("breakdown by rule: %v; want %v (%s)", got, want, last)
		}
	}
	// The country breakdown agrees with the rules' country: the five
	// clicks from 81.2.69.142 and 2.16.6.x that the database places.
	b := do(t, "GET", base+"/v1/links/"+code+"/stats/breakdown?dimension=country&"+rng, key, "")
	if !strings.Contains(string(b.body), `"value":"DE","clicks":2`) || !strings.Contains(string(b.body), `"value":"FR","clicks":9`) {
		t.Fatalf("country breakdown: %s", b.body)
	}

	// PATCH clears the rules: the link's own URL again, for everyone.
	if r := v.send(t, "PATCH", base+"/v1/links/"+code, key, `{"rules":[]}`); r.status != 200 || !strings.Contains(string(r.body), `"rules":[]`) {
		t.Fatalf("PATCH rules []: %d %s", r.status, r.body)
	}
	if red := do(t, "GET", base+"/"+code, "", "", "User-Agent", iphone); red.header.Get("Location") != "https://main.example/" {
		t.Fatalf("after clearing: Location %q", red.header.Get("Location"))
	}
	// A bad rule: problem+json naming the member.
	bad := v.send(t, "PATCH", base+"/v1/links/"+code, key, `{"rules":[{"if":{"device":["fridge"]},"url":"https://x.example/"}]}`)
	if bad.status != 400 || bad.header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(string(bad.body), `rules[0].if.device: unknown device \"fridge\"`) || !strings.Contains(string(bad.body), `"pointer":"/rules/0/if/device"`) {
		t.Fatalf("bad rule: %d %s %s", bad.status, bad.header.Get("Content-Type"), bad.body)
	}
}
