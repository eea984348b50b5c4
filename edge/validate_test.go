package edge

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestParseDestination(t *testing.T) {
	long := "https://example.com/" + strings.Repeat("a", maxURLLen-len("https://example.com/"))
	tests := []struct {
		in      string
		want    string // normalised URL; empty when an error is expected
		wantErr string // substring of the error
	}{
		{in: "https://example.com/path", want: "https://example.com/path"},
		{in: "HTTPS://EXAMPLE.COM/Path?Q=A#Frag", want: "https://example.com/Path?Q=A#Frag"},
		{in: "Http://Example.com", want: "http://example.com"},
		{in: "http://example.com:80/a", want: "http://example.com/a"},
		{in: "https://example.com:443", want: "https://example.com"},
		{in: "https://example.com:0443/", want: "https://example.com/"},
		{in: "https://example.com:8443/", want: "https://example.com:8443/"},
		{in: "http://example.com:443/", want: "http://example.com:443/"},
		{in: "https://example.com:/x", want: "https://example.com/x"},
		{in: "https://[2001:DB8::1]:443/x", want: "https://[2001:db8::1]/x"},
		{in: "http://[::1]:8080/", want: "http://[::1]:8080/"},
		{in: "http://127.0.0.1:9000/a", want: "http://127.0.0.1:9000/a"},
		{in: "https://example.com/a%2Fb/c+d?q=a+b&x=%E2%9C%93#frag%20ment", want: "https://example.com/a%2Fb/c+d?q=a+b&x=%E2%9C%93#frag%20ment"},
		{in: "https://example.com/%7euser/A%2fb/%zz", want: "https://example.com/%7euser/A%2fb/%zz"},
		{in: "https://example.com?x=1", want: "https://example.com?x=1"},
		{in: "https://example.com#top", want: "https://example.com#top"},
		{in: "https://example.com/caf\u00e9?q=\u2713", want: "https://example.com/caf\u00e9?q=\u2713"},
		{in: "https://M\u00fcnchen.de/stra\u00dfe", want: "https://xn--mnchen-3ya.de/stra\u00dfe"},
		{in: "https://example.com./", want: "https://example.com./"},
		{in: "https://my_host.example/", want: "https://my_host.example/"},
		{in: long, want: long},

		{in: "", wantErr: "required"},
		{in: long + "a", wantErr: "limit is 2048"},
		{in: "ftp://example.com/", wantErr: `scheme "ftp" is not allowed`},
		{in: "javascript:alert(1)", wantErr: `scheme "javascript" is not allowed`},
		{in: "data:text/html,hi", wantErr: "not allowed"},
		{in: "example.com", wantErr: "absolute"},
		{in: "example.com:8080/x", wantErr: "absolute"},
		{in: "//example.com/", wantErr: "absolute"},
		{in: "/path", wantErr: "absolute"},
		{in: "https:/example.com", wantErr: "absolute"},
		{in: "https://", wantErr: "no host"},
		{in: "https:///path", wantErr: "no host"},
		{in: "https://user@example.com/", wantErr: "user info"},
		{in: "https://user:pw@example.com/", wantErr: "user info"},
		{in: "https://good.com\\@evil.com/", wantErr: "user info"},
		{in: "https://evil.com\\.good.com/", wantErr: "cannot contain"},
		{in: "https://exa mple.com/", wantErr: "space"},
		{in: "https://example.com/a b", wantErr: "space"},
		{in: " https://example.com/", wantErr: "space"},
		{in: "https://example.com/\n", wantErr: "control"},
		{in: "https://example.com:99999/", wantErr: "port"},
		{in: "https://example.com:0/", wantErr: "port"},
		{in: "https://example.com:8a/", wantErr: "port"},
		{in: "https://[fe80::1%25eth0]/", wantErr: "zone"},
		{in: "https://[1.2.3.4]/", wantErr: "IPv6"},
		{in: "https://[::1/", wantErr: "closing"},
		{in: "https://[::1]x/", wantErr: "after its IPv6"},
		{in: "https://::1/", wantErr: "brackets"},
		{in: "https://256.1.1.1/", wantErr: "IPv4"},
		{in: "https://0x7f.1/", want: "https://127.0.0.1/"},
		{in: "http://2130706433:8080/a", want: "http://127.0.0.1:8080/a"},
		{in: "http://[::FFFF:10.0.0.1]/", want: "http://[::ffff:10.0.0.1]/"},
		{in: "http://[2001:DB8:0:0::BAD]/", want: "http://[2001:db8::bad]/"},
		{in: "https://08.0.0.1/", wantErr: "IPv4"},
		{in: "https://exa..mple.com/", wantErr: "not a valid host"},
		{in: "https://exa%41mple.com/", wantErr: "cannot contain"},
		{in: "https://" + strings.Repeat("a", 64) + ".com/", wantErr: "not a valid host"},
		{in: "https://example.com/\xff", wantErr: "UTF-8"},
	}
	for _, tt := range tests {
		d, err := parseDestination(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseDestination(%q): got %q, %v; want error containing %q", tt.in, d.url, err, tt.wantErr)
			}
			continue
		}
		if err != nil || d.url != tt.want {
			t.Errorf("parseDestination(%q): got %q, %v; want %q", tt.in, d.url, err, tt.want)
		}
	}
}

func TestDestinationHostPort(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://Example.com/x", "example.com:443"},
		{"http://example.com./x", "example.com:80"},
		{"http://127.0.0.1:8080/", "127.0.0.1:8080"},
		{"https://[::1]/", "[::1]:443"},
	}
	for _, tt := range tests {
		d, err := parseDestination(tt.in)
		if err != nil || d.hostPort() != tt.want {
			t.Errorf("hostPort(%q): got %q, %v; want %q", tt.in, d.hostPort(), err, tt.want)
		}
	}
}

func TestCheckAlias(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Routes = map[string]fasthttp.RequestHandler{"/Promo/x": func(*fasthttp.RequestCtx) {}}
	})
	tests := []struct {
		alias       string
		ok          bool
		unavailable bool
	}{
		{alias: "abc", ok: true},
		{alias: "My_Link-2026", ok: true},
		{alias: strings.Repeat("x", 32), ok: true},
		{alias: "abc-efg", ok: true}, // 7 characters, but not all base62
		{alias: "abcdefgh", ok: true},
		{alias: "ab"},
		{alias: strings.Repeat("x", 33)},
		{alias: "a.b.c"},
		{alias: "caf\u00e9"},
		{alias: "with space"},
		{alias: "robots.txt"},
		{alias: "api", unavailable: true},
		{alias: "API", unavailable: true},
		{alias: "Healthz", unavailable: true},
		{alias: "dashboard", unavailable: true},
		{alias: "METRICS", unavailable: true},
		{alias: "promo", unavailable: true}, // first segment of a configured route
		{alias: "abcdefg", unavailable: true},
		{alias: "ABC1234", unavailable: true},
	}
	for _, tt := range tests {
		err := e.srv.checkAlias(tt.alias)
		if tt.ok {
			if err != nil {
				t.Errorf("checkAlias(%q): got %v; want ok", tt.alias, err)
			}
			continue
		}
		ae, isAlias := err.(*aliasError)
		if !isAlias || ae.unavailable != tt.unavailable {
			t.Errorf("checkAlias(%q): got %#v; want aliasError{unavailable: %v}", tt.alias, err, tt.unavailable)
		}
	}
}

func FuzzNormalizeURL(f *testing.F) {
	for _, s := range []string{
		"https://example.com/a%2Fb?q=1#x", "HTTP://EXAMPLE.COM:80", "https://[::1]:443/",
		"https://user@host/", "ftp://x", "https://M\u00fcnchen.de/", "https://0x7f.1/",
		"https://a..b/", "http://1.2.3.4:65535/", "https://xn--mnchen-3ya.de/", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		d, err := parseDestination(raw)
		if err != nil {
			return
		}
		if len(d.url) > maxURLLen {
			t.Fatalf("parseDestination(%q) = %q: longer than %d", raw, d.url, maxURLLen)
		}
		again, err := parseDestination(d.url)
		if err != nil {
			t.Fatalf("parseDestination(%q) = %q, which does not validate: %v", raw, d.url, err)
		}
		if again.url != d.url {
			t.Fatalf("parseDestination(%q) = %q, but that normalises to %q", raw, d.url, again.url)
		}
	})
}

func TestOwnDestination(t *testing.T) {
	st := openStore(t)
	w := newTestWriter(t, st)
	tests := []struct {
		public string
		dest   string
		own    bool
	}{
		{"https://wm.example", "https://wm.example/abc", true},
		{"https://wm.example", "http://WM.example./abc", true},
		{"https://wm.example", "https://wm.example:8443/abc", true},
		{"https://wm.example", "https://www.wm.example/abc", false},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/abc", true},
		{"http://127.0.0.1:8080", "https://127.0.0.1:8080/abc", true},
		{"http://127.0.0.1:8080", "http://127.0.0.1:9090/abc", true}, // loopback on any port
		{"http://127.0.0.1:8080", "http://127.0.0.1/abc", true},
		{"http://wm.example:8080", "http://wm.example:9090/abc", false}, // an explicit port: other ports are other services
		{"http://wm.example:8080", "http://WM.Example.:8080/abc", true},
		{"https://wm.example", "https://203.0.113.9/", false},
	}
	for _, tt := range tests {
		srv, err := New(Config{PublicURL: tt.public, Logger: discardLogger()}, st, w)
		if err != nil {
			t.Fatal(err)
		}
		d, err := parseDestination(tt.dest)
		if err != nil {
			t.Fatal(err)
		}
		if got := srv.isOwnDestination(d); got != tt.own {
			t.Errorf("public %s, destination %s: own %v; want %v", tt.public, tt.dest, got, tt.own)
		}
	}
}
