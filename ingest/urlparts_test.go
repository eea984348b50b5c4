package ingest

import "testing"

// TestReferrerHost: the host of a referrer, worked out by hand from each
// URL (scheme up to the first "://", user info up to the last '@', the
// port, path, query and fragment dropped, a leading "www." dropped in any
// case, IPv6 brackets removed); nil for what has no host.
func TestReferrerHost(t *testing.T) {
	for ref, want := range map[string]string{
		"https://news.example.com/story/1?id=2": "news.example.com",
		"https://WWW.Google.com/":               "Google.com", // lowercased by the caller
		"android-app://com.google.android.gm/":  "com.google.android.gm",
		"http://user:pw@host.example:8080/p":    "host.example",
		"https://a@b@c.example/d":               "c.example",
		"http://h.example?x#y":                  "h.example",
		"http://h.example#y/z":                  "h.example",
		"http://[2001:db8::1]:80/":              "2001:db8::1",
		"a:b://c.example":                       "c.example", // the first "://"
		"http://www.":                           "www.",      // nothing after www.
		"http://www.x":                          "x",
	} {
		if got := referrerHost([]byte(ref)); string(got) != want || got == nil {
			t.Errorf("referrerHost(%q) = %q; want %q", ref, got, want)
		}
	}
	for _, ref := range []string{"", "://x.example", "x.example/path", "http://[::1", "http://a b/", "http://a\"b/", "http://[]/"} {
		if got := referrerHost([]byte(ref)); len(got) != 0 {
			t.Errorf("referrerHost(%q) = %q; want nothing", ref, got)
		}
	}
}

// BenchmarkReferrerHost is the per-click cost on the serving goroutine.
func BenchmarkReferrerHost(b *testing.B) {
	refs := [][]byte{[]byte("https://news.example.com/story/1?id=2"), []byte("https://www.google.com/"),
		[]byte("android-app://com.google.android.gm/"), []byte("https://t.co/abc")}
	for i := 0; b.Loop(); i++ {
		referrerHost(refs[i&3])
	}
}

func TestUTMIndex(t *testing.T) {
	for i, n := range utmNames {
		if got := utmIndex(n); got != i {
			t.Errorf("utmIndex(%q) = %d; want %d", n, got, i)
		}
	}
	for _, n := range []string{"", "utm_", "utm_x", "UTM_source", "utm_sourcex", "xutm_term", "ref", "utm_terms"} {
		if got := utmIndex(n); got != -1 {
			t.Errorf("utmIndex(%q) = %d; want -1", n, got)
		}
	}
}
