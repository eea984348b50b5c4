package store

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseDomainName(t *testing.T) {
	for in, want := range map[string]string{
		"go.acme.com":      "go.acme.com",
		"Go.ACME.com.":     "go.acme.com",
		"bücher.example":   "xn--bcher-kva.example",
		"xn--bcher-kva.ex": "xn--bcher-kva.ex",
		"a-b.c-d.example":  "a-b.c-d.example",
		"123.example":      "123.example",
		"ＧＯ.ａｃｍｅ.ｃｏｍ":      "go.acme.com", // fullwidth, mapped by UTS #46
	} {
		got, err := ParseDomainName(in)
		if err != nil || got != want {
			t.Errorf("ParseDomainName(%q) = %q, %v; want %q", in, got, err, want)
		}
		if err := CheckDomainName(want); err != nil {
			t.Errorf("CheckDomainName(%q): %v", want, err)
		}
	}
	for in, why := range map[string]string{
		"":                                "empty",
		"go.acme.com:8080":                "port",
		"127.0.0.1":                       "IP address",
		"0x7f.1":                          "IP address",
		"[::1]":                           "IP address",
		"::1":                             "IP address",
		"localhost":                       "single label",
		"https://go.acme.com":             "bare host name",
		"go.acme.com/x":                   "bare host name",
		"go acme.com":                     "bare host name",
		"-go.acme.com":                    "label",
		"go-.acme.com":                    "label",
		"a_b.acme.com":                    "label",
		"a..b":                            "not a valid host name",
		"a.b\xff":                         "not a valid host name",
		strings.Repeat("a.", 112) + "com": "longer than",
	} {
		if _, err := ParseDomainName(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseDomainName(%q): %v; want an error saying %q", in, err, why)
		}
	}
	if err := CheckDomainName("Go.acme.com"); err == nil {
		t.Error("CheckDomainName accepted a name not in canonical form")
	}
}

// FuzzParseDomainName: never panics; what it accepts is canonical (a
// second parse gives it back) and a valid link identifier prefix.
func FuzzParseDomainName(f *testing.F) {
	for _, s := range []string{"go.acme.com", "Go.Acme.com.", "bücher.example", "1.2.3.4", "[::1]:80", "a.b:8", "xn--", "a..b", "ＧＯ.ａｃｍｅ.ｃｏｍ", "a.b/c", "\x00.x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		name, err := ParseDomainName(raw)
		if err != nil {
			return
		}
		if again, err := ParseDomainName(name); err != nil || again != name {
			t.Fatalf("ParseDomainName(%q) = %q, but again %q, %v", raw, name, again, err)
		}
		if len(name) > MaxDomainLen || strings.ContainsAny(name, "/:[]") || EndsInNumber(name) {
			t.Fatalf("ParseDomainName(%q) = %q: not a custom domain", raw, name)
		}
		if d, c := SplitLinkID(LinkID(name, "abc")); d != name || c != "abc" {
			t.Fatalf("identifier of %q splits as %q %q", name, d, c)
		}
	})
}

var sampleDomains = []Domain{
	{Name: "go.acme.com", Owner: "o1", Status: DomainPending, CreatedAt: 1_700_000_000_000, UpdatedAt: 1_700_000_000_000},
	{Name: "xn--bcher-kva.example", Owner: "o2", Status: DomainApproved, CreatedAt: 1, ApprovedAt: 2, UpdatedAt: 2},
	{Name: "a.example", Owner: "o3", Status: DomainDeleted, CreatedAt: 1, UpdatedAt: 5},
}

func TestDomainRecordRoundTrip(t *testing.T) {
	for _, d := range sampleDomains {
		var got Domain
		if err := DecodeDomain(AppendDomain(nil, &d), &got); err != nil || got != d {
			t.Errorf("round trip of %+v: %+v, %v", d, got, err)
		}
	}
	for name, d := range map[string]Domain{
		"approved without time": {Name: "a.example", Owner: "o", Status: DomainApproved},
		"pending with time":     {Name: "a.example", Owner: "o", ApprovedAt: 3},
		"no owner":              {Name: "a.example"},
		"not canonical":         {Name: "A.example", Owner: "o"},
		"unknown status":        {Name: "a.example", Owner: "o", Status: 3},
	} {
		var got Domain
		if err := DecodeDomain(AppendDomain(nil, &d), &got); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v; want ErrCorrupt", name, err)
		}
	}
}

func FuzzDecodeDomain(f *testing.F) {
	for i := range sampleDomains {
		b := AppendDomain(nil, &sampleDomains[i])
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(append(bytes.Clone(b), 0))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Domain
		if err := DecodeDomain(b, &d); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode %x: %v; want ErrCorrupt", b, err)
			}
			return
		}
		if again := AppendDomain(nil, &d); !bytes.Equal(again, b) {
			t.Fatalf("decode %x = %+v re-encodes as %x", b, d, again)
		}
	})
}

// TestUpdateDomain walks a domain through its life on real Pebble: who
// may register, approve, delete and create links on it, and the approved
// set the redirect path reads.
func TestUpdateDomain(t *testing.T) {
	st := newTestStore(t)
	index := uint64(0)
	apply := func(ch DomainChange) (Domain, error) {
		t.Helper()
		b := st.NewBatch()
		defer b.Close()
		ch.At = 1000 + int64(index)
		d, err := b.UpdateDomain(&ch)
		if err != nil {
			return d, err
		}
		index++
		if err := b.Commit(index); err != nil {
			t.Fatal(err)
		}
		return d, nil
	}
	create := func(l Link) error {
		t.Helper()
		b := st.NewBatch()
		defer b.Close()
		l.Redirect, l.Index = 302, index+1
		if err := b.CreateLink(&l); err != nil {
			return err
		}
		index++
		return b.Commit(index)
	}
	approved := func(name string) bool { _, ok := st.ApprovedDomains().Owner([]byte(name)); return ok }

	d, err := apply(DomainChange{Op: DomainRegister, Name: "go.acme.com", Owner: "alice"})
	if err != nil || d.Status != DomainPending || d.Owner != "alice" {
		t.Fatalf("register: %+v %v", d, err)
	}
	if _, err := apply(DomainChange{Op: DomainRegister, Name: "go.acme.com", Owner: "bob"}); !errors.Is(err, ErrDomainTaken) {
		t.Fatalf("bob registers alice's: %v", err)
	}
	if err := create(Link{Code: "go.acme.com/launch", URL: "u", Owner: "alice"}); !errors.Is(err, ErrDomainNotApproved) {
		t.Fatalf("create on pending: %v", err)
	}
	if approved("go.acme.com") {
		t.Fatal("pending domain in the approved set")
	}
	if d, err = apply(DomainChange{Op: DomainApprove, Name: "go.acme.com"}); err != nil || d.Status != DomainApproved || d.ApprovedAt == 0 {
		t.Fatalf("approve: %+v %v", d, err)
	}
	if !approved("go.acme.com") {
		t.Fatal("approved domain not in the set")
	}
	if err := create(Link{Code: "go.acme.com/launch", URL: "u", Owner: "bob"}); !errors.Is(err, ErrDomainNotOwned) {
		t.Fatalf("bob creates on alice's: %v", err)
	}
	if err := create(Link{Code: "unknown.example/launch", URL: "u", Owner: "bob"}); !errors.Is(err, ErrDomainNotOwned) {
		t.Fatalf("create on unknown: %v", err)
	}
	for _, code := range []string{"go.acme.com/launch", "launch"} {
		if err := create(Link{Code: code, URL: "u-" + code, Owner: "alice"}); err != nil {
			t.Fatalf("create %s: %v", code, err)
		}
	}
	if err := create(Link{Code: "go.acme.com/launch", URL: "u", Owner: "alice"}); !errors.Is(err, ErrCodeTaken) {
		t.Fatalf("second go.acme.com/launch: %v", err)
	}
	for _, code := range []string{"go.acme.com/launch", "launch"} {
		var l Link
		if found, err := st.GetLink([]byte(code), &l); err != nil || !found || l.URL != "u-"+code || l.Code != code {
			t.Fatalf("get %s: %+v %v %v", code, l, found, err)
		}
	}
	links, _, err := st.ListLinks("alice", "", 10)
	if err != nil || len(links) != 2 || links[0].Code != "launch" || links[1].Domain() != "go.acme.com" || links[1].ShortCode() != "launch" {
		t.Fatalf("list: %+v %v", links, err)
	}

	if _, err := apply(DomainChange{Op: DomainAdd, Name: "b.example", Owner: "bob"}); err != nil {
		t.Fatal(err)
	}
	ds, err := st.OwnerDomains("alice")
	if err != nil || len(ds) != 1 || ds[0].Name != "go.acme.com" {
		t.Fatalf("alice's domains: %+v %v", ds, err)
	}
	if _, err := apply(DomainChange{Op: DomainDelete, Name: "go.acme.com", Owner: "bob"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob deletes alice's: %v", err)
	}
	if _, err := apply(DomainChange{Op: DomainDelete, Name: "go.acme.com", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if approved("go.acme.com") || !approved("b.example") || st.ApprovedDomains().Len() != 1 {
		t.Fatal("approved set after the delete")
	}
	if ds, _ := st.OwnerDomains("alice"); len(ds) != 0 {
		t.Fatalf("alice's domains after delete: %+v", ds)
	}
	// A deleted domain stays alice's.
	if _, err := apply(DomainChange{Op: DomainAdd, Name: "go.acme.com", Owner: "bob"}); !errors.Is(err, ErrDomainTaken) {
		t.Fatalf("operator gives a deleted domain to bob: %v", err)
	}
	if d, err := apply(DomainChange{Op: DomainRegister, Name: "go.acme.com", Owner: "alice"}); err != nil || d.Status != DomainPending {
		t.Fatalf("alice registers again: %+v %v", d, err)
	}
	// The approved set survives a reopen.
	dir := st.dir
	closeStore(t, st)
	st2 := openStore(t, dir)
	if want := map[string]string{"b.example": "bob"}; !reflect.DeepEqual(st2.ApprovedDomains().owners, want) {
		t.Fatalf("after reopen: %v; want %v", st2.ApprovedDomains().owners, want)
	}
}
