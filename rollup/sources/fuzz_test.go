package sources

import (
	"strings"
	"testing"
)

// FuzzSource checks the host matcher on arbitrary input: no panic, the
// same answer twice, and an answer that is a known name or made of the
// input (so a source never invents text or grows past its input).
func FuzzSource(f *testing.F) {
	for _, s := range []string{
		"", ".", "..", "www.", "www.google.co.uk", "m.facebook.com", "t.co",
		"a.b.c.d.e.f.g.h", "example.com:8080", "[::1]:80", "::1", "GOOGLE.COM.",
		"android-app://", "android-app://www.x", "android-app://com.reddit.frontpage",
		"xn--bcher-kva.example", "ＧＯＯＧＬＥ.com", "\xff\xfe", strings.Repeat("a.", 200),
	} {
		f.Add(s, "")
		f.Add("", s)
	}
	names := knownNames()
	f.Fuzz(func(t *testing.T, host, utm string) {
		got := Source(host, utm)
		if again := Source(host, utm); again != got {
			t.Fatalf("Source(%q, %q) = %q, then %q", host, utm, got, again)
		}
		if got == "" || names[got] {
			return
		}
		in := utm
		if utm == "" {
			in = host
		}
		if strings.Contains(in, got) {
			return
		}
		// An unknown app referrer loses a leading www. after its prefix.
		if rest, ok := strings.CutPrefix(got, androidApp); ok && strings.Contains(in, rest) && len(got) <= len(in) {
			return
		}
		t.Fatalf("Source(%q, %q) = %q: neither a known name nor part of the input", host, utm, got)
	})
}

// FuzzChannel checks that every input gets one of the listed channels.
func FuzzChannel(f *testing.F) {
	f.Add("Google", "google", "cpc", "spring", "gclid")
	f.Add("", "", "", "", "")
	f.Add("x", "sms", "push\n", "shop\n", "msclkid")
	valid := map[string]bool{}
	for _, c := range Channels {
		valid[c] = true
	}
	f.Fuzz(func(t *testing.T, source, utmSource, medium, campaign, clickID string) {
		utm := UTM{Source: utmSource, Medium: medium, Campaign: campaign}
		got := Channel(source, utm, clickID)
		if !valid[got] {
			t.Fatalf("Channel(%q, %+v, %q) = %q: not a channel", source, utm, clickID, got)
		}
		if again := Channel(source, utm, clickID); again != got {
			t.Fatalf("Channel gave %q, then %q", got, again)
		}
	})
}

func knownNames() map[string]bool {
	t := load()
	names := map[string]bool{}
	for _, n := range t.hosts {
		names[n] = true
	}
	for _, n := range t.names {
		names[n] = true
	}
	return names
}
