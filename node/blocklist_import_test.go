package node

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/waymark/waymark/store"
)

func values(es []importEntry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Value)
	}
	return out
}

func TestParseHostsFile(t *testing.T) {
	in := "# StevenBlack-style hosts\n" +
		"127.0.0.1 localhost\n" +
		"::1 ip6-localhost ip6-loopback\n" +
		"0.0.0.0 0.0.0.0\n" +
		"0.0.0.0 evil.example\n" +
		"0.0.0.0\tWWW.Evil.Example.  # trailing comment\n" +
		"127.0.0.1 a.bad.example b.bad.example\n" +
		"   \n" +
		"0.0.0.0 b\u00fccher.example\n" +
		"evil-without-address.example\n" +
		"nonsense here\n" +
		"0.0.0.0 bad..name\n"
	es, skips, err := parseBlockFile(formatHosts, strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"evil.example", "www.evil.example", "a.bad.example", "b.bad.example", "xn--bcher-kva.example"}
	if got := values(es); !reflect.DeepEqual(got, want) {
		t.Errorf("entries %q; want %q", got, want)
	}
	if es[0].Line != 5 || es[4].Line != 9 {
		t.Errorf("lines %d, %d; want 5, 9", es[0].Line, es[4].Line)
	}
	var lines []int
	for _, s := range skips {
		lines = append(lines, s.Line)
	}
	if !reflect.DeepEqual(lines, []int{10, 11, 12}) {
		t.Errorf("skipped lines %v (%+v); want [10 11 12]", lines, skips)
	}
}

func TestParseDomainsFile(t *testing.T) {
	in := "evil.example\n# comment\n*.Wild.Example\n10.0.0.1\n[::ffff:10.0.0.2]\n192.0.2.0/24\n\ntwo words\nhttp://x.example/\n.dot.example\n"
	es, skips, err := parseBlockFile(formatDomains, strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"evil.example", "wild.example", "10.0.0.1", "10.0.0.2", "192.0.2.0/24", "dot.example"}
	if got := values(es); !reflect.DeepEqual(got, want) {
		t.Errorf("entries %q; want %q", got, want)
	}
	if len(skips) != 2 || skips[0].Line != 8 || skips[1].Line != 9 {
		t.Errorf("skips %+v; want lines 8 and 9", skips)
	}
}

// The layout of abuse.ch's csv_recent export: a commented header, then
// quoted fields id, dateadded, url, url_status, last_online, threat,
// tags, urlhaus_link, reporter.
const urlhausSample = `################################################################
# abuse.ch URLhaus Database Dump (CSV - recent URLs)           #
# Last updated: 2026-12-01 21:00:08 (UTC)                      #
#                                                              #
# Terms Of Use: https://urlhaus.abuse.ch/api/                  #
################################################################
# id,dateadded,url,url_status,last_online,threat,tags,urlhaus_link,reporter
"3312001","2026-12-01 20:58:05","http://182.117.31.5:48522/i","online","2026-12-01 20:58:05","malware_download","32-bit,elf,mips,Mozi","https://urlhaus.abuse.ch/url/3312001/","geenensp"
"3312000","2026-12-01 20:57:09","https://Malware.Example.:8443/a,b.exe?x=""1""","online","2026-12-01 20:57:09","malware_download","exe","https://urlhaus.abuse.ch/url/3312000/","abuse_ch"
"3311999","2026-12-01 20:55:00","http://[2001:db8::bad]/x","offline","","malware_download","","https://urlhaus.abuse.ch/url/3311999/","x"
"3311998","2026-12-01 20:54:00","not a url","online","","malware_download","","https://urlhaus.abuse.ch/url/3311998/","x"
"3311997","2026-12-01 20:53:00","http://[::ffff:10.0.0.1]/","online","","phishing","","",""
`

func TestParseURLhaus(t *testing.T) {
	es, skips, err := parseBlockFile(formatURLhaus, strings.NewReader(urlhausSample))
	if err != nil {
		t.Fatal(err)
	}
	// Line 11's url field is no URL: skipped, not replaced by its
	// urlhaus_link (which would block abuse.ch itself).
	want := []string{"182.117.31.5", "malware.example", "2001:db8::bad", "10.0.0.1"}
	if got := values(es); !reflect.DeepEqual(got, want) {
		t.Errorf("entries %q; want %q", got, want)
	}
	if es[0].Reason != "urlhaus: malware_download" || es[3].Reason != "urlhaus: phishing" {
		t.Errorf("reasons %q, %q", es[0].Reason, es[3].Reason)
	}
	if es[0].Line != 8 || es[1].Line != 9 {
		t.Errorf("lines %d, %d; want 8, 9", es[0].Line, es[1].Line)
	}
	if len(skips) != 1 || skips[0].Line != 11 {
		t.Errorf("skips %+v; want line 11", skips)
	}
}

func TestDedupeImport(t *testing.T) {
	in := []importEntry{{Value: "a.example", Line: 1}, {Value: "b.example", Line: 2}, {Value: "a.example", Line: 3}}
	got := dedupeImport(in)
	if len(got) != 2 || got[0].Line != 1 || got[1].Value != "b.example" {
		t.Errorf("dedupe: %+v", got)
	}
}

// checkImport is what every parser promises: entries are canonical and
// carry a line inside the input.
func checkImport(t *testing.T, data []byte, es []importEntry, skips []importSkip) {
	lines := bytes.Count(data, []byte("\n")) + 1
	for _, e := range es {
		if v, err := store.ParseBlockEntry(e.Value); err != nil || v != e.Value {
			t.Fatalf("entry %q is not canonical (%q, %v)", e.Value, v, err)
		}
		if e.Line < 1 || e.Line > lines {
			t.Fatalf("entry %q on line %d of %d", e.Value, e.Line, lines)
		}
		if store.CheckBlockReason(e.Reason) != nil {
			t.Fatalf("entry %q has a reason the store refuses: %q", e.Value, e.Reason)
		}
	}
	for _, s := range skips {
		if s.Line < 0 || s.Line > lines+1 {
			t.Fatalf("skip on line %d of %d: %s", s.Line, lines, s.Msg)
		}
	}
}

func FuzzParseHostsFile(f *testing.F) {
	f.Add([]byte("0.0.0.0 evil.example\n127.0.0.1 localhost\n# c\n::1 a.example b.example # x\n"))
	f.Add([]byte("0.0.0.0 b\u00fccher.example\r\n0.0.0.0 10.1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, skips, err := parseBlockFile(formatHosts, bytes.NewReader(data))
		if err == nil {
			checkImport(t, data, es, skips)
		}
	})
}

func FuzzParseDomainsFile(f *testing.F) {
	f.Add([]byte("evil.example\n*.wild.example\n10.0.0.0/8\n[::ffff:10.0.0.1]\n"))
	f.Add([]byte("# only a comment\n\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, skips, err := parseBlockFile(formatDomains, bytes.NewReader(data))
		if err == nil {
			checkImport(t, data, es, skips)
		}
	})
}

func FuzzParseURLhaus(f *testing.F) {
	f.Add([]byte(urlhausSample))
	f.Add([]byte(`"1","d","http://a.example/","online","","phishing"` + "\n" + `"2,"x`))
	f.Add([]byte("\"unterminated\n# comment\n\"x\",\"https://b.example\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, skips, err := parseBlockFile(formatURLhaus, bytes.NewReader(data))
		if err == nil {
			checkImport(t, data, es, skips)
		}
	})
}
