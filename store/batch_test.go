package store

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func mustGetLink(t *testing.T, s *Store, code string) Link {
	t.Helper()
	var l Link
	found, err := s.GetLink([]byte(code), &l)
	if err != nil || !found {
		t.Fatalf("GetLink(%q) found = %v, err = %v; want the link", code, found, err)
	}
	return l
}

func TestCreateLinkThenGet(t *testing.T) {
	s := newTestStore(t)
	want := sampleLink("aB3xY9q", "own_1", 10)
	apply(t, s, 10, func(b *Batch) error { return b.CreateLink(&want) })
	if got := mustGetLink(t, s, want.Code); got != want {
		t.Fatalf("GetLink = %+v; want %+v", got, want)
	}
	var l Link
	if found, err := s.GetLink([]byte("zzzzzzz"), &l); err != nil || found {
		t.Fatalf("GetLink(unknown) found = %v, err = %v; want false, nil", found, err)
	}
}

func TestCreateLinkCodeTaken(t *testing.T) {
	s := newTestStore(t)
	l := sampleLink("taken01", "own_1", 1)
	apply(t, s, 1, func(b *Batch) error { return b.CreateLink(&l) })

	again := sampleLink("taken01", "own_2", 2)
	b := s.NewBatch()
	if err := b.CreateLink(&again); !errors.Is(err, ErrCodeTaken) {
		t.Fatalf("second CreateLink: %v; want ErrCodeTaken", err)
	}
	b.Close()

	// Deleting the link leaves a tombstone that still holds the code.
	apply(t, s, 3, func(b *Batch) error {
		_, err := b.UpdateLink(&LinkPatch{Code: "taken01", Owner: "own_1", UpdatedAt: 5, SetStatus: true, Status: StatusDisabled}, 3)
		return err
	})
	b = s.NewBatch()
	defer b.Close()
	if err := b.CreateLink(&again); !errors.Is(err, ErrCodeTaken) {
		t.Fatalf("CreateLink over a tombstone: %v; want ErrCodeTaken", err)
	}
	if got := mustGetLink(t, s, "taken01"); got.Owner != "own_1" || got.Status != StatusDisabled {
		t.Fatalf("tombstone = %+v; want own_1's disabled link", got)
	}
}

func TestCreateLinkTwiceInOneBatch(t *testing.T) {
	s := newTestStore(t)
	b := s.NewBatch()
	defer b.Close()
	l := sampleLink("samebat", "own_1", 1)
	if err := b.CreateLink(&l); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateLink(&l); !errors.Is(err, ErrCodeTaken) {
		t.Fatalf("CreateLink twice in one batch: %v; want ErrCodeTaken", err)
	}
}

// A record the decoder would refuse must never be written: it would make the
// code unreadable on every replica.
func TestPutLinkRejectsUnreadableRecords(t *testing.T) {
	s := newTestStore(t)
	b := s.NewBatch()
	defer b.Close()
	for name, l := range map[string]Link{
		"redirect 0":   {Code: "bad0001", URL: "https://e.com", Owner: "o"},
		"redirect 200": {Code: "bad0002", URL: "https://e.com", Owner: "o", Redirect: 200},
		"status 99":    {Code: "bad0003", URL: "https://e.com", Owner: "o", Redirect: 302, Status: 99},
	} {
		if err := b.CreateLink(&l); err == nil {
			t.Errorf("CreateLink with %s = nil; want an error", name)
		}
		var got Link
		if found, _ := b.Link(l.Code, &got); found {
			t.Errorf("CreateLink with %s left a record", name)
		}
	}
	l := sampleLink("bad0004", "o", 1)
	if err := b.CreateLink(&l); err != nil {
		t.Fatal(err)
	}
	if _, err := b.UpdateLink(&LinkPatch{Code: "bad0004", SetStatus: true, Status: statusCount}, 2); err == nil {
		t.Errorf("UpdateLink to an unknown status = nil; want an error")
	}
	var got Link
	if found, err := b.Link("bad0004", &got); err != nil || !found || got.Status != StatusActive {
		t.Errorf("link after a refused patch = %+v, %v, %v; want it unchanged", got, found, err)
	}
}

func TestUpdateLink(t *testing.T) {
	s := newTestStore(t)
	temp := sampleLink("temp001", "own_1", 1)
	perm := sampleLink("perm001", "own_1", 1)
	perm.Redirect = 301
	apply(t, s, 1, func(b *Batch) error {
		if err := b.CreateLink(&temp); err != nil {
			return err
		}
		return b.CreateLink(&perm)
	})

	b := s.NewBatch()
	defer b.Close()
	newURL := "https://example.net/new"

	// Another owner's link is not found, never forbidden.
	if _, err := b.UpdateLink(&LinkPatch{Code: "temp001", Owner: "own_2", SetURL: true, URL: newURL}, 2); !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdateLink by another owner: %v; want ErrNotFound", err)
	}
	if _, err := b.UpdateLink(&LinkPatch{Code: "nothere", Owner: "own_1"}, 2); !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdateLink of an unknown code: %v; want ErrNotFound", err)
	}
	// A permanent redirect keeps its destination; other edits still work.
	if _, err := b.UpdateLink(&LinkPatch{Code: "perm001", Owner: "own_1", SetURL: true, URL: newURL}, 2); !errors.Is(err, ErrPermanentRedirect) {
		t.Errorf("URL change of a 301: %v; want ErrPermanentRedirect", err)
	}
	if _, err := b.UpdateLink(&LinkPatch{Code: "perm001", Owner: "own_1", SetURL: true, URL: perm.URL, SetExpiresAt: true, ExpiresAt: 99}, 2); err != nil {
		t.Errorf("same-URL edit of a 301: %v; want nil", err)
	}

	got, err := b.UpdateLink(&LinkPatch{Code: "temp001", Owner: "own_1", UpdatedAt: 77, SetURL: true, URL: newURL, SetClickLimit: true, ClickLimit: 5}, 3)
	if err != nil {
		t.Fatalf("owner's UpdateLink: %v", err)
	}
	want := temp
	want.URL, want.ClickLimit, want.UpdatedAt, want.Index = newURL, 5, 77, 3
	if got != want {
		t.Errorf("UpdateLink returned %+v; want %+v", got, want)
	}
	// The operator (empty Owner) may edit any link, permanent or not.
	got, err = b.UpdateLink(&LinkPatch{Code: "perm001", UpdatedAt: 88, SetStatus: true, Status: StatusLegalBlock}, 4)
	if err != nil || got.Status != StatusLegalBlock || got.Owner != "own_1" || got.Index != 4 {
		t.Errorf("operator patch = %+v, %v; want a legal block at index 4 still owned by own_1", got, err)
	}
	if err := b.Commit(4); err != nil {
		t.Fatal(err)
	}
	if l := mustGetLink(t, s, "temp001"); l != want {
		t.Errorf("stored temp001 = %+v; want %+v", l, want)
	}
	if l := mustGetLink(t, s, "perm001"); l.Status != StatusLegalBlock || l.ExpiresAt != 99 || l.URL != perm.URL {
		t.Errorf("stored perm001 = %+v; want legal block, expiry 99, unchanged URL", l)
	}
}

func TestBatchReadsItsOwnWrites(t *testing.T) {
	s := newTestStore(t)
	b := s.NewBatch()
	defer b.Close()
	l := sampleLink("inbatch", "own_1", 5)
	if err := b.CreateLink(&l); err != nil {
		t.Fatal(err)
	}
	var got Link
	if found, err := b.Link("inbatch", &got); err != nil || !found || got != l {
		t.Fatalf("Batch.Link = %+v, %v, %v; want %+v", got, found, err, l)
	}
	// The store itself does not see it before Commit.
	if found, err := s.GetLink([]byte("inbatch"), &got); err != nil || found {
		t.Fatalf("Store.GetLink before Commit found = %v, err = %v; want false", found, err)
	}
	if err := b.PutSite(&Site{ID: "s1", Domain: "example.com", Owner: "own_1"}); err != nil {
		t.Fatal(err)
	}
	if id, found, err := b.SiteIDByDomain("example.com"); err != nil || !found || id != "s1" {
		t.Fatalf("SiteIDByDomain in batch = %q, %v, %v; want s1", id, found, err)
	}
}

func TestCommitRecordsAppliedIndex(t *testing.T) {
	s := newTestStore(t)
	if idx, err := s.AppliedIndex(); err != nil || idx != 0 {
		t.Fatalf("AppliedIndex of a new store = %d, %v; want 0, nil", idx, err)
	}
	apply(t, s, 41, func(*Batch) error { return nil })
	if idx, err := s.AppliedIndex(); err != nil || idx != 41 {
		t.Fatalf("AppliedIndex = %d, %v; want 41", idx, err)
	}
	b := s.NewBatch()
	defer b.Close()
	if idx, err := b.AppliedIndex(); err != nil || idx != 41 {
		t.Fatalf("Batch.AppliedIndex = %d, %v; want 41", idx, err)
	}
	if err := b.Commit(42); err != nil {
		t.Fatal(err)
	}
	if idx, err := s.AppliedIndex(); err != nil || idx != 42 {
		t.Fatalf("AppliedIndex = %d, %v; want 42", idx, err)
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

func TestClosedBatchChangesNothing(t *testing.T) {
	s := newTestStore(t)
	apply(t, s, 1, func(*Batch) error { return nil })
	before := dump(t, s)

	b := s.NewBatch()
	l := sampleLink("ghost01", "own_1", 2)
	if err := b.CreateLink(&l); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.AllocBlock("eu", 100); err != nil {
		t.Fatal(err)
	}
	if err := b.PutOwner(&Owner{ID: "own_1"}, HashAPIKey([]byte("k"))); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	after := dump(t, s)
	if len(after) != len(before) {
		t.Fatalf("store holds %d keys after a closed batch; want %d", len(after), len(before))
	}
	for i := range after {
		if !bytes.Equal(after[i].k, before[i].k) || !bytes.Equal(after[i].v, before[i].v) {
			t.Fatalf("key %q changed after a closed batch", after[i].k)
		}
	}
}

func TestOwnersAndKeys(t *testing.T) {
	s := newTestStore(t)
	o := Owner{ID: "own_1", Name: "Ada", CreatedAt: 1}
	apply(t, s, 1, func(b *Batch) error { return b.PutOwner(&o, HashAPIKey([]byte("secret-key"))) })
	got, found, err := s.OwnerByKey(HashAPIKey([]byte("secret-key")))
	if err != nil || !found || got != o {
		t.Fatalf("OwnerByKey = %+v, %v, %v; want %+v", got, found, err, o)
	}
	if _, found, err := s.OwnerByKey(HashAPIKey([]byte("other-key"))); err != nil || found {
		t.Fatalf("OwnerByKey(wrong key) found = %v, err = %v; want false", found, err)
	}
	if got, found, err := s.Owner("own_1"); err != nil || !found || got != o {
		t.Fatalf("Owner = %+v, %v, %v; want %+v", got, found, err, o)
	}
	if _, found, err := s.Owner("own_2"); err != nil || found {
		t.Fatalf("Owner(unknown) found = %v, err = %v; want false", found, err)
	}
}

func TestIdempotencyRecords(t *testing.T) {
	s := newTestStore(t)
	rec := sampleIdempotency[1]
	apply(t, s, 1, func(b *Batch) error { return b.PutIdempotency("own_1", "key-1", &rec) })
	got, found, err := s.Idempotency("own_1", "key-1")
	if err != nil || !found || got.RequestHash != rec.RequestHash || got.Status != rec.Status || string(got.Response) != string(rec.Response) {
		t.Fatalf("Idempotency = %+v, %v, %v; want %+v", got, found, err, rec)
	}
	// Keys are per owner.
	if _, found, err := s.Idempotency("own_2", "key-1"); err != nil || found {
		t.Fatalf("another owner's Idempotency found = %v, err = %v; want false", found, err)
	}
}

func TestSites(t *testing.T) {
	s := newTestStore(t)
	a := Site{ID: "s1", Domain: "a.example", Timezone: "UTC", Owner: "own_1", CreatedAt: 1}
	c := Site{ID: "s2", Domain: "c.example", Timezone: "Asia/Tokyo", Owner: "own_2", CreatedAt: 2}
	apply(t, s, 1, func(b *Batch) error {
		if err := b.PutSite(&a); err != nil {
			return err
		}
		return b.PutSite(&c)
	})
	b := s.NewBatch()
	defer b.Close()
	if err := b.PutSite(&Site{ID: "s3", Domain: "a.example"}); !errors.Is(err, ErrDomainTaken) {
		t.Fatalf("second site for a.example: %v; want ErrDomainTaken", err)
	}
	if got, found, err := s.Site("s2"); err != nil || !found || !reflect.DeepEqual(got, c) {
		t.Fatalf("Site(s2) = %+v, %v, %v; want %+v", got, found, err, c)
	}
	sites, err := s.Sites()
	if err != nil || len(sites) != 2 || !reflect.DeepEqual(sites, []Site{a, c}) {
		t.Fatalf("Sites = %+v, %v; want [%+v %+v]", sites, err, a, c)
	}
}

func TestSetSecretFirstWins(t *testing.T) {
	s := newTestStore(t)
	if _, found, err := s.Secret(); err != nil || found {
		t.Fatalf("Secret of a new store found = %v, err = %v; want false", found, err)
	}
	apply(t, s, 1, func(b *Batch) error { return b.SetSecret(testKey) })
	apply(t, s, 2, func(b *Batch) error { return b.SetSecret([]byte("another-16b-key!")) })
	key, found, err := s.Secret()
	if err != nil || !found || string(key) != string(testKey) {
		t.Fatalf("Secret = %q, %v, %v; want %q", key, found, err, testKey)
	}
}
