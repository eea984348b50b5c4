package edge

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/edge/problem"
)

func TestCreateLinkWithRules(t *testing.T) {
	e := newEnv(t, nil)
	v := e.createLink(keyAlice, `{"url":"https://example.com/","rules":[
		{"if":{"device":["IOS","android"]},"url":"HTTPS://Apps.Example/x"},
		{"if":{"country":["de","AT","DE"],"language":["FR"]},"url":"https://example.de/"},
		{"if":{"query":{"ref":"qr","n":["1","2"]},"os":["windows"],"browser":["CHROME"]},"url":"https://example.com/qr"},
		{"if":{"after":"2030-01-01T00:00:00Z","before":"2030-01-02T00:00:00Z"},"url":"https://example.com/sale"}]}`)
	// Canonical form, worked out by hand: devices in their fixed order,
	// countries upper case without the duplicate, languages lower case,
	// OS and browser as analytics names them, the URL's scheme and host
	// lower case.
	want := []ruleView{
		{If: ruleIfView{Device: []string{"ios", "android"}}, URL: "https://apps.example/x"},
		{If: ruleIfView{Country: []string{"DE", "AT"}, Language: []string{"fr"}}, URL: "https://example.de/"},
		{If: ruleIfView{OS: []string{"Windows"}, Browser: []string{"Chrome"}, Query: map[string]any{"n": []any{"1", "2"}, "ref": "qr"}}, URL: "https://example.com/qr"},
		{If: ruleIfView{After: "2030-01-01T00:00:00Z", Before: "2030-01-02T00:00:00Z"}, URL: "https://example.com/sale"},
	}
	got := decodeRuleViews(t, e.do("GET", "/v1/links/"+v.Code, keyAlice, "").body)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GET rules:\n got %+v\nwant %+v", got, want)
	}
	// A link without rules shows [].
	plain := e.do("GET", "/v1/links/"+e.createLink(keyAlice, `{"url":"https://example.com/"}`).Code, keyAlice, "")
	if !strings.Contains(string(plain.body), `"rules":[]`) {
		t.Fatalf("a link without rules: %s", plain.body)
	}
}

func decodeRuleViews(t *testing.T, body []byte) []ruleView {
	t.Helper()
	var v struct {
		Rules []ruleView `json:"rules"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("cannot decode %s: %v", body, err)
	}
	return v.Rules
}

type ruleProblem struct {
	problemDoc
	Pointer string `json:"pointer"`
}

func TestCreateLinkRulesRefused(t *testing.T) {
	e := newEnv(t, nil)
	ok := `{"if":{"device":["ios"]},"url":"https://a.example/"}`
	for _, c := range []struct {
		name, rules, prob, detail, pointer string
	}{
		{"unknown device", `[` + ok + `,` + ok + `,` + ok + `,{"if":{"device":["fridge"]},"url":"https://a.example/"}]`, "invalid-request",
			`rules[3].if.device: unknown device "fridge"; the devices are ios, android, desktop, mobile, tablet`, "/rules/3/if/device"},
		{"unknown os", `[{"if":{"os":["BeOS"]},"url":"https://a.example/"}]`, "invalid-request", `rules[0].if.os: unknown OS "BeOS"`, "/rules/0/if/os"},
		{"bad country", `[{"if":{"country":["Germany"]},"url":"https://a.example/"}]`, "invalid-request", `rules[0].if.country: "Germany" is not a valid country`, "/rules/0/if/country"},
		{"bad language", `[{"if":{"language":["fr-CH"]},"url":"https://a.example/"}]`, "invalid-request", `rules[0].if.language: "fr-CH" is not a valid language`, "/rules/0/if/language"},
		{"no condition", `[{"if":{},"url":"https://a.example/"}]`, "invalid-request", `rules[0].if: has no condition`, "/rules/0/if"},
		{"unknown condition", `[{"if":{"weather":["rain"]},"url":"https://a.example/"}]`, "invalid-request", `rules[0].if.weather: unknown condition`, "/rules/0/if/weather"},
		{"no url", `[{"if":{"device":["ios"]}}]`, "invalid-request", `rules[0].url: is required`, "/rules/0/url"},
		{"bad url", `[` + ok + `,{"if":{"device":["ios"]},"url":"ftp://a.example/"}]`, "invalid-url", `rules[1].url: url scheme "ftp" is not allowed`, "/rules/1/url"},
		{"blocked url", `[{"if":{"device":["ios"]},"url":"https://evil.example/x"}]`, "destination-blocked", `rules[0].url: `, "/rules/0/url"},
		{"window", `[{"if":{"after":"2030-01-02T00:00:00Z","before":"2030-01-01T00:00:00Z"},"url":"https://a.example/"}]`, "invalid-request", `rules[0].if.after: must be earlier than "before"`, "/rules/0/if/after"},
		{"not a list", `{"if":{}}`, "invalid-request", `rules: must be an array`, "/rules"},
		{"21 rules", `[` + strings.Repeat(ok+`,`, 20) + ok + `]`, "invalid-request", `rules: 21 rules; a link has at most 20`, "/rules"},
		{"query name", `[{"if":{"query":{"a/b~":3}},"url":"https://a.example/"}]`, "invalid-request", `rules[0].if.query.a/b~: must be an array`, "/rules/0/if/query/a~1b~0"},
	} {
		r := e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/","rules":`+c.rules+`}`)
		pt, _ := problem.Lookup(c.prob)
		e.expect(r, pt.Status, c.prob)
		var p ruleProblem
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(p.Detail, c.detail) || p.Pointer != c.pointer {
			t.Errorf("%s: detail %q, pointer %q; want detail starting %q, pointer %q", c.name, p.Detail, p.Pointer, c.detail, c.pointer)
		}
	}
	// A permanent redirect is cached by browsers for good: no rules.
	r := e.do("POST", "/v1/links", keyAlice, `{"url":"https://example.com/","redirect":301,"rules":[`+ok+`]}`)
	e.expect(r, 400, "invalid-request")
	// Bulk create does not take rules (set them with PATCH).
	r = e.do("POST", "/v1/links/bulk", keyAlice, `{"links":[{"url":"https://example.com/","rules":[`+ok+`]}]}`)
	if !strings.Contains(string(r.body), `unknown field \"rules\"`) {
		t.Errorf("bulk with rules: %d %s", r.status, r.body)
	}
	// Nothing was created by the refusals.
	list := e.do("GET", "/v1/links", keyAlice, "")
	if strings.Contains(string(list.body), `"code"`) {
		t.Errorf("refused creates left links: %s", list.body)
	}
}

func TestPatchLinkRules(t *testing.T) {
	e := newEnv(t, nil)
	v := e.createLink(keyAlice, `{"url":"https://example.com/"}`)
	path := "/v1/links/" + v.Code
	// Replace: the redirect follows the new rule once the review window
	// of the edit closes (new destinations are reviewed like a new url).
	r := e.do("PATCH", path, keyAlice, `{"rules":[{"if":{"query":{"ref":"qr"}},"url":"https://qr.example/"}]}`)
	e.expect(r, 200, "")
	if got := decodeRuleViews(t, r.body); len(got) != 1 || got[0].URL != "https://qr.example/" {
		t.Fatalf("PATCH answer rules %+v", got)
	}
	if st, _ := e.rawGet("/" + v.Code + "?ref=qr"); !strings.Contains(st, "200") {
		t.Fatalf("during the review window: %s; want the 200 interstitial", st)
	}
	e.clock.Advance(25 * time.Hour)
	st, h := e.rawGet("/" + v.Code + "?ref=qr")
	if !strings.Contains(st, "302") || h["Location"] != "https://qr.example/?ref=qr" {
		t.Fatalf("after the window: %s %v", st, h)
	}
	if _, h := e.rawGet("/" + v.Code); h["Location"] != "https://example.com/" {
		t.Fatalf("fallback: %v", h)
	}
	// A bad rule changes nothing.
	r = e.do("PATCH", path, keyAlice, `{"rules":[{"if":{"device":["fridge"]},"url":"https://x.example/"}]}`)
	e.expect(r, 400, "invalid-request")
	if got := decodeRuleViews(t, e.do("GET", path, keyAlice, "").body); len(got) != 1 {
		t.Fatalf("after a refused PATCH: %+v", got)
	}
	// Clear with null (or []): no rules, and no review window either.
	r = e.do("PATCH", path, keyAlice, `{"rules":null}`)
	e.expect(r, 200, "")
	if got := decodeRuleViews(t, r.body); len(got) != 0 {
		t.Fatalf("cleared rules: %+v", got)
	}
	st, h = e.rawGet("/" + v.Code + "?ref=qr")
	if !strings.Contains(st, "302") || h["Location"] != "https://example.com/?ref=qr" {
		t.Fatalf("after clearing: %s %v", st, h)
	}
}

func TestPrimaryLanguageByHand(t *testing.T) {
	for h, want := range map[string]string{
		"":                           "",
		"fr":                         "fr",
		"fr-CH, fr;q=0.9, en;q=0.8":  "fr",
		"en;q=0.5, DE-de;q=0.7":      "de",
		"*":                          "",
		"*;q=1, es;q=0.1":            "es",
		"de;q=0, en;q=0.001":         "en",
		"zh-Hant-TW;q=0.9, ja;q=0.9": "zh", // equal q: the first
		"x;q=1, it":                  "it", // one letter is no language
		"pt_BR":                      "pt",
		"en;q=1.0, fr;q=abc":         "en",
		" ,  ,":                      "",
	} {
		var dst [8]byte
		n := primaryLanguage([]byte(h), &dst)
		if got := string(dst[:n]); got != want {
			t.Errorf("primaryLanguage(%q) = %q; want %q", h, got, want)
		}
	}
}

// An Idempotency-Key retry must carry the same rules: rules that differ
// only in binary-encoded bytes (a time) are another request.
func TestCreateLinkRulesIdempotency(t *testing.T) {
	e := newEnv(t, nil)
	body := func(day string) string {
		return `{"url":"https://example.com/","rules":[{"if":{"before":"2030-01-` + day + `T00:00:00Z"},"url":"https://a.example/"}]}`
	}
	first := e.createLink(keyAlice, body("02"), "Idempotency-Key", "k1")
	again := e.createLink(keyAlice, body("02"), "Idempotency-Key", "k1")
	if again.Code != first.Code {
		t.Fatalf("replay: code %q; want %q", again.Code, first.Code)
	}
	r := e.do("POST", "/v1/links", keyAlice, body("03"), "Idempotency-Key", "k1")
	e.expect(r, 422, "idempotency-mismatch")
}

// A rule destination put on the blocklist after the link was made stops
// that rule's redirects (the blocked page, like the link's own URL), and
// only those; lifting the block brings it back.
func TestRedirectRuleDestinationBlockedLater(t *testing.T) {
	e := newEnv(t, nil)
	v := e.createLink(keyAlice, `{"url":"https://fine.example/","rules":[{"if":{"query":{"ref":"qr"}},"url":"https://www.later.example/qr"}]}`)
	if _, h := e.rawGet("/" + v.Code + "?ref=qr"); h["Location"] != "https://www.later.example/qr?ref=qr" {
		t.Fatalf("before the block: %v", h)
	}
	e.w.blocklist(t, blockEntry("later.example"))
	r := e.do("GET", "/"+v.Code+"?ref=qr", "", "")
	if r.status != 410 || r.get("Location") != "" || !strings.Contains(string(r.body), "blocklist") {
		t.Fatalf("rule destination blocked: %d Location %q; want the 410 blocked page", r.status, r.get("Location"))
	}
	if r := e.do("GET", "/"+v.Code, "", ""); r.status != 302 || r.get("Location") != "https://fine.example/" {
		t.Fatalf("fallback while the rule's destination is blocked: %d %q", r.status, r.get("Location"))
	}
	if got := counterValue(e.set, `waymark_rules_redirects_total{result="blocklisted"}`); got != 1 {
		t.Fatalf("blocklisted rule redirects %d; want 1", got)
	}
	e.w.blocklist(t, unblockEntry("later.example"))
	if r := e.do("GET", "/"+v.Code+"?ref=qr", "", ""); r.status != 302 {
		t.Fatalf("after the removal: %d", r.status)
	}
}
