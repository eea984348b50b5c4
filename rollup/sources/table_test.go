package sources

import (
	"strings"
	"testing"
)

func TestEmbeddedDataLoads(t *testing.T) {
	tb, err := build(referersTxt, overridesTxt)
	if err != nil {
		t.Fatal(err)
	}
	// The packaged database has 1548 hosts (see the header of
	// data/referers.txt); a parse that silently drops lines would show here.
	if n := strings.Count(referersTxt, "\n") - strings.Count(referersTxt, "#"); n < 250 {
		t.Fatalf("referers.txt has %d source lines; want the whole database", n)
	}
	if len(tb.hosts) < 1548 {
		t.Errorf("%d hosts loaded; want at least the database's 1548", len(tb.hosts))
	}
	// Every override host resolves to its own name through Source.
	section := ""
	for _, line := range strings.Split(overridesTxt, "\n") {
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		if section != "[hosts]" || line == "" || line[0] == '#' {
			continue
		}
		host, name, _ := strings.Cut(line, "\t")
		name = strings.TrimLeft(name, "\t")
		if got := Source(host, ""); got != tb.canonical(name) {
			t.Errorf("Source(%q) = %q; want the override %q", host, got, name)
		}
	}
}

func TestBuildRejectsBadData(t *testing.T) {
	good := "s\tGoogle\tgoogle.com\n"
	tests := []struct{ name, referers, overrides string }{
		{"no hosts", "# only a comment\n", ""},
		{"two fields", "s\tGoogle\n", ""},
		{"unknown medium", "z\tGoogle\tgoogle.com\n", ""},
		{"no section", good, "x.com\tX\n"},
		{"upper-case key", good, "[hosts]\nX.com\tX\n"},
		{"no tab", good, "[aliases]\nfb Facebook\n"},
		{"unknown category", good, "[categories]\nfoo\tnews\n"},
		{"unknown section", good, "[other]\nfoo\tbar\n"},
		{"long alias", good, "[aliases]\n" + strings.Repeat("a", maxKey+1) + "\tA\n"},
	}
	for _, tt := range tests {
		if _, err := build(tt.referers, tt.overrides); err == nil {
			t.Errorf("%s: build accepted it", tt.name)
		}
	}
}

func TestBuildMediumRank(t *testing.T) {
	// A name listed under several media takes the first of search, social,
	// email, chatbot; paid and unknown give none.
	tb, err := build("u\tAcme\tsupport.acme.test\ne\tAcme\tmail.acme.test\ns\tAcme\tacme.test\np\tAds\tads.test\n", "")
	if err != nil {
		t.Fatal(err)
	}
	if c := tb.category("acme"); c != catSearch {
		t.Errorf("category(acme) = %d; want search", c)
	}
	if c := tb.category("mail.acme.test"); c != catEmail {
		t.Errorf("category(mail.acme.test) = %d; want email (the host's own medium)", c)
	}
	if c := tb.category("ads"); c != catNone {
		t.Errorf("category(ads) = %d; want none", c)
	}
}
