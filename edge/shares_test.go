package edge

import (
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

func TestParseShareToken(t *testing.T) {
	text, tok, err := NewShareToken()
	if err != nil {
		t.Fatal(err)
	}
	if len(text) != shareTokenText {
		t.Fatalf("token text %q: %d characters; want %d", text, len(text), shareTokenText)
	}
	got, ok := ParseShareToken(text)
	if !ok || got != tok {
		t.Fatalf("ParseShareToken(%q) = %x %v; want %x", text, got, ok, tok)
	}
	// The last character carries 2 unused bits: only the canonical text
	// of a token is accepted, so no two URLs open one share.
	last := strings.IndexByte(shareAlphabet, text[len(text)-1])
	alt := text[:len(text)-1] + string(shareAlphabet[last^1])
	if _, ok := ParseShareToken(alt); ok {
		t.Errorf("a non-canonical twin %q of %q was accepted", alt, text)
	}
	for _, bad := range []string{"", text[:21], text + "A", strings.Repeat("!", 22), text[:21] + "=", "../" + text[3:]} {
		if _, ok := ParseShareToken(bad); ok {
			t.Errorf("ParseShareToken(%q) accepted", bad)
		}
	}
}

const shareAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func TestShareCookie(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	sh := store.Share{ID: "00112233aabbccdd", PasswordHash: "$argon2id$one"}
	now := time.Unix(1_800_000_000, 0)
	exp := now.Add(shareCookieTTL).Unix()
	v := []byte(shareCookieValue(key, &sh, exp))
	if !shareCookieValid(key, &sh, v, now) {
		t.Fatalf("a fresh cookie %q is refused", v)
	}
	other := sh
	other.ID = "ffffffffffffffff"
	rehashed := sh
	rehashed.PasswordHash = "$argon2id$two"
	cases := []struct {
		name string
		key  []byte
		sh   *store.Share
		v    []byte
		at   time.Time
	}{
		{"expired", key, &sh, v, now.Add(shareCookieTTL)},
		{"another share", key, &other, v, now},
		{"another password hash", key, &rehashed, v, now},
		{"another cluster key", []byte("another key"), &sh, v, now},
		{"no key", nil, &sh, v, now},
		{"far future expiry", key, &sh, []byte(shareCookieValue(key, &sh, now.Add(30*24*time.Hour).Unix())), now},
		{"a changed expiry", key, &sh, []byte(strings.Replace(string(v), "v1.1", "v1.2", 1)), now},
		{"garbage", key, &sh, []byte("v1.x.y"), now},
	}
	for _, c := range cases {
		if shareCookieValid(c.key, c.sh, c.v, c.at) {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

func TestParseSharesPath(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/sites/s1/shares":          "site s1 ",
		"/v1/sites/s1/shares/00ff":     "site s1 00ff",
		"/v1/links/abc/shares":         "link abc ",
		"/v1/links/abc/shares/0011":    "link abc 0011",
		"/v1/links/abc/sharesx":        "",
		"/v1/links/abc/shares/":        "",
		"/v1/links/abc/shares/a/b":     "",
		"/v1/links//shares":            "",
		"/v1/sites/s1/stats/shares":    "",
		"/v1/keys/shares":              "",
		"/v1/sites/s1/goals/shares/00": "",
	} {
		got := ""
		if st, ok := parseSharesPath(path); ok {
			got = st.kind.String() + " " + st.id + " " + st.sub
		}
		if got != want {
			t.Errorf("parseSharesPath(%q) = %q; want %q", path, got, want)
		}
	}
}

func TestShareAllows(t *testing.T) {
	site := ShareGrant{Share: store.Share{Kind: store.ShareSite, Target: "s1"}}
	link := ShareGrant{Share: store.Share{Kind: store.ShareLink, Target: "go.example/abc"}, Domain: "go.example", Code: "abc"}
	for _, c := range []struct {
		g    ShareGrant
		path string
		want bool
	}{
		{site, "/v1/sites/s1/stats/aggregate", true},
		{site, "/v1/sites/s1/stats/export", true},
		{site, "/v1/sites/s1/stats", false},
		{site, "/v1/sites/s1/stats/", false},
		{site, "/v1/sites/s1/stats/a/b", false},
		{site, "/v1/sites/s10/stats/aggregate", false},
		{site, "/v1/sites/s2/stats/aggregate", false},
		{site, "/v1/sites/s1", false},
		{site, "/v1/sites/s1/goals", false},
		{site, "/v1/links/abc/stats", false},
		{link, "/v1/links/abc/stats", true},
		{link, "/v1/links/abc/stats/breakdown", true},
		{link, "/v1/links/abc/statsx", false},
		{link, "/v1/links/abcd/stats", false},
		{link, "/v1/links/abc", false},
		{link, "/v1/links/abc/shares", false},
		{link, "/v1/sites/s1/stats/aggregate", false},
	} {
		g := c.g
		g.APIPath = c.path
		if got := shareAllows(&g); got != c.want {
			t.Errorf("%s share, %s: %v; want %v", g.Share.Kind, c.path, got, c.want)
		}
	}
}

// The token and the unlock cookie come from outside; their parsers must
// never panic and must accept only what the writers produce.
func FuzzParseShareToken(f *testing.F) {
	text, _, _ := NewShareToken()
	f.Add(text)
	f.Add("")
	f.Add(strings.Repeat("A", 22))
	f.Add(strings.Repeat("_", 22))
	f.Fuzz(func(t *testing.T, s string) {
		tok, ok := ParseShareToken(s)
		if ok && shareTokenEncoding.EncodeToString(tok[:]) != s {
			t.Fatalf("accepted %q, whose canonical text is another", s)
		}
	})
}

func FuzzParseShareCookie(f *testing.F) {
	key := []byte("k")
	sh := store.Share{ID: "00112233aabbccdd"}
	f.Add([]byte(shareCookieValue(key, &sh, 1_800_000_000)))
	f.Add([]byte("v1.."))
	f.Add([]byte("v1.9999999999999.AAAA"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		exp, mac, ok := parseShareCookie(v)
		if !ok {
			return
		}
		if exp < 0 || len(mac) != 32 {
			t.Fatalf("parsed %q as expiry %d, %d-byte MAC", v, exp, len(mac))
		}
		shareCookieValid(key, &sh, v, time.Unix(1_700_000_000, 0)) // must not panic
	})
}
