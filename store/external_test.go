package store

import (
	"errors"
	"strings"
	"testing"
)

// TestExternalIDs checks the X table: per owner, readable in the batch
// that wrote it, and bounded.
func TestExternalIDs(t *testing.T) {
	s := newTestStore(t)
	apply(t, s, 1, func(b *Batch) error {
		if err := b.PutExternalID("o1", "bitly:bit.ly/x", "code-a"); err != nil {
			return err
		}
		code, found, err := b.ExternalID("o1", "bitly:bit.ly/x")
		if err != nil || !found || code != "code-a" {
			t.Fatalf("read in the writing batch: %q %v %v", code, found, err)
		}
		return nil
	})
	for _, c := range []struct {
		owner, id, code string
		found           bool
	}{{"o1", "bitly:bit.ly/x", "code-a", true}, {"o2", "bitly:bit.ly/x", "", false}, {"o1", "bitly:bit.ly/y", "", false}, {"o", "1\x00bitly:bit.ly/x", "", false}} {
		code, found, err := s.ExternalID(c.owner, c.id)
		if err != nil || found != c.found || code != c.code {
			t.Errorf("ExternalID(%q, %q) = %q %v %v; want %q %v", c.owner, c.id, code, found, err, c.code, c.found)
		}
	}
	b := s.NewBatch()
	defer b.Close()
	for name, err := range map[string]error{
		"long id":   b.PutExternalID("o1", strings.Repeat("x", MaxExternalIDLen+1), "c"),
		"empty id":  b.PutExternalID("o1", "", "c"),
		"NUL owner": b.PutExternalID("o\x001", "x", "c"),
	} {
		if err == nil || errors.Is(err, ErrStorage) {
			t.Errorf("%s: got %v; want a refusal", name, err)
		}
	}
}

// TestEachLink walks an owner's links oldest first, only theirs, from
// sstables and the memtable alike, and stops at the callback's error.
func TestEachLink(t *testing.T) {
	s := newTestStore(t)
	codes := fillLinks(t, s, "own", 30, 1)
	if err := s.db.Flush(); err != nil { // the first 30 from sstables
		t.Fatal(err)
	}
	for i := range 5 { // and 5 more from the memtable
		l := sampleLink("late-"+string(rune('a'+i)), "own", uint64(1000+i))
		apply(t, s, uint64(1000+i), func(b *Batch) error { return b.CreateLink(&l) })
		codes = append(codes, l.Code)
	}
	var got []string
	if err := s.EachLink("own", func(l *Link) error {
		if l.Owner != "own" {
			t.Fatalf("link %s of %s", l.Code, l.Owner)
		}
		got = append(got, l.Code)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 35 || strings.Join(got, ",") != strings.Join(codes, ",") {
		t.Fatalf("got %d links %v; want the 35 in creation order %v", len(got), got, codes)
	}
	stop := errors.New("stop")
	n := 0
	if err := s.EachLink("own", func(*Link) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("callback error: got %v after %d links; want stop after 1", err, n)
	}
	if err := s.EachLink("nobody", func(*Link) error { t.Fatal("a link of nobody"); return nil }); err != nil {
		t.Fatal(err)
	}
}
