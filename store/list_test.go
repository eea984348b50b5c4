package store

import (
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
)

// fillLinks creates n links for owner at Raft indexes start, start+1, ...
// and m links for a second owner interleaved with them.
func fillLinks(t *testing.T, s *Store, owner string, n int, start uint64) []string {
	t.Helper()
	var codes []string
	for i := range n {
		idx := start + uint64(2*i)
		mine := sampleLink(fmt.Sprintf("m%06d", i), owner, idx)
		theirs := sampleLink(fmt.Sprintf("t%06d", i), owner+"-other", idx+1)
		apply(t, s, idx+1, func(b *Batch) error {
			if err := b.CreateLink(&mine); err != nil {
				return err
			}
			return b.CreateLink(&theirs)
		})
		codes = append(codes, mine.Code)
	}
	return codes
}

func TestListLinksPages(t *testing.T) {
	for _, flushed := range []bool{false, true} {
		t.Run(fmt.Sprintf("flushed=%v", flushed), func(t *testing.T) {
			s := newTestStore(t)
			codes := fillLinks(t, s, "own", 25, 100)
			if flushed { // read from sstables rather than the memtable
				if err := s.db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			var got []Link
			var sizes []int
			cursor := ""
			for page := 0; ; page++ {
				if page > 5 {
					t.Fatalf("more than 5 pages; cursor %q", cursor)
				}
				links, next, err := s.ListLinks("own", cursor, 10)
				if err != nil {
					t.Fatalf("ListLinks page %d: %v", page, err)
				}
				sizes = append(sizes, len(links))
				got = append(got, links...)
				if next == "" {
					break
				}
				cursor = next
			}
			if fmt.Sprint(sizes) != "[10 10 5]" {
				t.Fatalf("page sizes %v; want [10 10 5]", sizes)
			}
			seen := make(map[string]bool)
			for i, l := range got {
				if l.Owner != "own" {
					t.Fatalf("page holds %q of owner %q", l.Code, l.Owner)
				}
				if seen[l.Code] {
					t.Fatalf("%q listed twice", l.Code)
				}
				seen[l.Code] = true
				// Newest (highest Raft index) first.
				if want := codes[len(codes)-1-i]; l.Code != want {
					t.Fatalf("link %d = %q; want %q", i, l.Code, want)
				}
			}
		})
	}
}

func TestListLinksExactPage(t *testing.T) {
	s := newTestStore(t)
	fillLinks(t, s, "own", 10, 1)
	links, next, err := s.ListLinks("own", "", 10)
	if err != nil || len(links) != 10 || next != "" {
		t.Fatalf("ListLinks of exactly one page = %d links, next %q, %v; want 10, empty, nil", len(links), next, err)
	}
	links, next, err = s.ListLinks("nobody", "", 10)
	if err != nil || len(links) != 0 || next != "" {
		t.Fatalf("ListLinks of an owner without links = %d links, next %q, %v; want none", len(links), next, err)
	}
}

// An owner whose name is a prefix of another's must not see their links.
func TestListLinksOwnerPrefix(t *testing.T) {
	s := newTestStore(t)
	a, ab := sampleLink("a000001", "a", 1), sampleLink("b000001", "ab", 2)
	apply(t, s, 2, func(b *Batch) error {
		if err := b.CreateLink(&a); err != nil {
			return err
		}
		return b.CreateLink(&ab)
	})
	links, _, err := s.ListLinks("a", "", 10)
	if err != nil || len(links) != 1 || links[0].Code != "a000001" {
		t.Fatalf("ListLinks(a) = %+v, %v; want only a000001", links, err)
	}
}

func TestListLinksBadCursor(t *testing.T) {
	s := newTestStore(t)
	fillLinks(t, s, "own", 3, 1)
	for _, cursor := range []string{"!!!", "abc", base64.RawURLEncoding.EncodeToString([]byte("short"))} {
		if _, _, err := s.ListLinks("own", cursor, 10); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ListLinks with cursor %q: %v; want ErrCorrupt", cursor, err)
		}
	}
	// A well-formed cursor from another owner's listing cannot leak their
	// links: it only positions within this owner's index.
	_, next, err := s.ListLinks("own-other", "", 1)
	if err != nil || next == "" {
		t.Fatalf("ListLinks(own-other) next %q, %v", next, err)
	}
	links, _, err := s.ListLinks("own", next, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Owner != "own" {
			t.Fatalf("foreign cursor listed %q of %q", l.Code, l.Owner)
		}
	}
}

func TestOwnerIDWithNULRefused(t *testing.T) {
	s := newTestStore(t)
	b := s.NewBatch()
	defer b.Close()
	l := sampleLink("nul0001", "a\x00b", 1)
	if err := b.CreateLink(&l); err == nil {
		t.Errorf("CreateLink with owner %q = nil; want an error", l.Owner)
	}
	if err := b.PutIdempotency("a\x00b", "k", &Idempotency{}); err == nil {
		t.Errorf("PutIdempotency with owner %q = nil; want an error", "a\x00b")
	}
}
