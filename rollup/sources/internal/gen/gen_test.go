package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A small database in the upstream layout, written for this test.
const fixtureYAML = `# comment
unknown:

  Acme:
    domains:
      - support.acme.test

email:

  Acme Mail:
    domains:
      - mail.acme.test   # webmail

search:

  Acme:
    parameters:
      - q
    domains:
      - acme.test
      - www.acme.test
      - acme.test/images
      - ACME.example

  'Quoted Engine':
    domains:
      - quoted.test

  Acme:
    domains:
      - acme.test
      - acme2.test
`

func TestRenderYAML(t *testing.T) {
	db, err := parseYAML([]byte(fixtureYAML))
	if err != nil {
		t.Fatal(err)
	}
	out, err := render(db, "fixture")
	if err != nil {
		t.Fatal(err)
	}
	got := body(string(out))
	// Lines sort by medium letter, then name: e < s < u.
	want := "e\tAcme Mail\tmail.acme.test\n" +
		"s\tAcme\tacme.example acme.test acme2.test www.acme.test\n" +
		"s\tQuoted Engine\tquoted.test\n" +
		"u\tAcme\tsupport.acme.test\n"
	if got != want {
		t.Errorf("render =\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(string(out), "# From: fixture\n") || !strings.Contains(string(out), "1 domain entries with a path left out") {
		t.Errorf("header lacks provenance or the path count:\n%s", out)
	}
}

func TestJSONMatchesYAML(t *testing.T) {
	const js = `{"search": {"Acme": {"parameters": ["q"], "domains": ["acme.test", "www.acme.test"]}},
	             "social": {"Chirp": {"domains": ["chirp.test"]}}}`
	const yml = "search:\n  Acme:\n    parameters:\n      - q\n    domains:\n      - acme.test\n      - www.acme.test\nsocial:\n  Chirp:\n    domains:\n      - chirp.test\n"
	a, err := parseJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	b, err := parseYAML([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	ra, _ := render(a, "x")
	rb, _ := render(b, "x")
	if string(ra) != string(rb) {
		t.Errorf("JSON and YAML differ:\n%s\n%s", ra, rb)
	}
}

func TestHostConflicts(t *testing.T) {
	tests := []struct {
		yml, want string // want: the kept owner, or "" for an error
	}{
		{"unknown:\n  A:\n    domains:\n      - x.test\nsearch:\n  B:\n    domains:\n      - x.test\n", "s\tB\tx.test"},
		{"social:\n  Other:\n    domains:\n      - wayn.test\n  WAYN:\n    domains:\n      - wayn.test\n", "o\tWAYN\twayn.test"},
		{"social:\n  A:\n    domains:\n      - x.test\n  B:\n    domains:\n      - x.test\n", ""},
	}
	for _, tt := range tests {
		db, err := parseYAML([]byte(tt.yml))
		if err != nil {
			t.Fatal(err)
		}
		out, err := render(db, "x")
		if tt.want == "" {
			if err == nil {
				t.Errorf("render accepted an ambiguous host:\n%s", out)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), tt.want+"\n") || !strings.Contains(string(out), "# host under two sources") {
			t.Errorf("render =\n%s\nwant line %q and a note", out, tt.want)
		}
	}
}

func TestBadInput(t *testing.T) {
	for _, yml := range []string{
		"search:\n  A:\n   domains:\n",                 // odd indent
		"video:\n  A:\n    domains:\n      - a.test\n", // medium unknown to package sources
		"search:\n  A:\n    domains:\n      - 'a b.test'\n",
		"# nothing\n",
	} {
		db, err := parseYAML([]byte(yml))
		if err != nil {
			continue
		}
		if _, err := render(db, "x"); err == nil {
			t.Errorf("accepted %q", yml)
		}
	}
}

func TestRunWritesFile(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "referers.yml"), filepath.Join(dir, "referers.txt")
	if err := os.WriteFile(in, []byte(fixtureYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, out, "fixture"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "# Generated") || !strings.Contains(string(b), "s\tQuoted Engine\tquoted.test\n") {
		t.Errorf("unexpected output:\n%s", b)
	}
}

// body drops the header lines.
func body(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			b.WriteString(l)
		}
	}
	return b.String()
}
