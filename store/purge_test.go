package store

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestPurgeDeletedLinks(t *testing.T) {
	s := newTestStore(t)
	const day = 24 * 60 * 60 * 1000
	mk := func(code string, st Status, updated int64) Link {
		l := sampleLink(code, "own", 1)
		l.Status, l.UpdatedAt = st, updated
		return l
	}
	links := []Link{
		mk("aold", StatusDisabled, 1*day),  // deleted long ago: due
		mk("bact", StatusActive, 1*day),    // never deleted
		mk("cnew", StatusDisabled, 40*day), // deleted after the cutoff
		mk("dold", StatusDisabled, 2*day),  // due
		mk("eblk", StatusBlocked, 1*day),   // an operator status is not a deletion
		mk("fcut", StatusDisabled, 10*day), // exactly at the cutoff: due
	}
	apply(t, s, 1, func(b *Batch) error {
		for i := range links {
			if err := b.CreateLink(&links[i]); err != nil {
				return err
			}
		}
		return nil
	})
	const cutoff = 10 * day

	due, next, err := s.DeletedLinksDue("", cutoff, 100, 100)
	if err != nil || next != "" || !reflect.DeepEqual(due, []string{"aold", "dold", "fcut"}) {
		t.Fatalf("DeletedLinksDue = %v, %q, %v; want [aold dold fcut], end", due, next, err)
	}
	// Paged two links at a time, the pages add up to the same codes.
	var paged []string
	from := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		d, n, err := s.DeletedLinksDue(from, cutoff, 2, 100)
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, d...)
		if n == "" {
			break
		}
		from = n
	}
	if !reflect.DeepEqual(paged, due) {
		t.Fatalf("paged scan = %v; want %v", paged, due)
	}
	// max bounds the answer and the cursor stops after the last one given.
	d, n, err := s.DeletedLinksDue("", cutoff, 100, 1)
	if err != nil || !reflect.DeepEqual(d, []string{"aold"}) || n != "aold" {
		t.Fatalf("DeletedLinksDue(max 1) = %v, %q, %v; want [aold], aold", d, n, err)
	}

	// The entry names a code that is not due and one that does not exist:
	// both are left alone.
	apply(t, s, 2, func(b *Batch) error {
		purged, err := b.PurgeDeletedLinks([]string{"aold", "cnew", "bact", "nope", "dold"}, cutoff, 50*day, 2)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(purged, []string{"aold", "dold"}) {
			t.Errorf("purged %v; want [aold dold]", purged)
		}
		return nil
	})
	for _, want := range []struct {
		code string
		url  string
	}{{"aold", ""}, {"dold", ""}, {"bact", "https://example.com/bact"}, {"cnew", "https://example.com/cnew"}, {"fcut", "https://example.com/fcut"}} {
		var l Link
		found, err := s.GetLink([]byte(want.code), &l)
		if err != nil || !found || l.URL != want.url {
			t.Errorf("%s: URL %q (found %v, %v); want %q", want.code, l.URL, found, err, want.url)
		}
		if want.url == "" && (!l.Purged() || l.UpdatedAt != 50*day || l.Index != 2 || l.Status != StatusDisabled) {
			t.Errorf("%s after purge = %+v; want disabled, updated at the purge, index 2", want.code, l)
		}
	}
	// A purged link is no longer due, its code stays taken, and no edit
	// (owner or operator) brings it back.
	if d, _, _ := s.DeletedLinksDue("", 100*day, 100, 100); !reflect.DeepEqual(d, []string{"cnew", "fcut"}) {
		t.Errorf("due after purge = %v; want [cnew fcut]", d)
	}
	b := s.NewBatch()
	defer b.Close()
	again := sampleLink("aold", "other", 3)
	if err := b.CreateLink(&again); !errors.Is(err, ErrCodeTaken) {
		t.Errorf("create over a purged code: %v; want ErrCodeTaken", err)
	}
	for _, owner := range []string{"own", ""} {
		p := LinkPatch{Code: "aold", Owner: owner, SetStatus: true, Status: StatusActive}
		if _, err := b.UpdateLink(&p, 3); !errors.Is(err, ErrNotFound) {
			t.Errorf("reactivate a purged link (owner %q): %v; want ErrNotFound", owner, err)
		}
	}
}

// The destination leaves the link's history too: the create and every
// edit named it. The purge itself is recorded, by the system.
func TestPurgeScrubsHistory(t *testing.T) {
	s := newTestStore(t)
	l := sampleLink("hist1", "own", 1)
	l.URL = "https://secret.example/first"
	apply(t, s, 1, func(b *Batch) error { return b.CreateLink(&l) })
	apply(t, s, 2, func(b *Batch) error {
		_, err := b.UpdateLink(&LinkPatch{Code: "hist1", Owner: "own", UpdatedAt: 5, SetURL: true, URL: "https://secret.example/second"}, 2)
		return err
	})
	apply(t, s, 3, func(b *Batch) error {
		_, err := b.UpdateLink(&LinkPatch{Code: "hist1", Owner: "own", UpdatedAt: 6, SetStatus: true, Status: StatusDisabled}, 3)
		return err
	})
	before, err := s.LinkHistory("hist1", 0)
	if err != nil || len(before) != 3 {
		t.Fatalf("history before the purge: %d records, %v; want 3", len(before), err)
	}
	apply(t, s, 4, func(b *Batch) error {
		purged, err := b.PurgeDeletedLinks([]string{"hist1"}, 10, 99, 4)
		if err == nil && len(purged) != 1 {
			t.Errorf("purged %v; want [hist1]", purged)
		}
		return err
	})
	after, err := s.LinkHistory("hist1", 0)
	if err != nil || len(after) != 4 {
		t.Fatalf("history after the purge: %d records, %v; want 4", len(after), err)
	}
	for i, h := range after {
		for _, c := range h.Changes {
			if strings.Contains(c.Old+c.New, "secret.example") {
				t.Errorf("record %d (%s) still names the destination: %+v", i, h.Action, c)
			}
		}
		if i < 3 && (h.Action != before[i].Action || h.Actor != before[i].Actor || h.Index != before[i].Index || len(h.Changes) != len(before[i].Changes)) {
			t.Errorf("record %d changed beyond its destination: %+v; was %+v", i, h, before[i])
		}
	}
	if got := after[1].Changes; len(got) == 0 || got[0] != (FieldChange{Field: "url", Old: PurgedValue, New: PurgedValue}) {
		t.Errorf("the edit's url change = %+v; want both sides %q", got, PurgedValue)
	}
	last := after[3]
	if last.Action != ActionPurge || last.Actor != ActorSystem || last.At != 99 || last.Index != 4 {
		t.Errorf("purge record = %+v; want action purge by the system at 99, index 4", last)
	}
}
