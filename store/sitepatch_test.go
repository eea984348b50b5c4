package store

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

func mustSite(t *testing.T, s *Store, id string) Site {
	t.Helper()
	got, found, err := s.Site(id)
	if err != nil || !found {
		t.Fatalf("Site(%q) = %v, %v", id, found, err)
	}
	return got
}

// tryUpdate applies p in its own batch, committing only on success.
func tryUpdate(t *testing.T, s *Store, index uint64, p SitePatch) (Site, error) {
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	got, err := b.UpdateSite(&p)
	if err != nil {
		return got, err
	}
	if err := b.Commit(index); err != nil {
		t.Fatal(err)
	}
	return got, nil
}

func TestUpdateSite(t *testing.T) {
	s := newTestStore(t)
	base := Site{ID: "s1", Domain: "a.example", Timezone: "UTC", Owner: "alice", CreatedAt: 7}
	apply(t, s, 1, func(b *Batch) error { return b.PutSite(&base) })
	signup := Goal{ID: "g1", EventName: "Signup", DisplayName: "Signup"}
	blog := Goal{ID: "g2", PagePath: "/blog/*", DisplayName: "Visit /blog/*"}

	got, err := tryUpdate(t, s, 2, SitePatch{SiteID: "s1", Owner: "alice", SetTimezone: true, Timezone: "Europe/Berlin", SetIgnoreDNT: true, IgnoreDNT: true})
	want := base
	want.Timezone, want.IgnoreDNT = "Europe/Berlin", true
	if err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(mustSite(t, s, "s1"), want) {
		t.Fatalf("settings: got %+v, %v; want %+v", got, err, want)
	}
	for i, g := range []Goal{signup, blog} {
		if _, err := tryUpdate(t, s, uint64(3+i), SitePatch{SiteID: "s1", Owner: "alice", AddGoal: &g}); err != nil {
			t.Fatalf("add goal %s: %v", g.ID, err)
		}
	}
	want.Goals = []Goal{signup, blog}
	if got := mustSite(t, s, "s1"); !reflect.DeepEqual(got, want) {
		t.Fatalf("after two goals: got %+v; want %+v", got, want)
	}
	if g, ok := want.Goal("g2"); !ok || g != blog {
		t.Errorf("Site.Goal(g2) = %+v, %v", g, ok)
	}

	// Every refusal leaves the stored record exactly as it was.
	before, _, _ := s.Site("s1")
	for name, tc := range map[string]struct {
		p    SitePatch
		want error
	}{
		"another owner":     {SitePatch{SiteID: "s1", Owner: "bob", SetIgnoreDNT: true}, ErrNotFound},
		"unknown site":      {SitePatch{SiteID: "nope", Owner: "alice", SetIgnoreDNT: true}, ErrNotFound},
		"duplicate id":      {SitePatch{SiteID: "s1", AddGoal: &Goal{ID: "g1", EventName: "Other", DisplayName: "Other"}}, ErrGoalExists},
		"duplicate event":   {SitePatch{SiteID: "s1", AddGoal: &Goal{ID: "g3", EventName: "Signup", DisplayName: "Signups"}}, ErrGoalExists},
		"duplicate path":    {SitePatch{SiteID: "s1", AddGoal: &Goal{ID: "g3", PagePath: "/blog/*", DisplayName: "Blog"}}, ErrGoalExists},
		"duplicate display": {SitePatch{SiteID: "s1", AddGoal: &Goal{ID: "g3", EventName: "Buy", DisplayName: "Visit /blog/*"}}, ErrGoalExists},
		"unknown goal":      {SitePatch{SiteID: "s1", DeleteGoal: "g9"}, ErrNotFound},
		"invalid goal":      {SitePatch{SiteID: "s1", AddGoal: &Goal{ID: "g3", EventName: "engagement", DisplayName: "engagement"}}, ErrInvalidSiteEdit},
		"empty patch":       {SitePatch{SiteID: "s1"}, ErrInvalidSiteEdit},
		"empty time zone":   {SitePatch{SiteID: "s1", SetTimezone: true}, ErrInvalidSiteEdit},
	} {
		if _, err := tryUpdate(t, s, 10, tc.p); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v; want %v", name, err, tc.want)
		}
		if got := mustSite(t, s, "s1"); !reflect.DeepEqual(got, before) {
			t.Fatalf("%s changed the site: %+v; want %+v", name, got, before)
		}
	}

	// An operator edit (no owner) applies to any site.
	if _, err := tryUpdate(t, s, 11, SitePatch{SiteID: "s1", SetIgnoreDNT: true, IgnoreDNT: false}); err != nil {
		t.Fatalf("operator edit: %v", err)
	}
	// Deleting keeps the order of the rest; deleting the last goal of a
	// site without settings writes a version 1 record again.
	if _, err := tryUpdate(t, s, 12, SitePatch{SiteID: "s1", Owner: "alice", DeleteGoal: "g1"}); err != nil {
		t.Fatal(err)
	}
	if got := mustSite(t, s, "s1"); !reflect.DeepEqual(got.Goals, []Goal{blog}) {
		t.Fatalf("after delete: goals %+v; want [%+v]", got.Goals, blog)
	}
	if _, err := tryUpdate(t, s, 13, SitePatch{SiteID: "s1", Owner: "alice", DeleteGoal: "g2"}); err != nil {
		t.Fatal(err)
	}
	raw := rawValue(t, s, siteKey("s1"))
	if raw[0] != siteVersion1 || mustSite(t, s, "s1").Goals != nil {
		t.Errorf("site with no goals and default settings: version %d, goals %v; want version 1, nil", raw[0], mustSite(t, s, "s1").Goals)
	}
	// The domain index is untouched by edits.
	if id, found, err := s.NewBatch().SiteIDByDomain("a.example"); err != nil || !found || id != "s1" {
		t.Errorf("domain index: %q %v %v", id, found, err)
	}
}

func TestUpdateSiteGoalLimit(t *testing.T) {
	s := newTestStore(t)
	apply(t, s, 1, func(b *Batch) error { return b.PutSite(&Site{ID: "s1", Domain: "a.example", Owner: "o"}) })
	b := s.NewBatch()
	defer b.Close()
	// Goals added in one batch see each other (the FSM applies a raft
	// batch through one Batch).
	for i := range MaxGoals {
		g := Goal{ID: fmt.Sprintf("g%d", i), EventName: fmt.Sprintf("E%d", i), DisplayName: fmt.Sprintf("E%d", i)}
		if _, err := b.UpdateSite(&SitePatch{SiteID: "s1", AddGoal: &g}); err != nil {
			t.Fatalf("goal %d: %v", i, err)
		}
	}
	extra := Goal{ID: "x", EventName: "X", DisplayName: "X"}
	if _, err := b.UpdateSite(&SitePatch{SiteID: "s1", AddGoal: &extra}); !errors.Is(err, ErrTooManyGoals) {
		t.Fatalf("goal %d: %v; want ErrTooManyGoals", MaxGoals+1, err)
	}
	if err := b.Commit(2); err != nil {
		t.Fatal(err)
	}
	got := mustSite(t, s, "s1")
	if len(got.Goals) != MaxGoals {
		t.Fatalf("stored %d goals; want %d", len(got.Goals), MaxGoals)
	}
	// A record holding more than MaxGoals is refused by the decoder.
	over := got
	over.Goals = append(append([]Goal(nil), got.Goals...), extra)
	var back Site
	if err := DecodeSite(AppendSite(nil, &over), &back); !errors.Is(err, ErrCorrupt) {
		t.Errorf("decode of %d goals: %v; want ErrCorrupt", len(over.Goals), err)
	}
}

func rawValue(t *testing.T, s *Store, key []byte) []byte {
	t.Helper()
	v, closer, err := s.db.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	return bytes.Clone(v)
}

// A version 1 record, as every node wrote before goals existed, decodes
// with the new fields at their defaults: DNT honoured, no goals.
func TestDecodeSiteVersion1(t *testing.T) {
	v1 := []byte{1}
	for _, f := range []string{"site_1", "example.com", "Europe/Berlin", "own_1"} {
		v1 = append(v1, byte(len(f)))
		v1 = append(v1, f...)
	}
	v1 = append(v1, 0x80, 0xa0, 0xab, 0xfe, 0xf9, 0x62) // zigzag varint of 1_700_000_000_000 (hand-encoded)
	var got Site
	if err := DecodeSite(v1, &got); err != nil {
		t.Fatal(err)
	}
	want := Site{ID: "site_1", Domain: "example.com", Timezone: "Europe/Berlin", Owner: "own_1", CreatedAt: 1_700_000_000_000}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v; want %+v", got, want)
	}
	if again := AppendSite(nil, &got); !bytes.Equal(again, v1) {
		t.Errorf("re-encoded as %x; want the version 1 bytes %x", again, v1)
	}
}

func TestDecodeSiteRejectsBadSettings(t *testing.T) {
	good := Site{ID: "s", Domain: "d", Goals: []Goal{{ID: "g", EventName: "E", DisplayName: "E"}}}
	enc := AppendSite(nil, &good)
	head := AppendSite(nil, &Site{ID: "s", Domain: "d"})[1:] // the version 1 fields
	v2 := func(tail ...byte) []byte { return append(append([]byte{siteVersion2}, head...), tail...) }
	for name, b := range map[string][]byte{
		"version 2 with nothing new": v2(0, 0),
		"unknown flag":               v2(0x02, 0),
		"101 goals":                  v2(0, 101),
		"goal count, no goals":       v2(0, 1),
		"bad goal":                   v2(append([]byte{0, 1}, AppendGoal(nil, &Goal{ID: "g", EventName: "E"})...)...),
		"duplicate goals": v2(append(append([]byte{0, 2}, AppendGoal(nil, &good.Goals[0])...),
			AppendGoal(nil, &Goal{ID: "h", EventName: "E", DisplayName: "F"})...)...),
	} {
		var got Site
		if err := DecodeSite(b, &got); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decoded %+v, %v; want ErrCorrupt", name, got, err)
		}
	}
	var got Site
	if err := DecodeSite(enc, &got); err != nil || !reflect.DeepEqual(got, good) {
		t.Errorf("good version 2: %+v, %v", got, err)
	}
}

func TestOwnerSites(t *testing.T) {
	s := newTestStore(t)
	sites := []Site{
		{ID: "zz", Domain: "a.example", Owner: "alice", CreatedAt: 1},
		{ID: "aa", Domain: "b.example", Owner: "alice", CreatedAt: 2},
		{ID: "mm", Domain: "c.example", Owner: "bob", CreatedAt: 0},
		{ID: "bb", Domain: "d.example", Owner: "alice", CreatedAt: 2},
	}
	apply(t, s, 1, func(b *Batch) error {
		for i := range sites {
			if err := b.PutSite(&sites[i]); err != nil {
				return err
			}
		}
		return nil
	})
	got, err := s.OwnerSites("alice")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, st := range got {
		ids = append(ids, st.ID)
	}
	if fmt.Sprint(ids) != "[zz aa bb]" {
		t.Errorf("alice's sites: %v; want [zz aa bb] (oldest first, then by id)", ids)
	}
	if got, err := s.OwnerSites("carol"); err != nil || len(got) != 0 {
		t.Errorf("carol's sites: %+v, %v; want none", got, err)
	}
}
