package store

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestNormalizeTags(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{}, ""},
		{[]string{"spring", "sms"}, "sms,spring"},
		{[]string{"Spring", "SMS", "spring"}, "sms,spring"}, // lower-cased, then deduplicated
		{[]string{"a"}, "a"},
		{[]string{"q4-2026", "x_y", "9"}, "9,q4-2026,x_y"},
		{[]string{strings.Repeat("z", 32)}, strings.Repeat("z", 32)},
		{[]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}, "a,b,c,d,e,f,g,h,i,j"},
	} {
		got, err := NormalizeTags(c.in)
		if err != nil || got != c.want {
			t.Errorf("NormalizeTags(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
		if !checkStoredTags(got) {
			t.Errorf("checkStoredTags(%q) = false for NormalizeTags' own output", got)
		}
	}
	for _, in := range [][]string{
		{""},
		{strings.Repeat("z", 33)},
		{"-lead"},
		{"_lead"},
		{"has space"},
		{"comma,inside"},
		{"ünï"},
		{"dot.ted"},
		{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"},
		{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "J"}, // 11 named, even if 10 distinct
	} {
		if got, err := NormalizeTags(in); !errors.Is(err, ErrInvalidTags) {
			t.Errorf("NormalizeTags(%q) = %q, %v; want ErrInvalidTags", in, got, err)
		}
	}
	for _, stored := range []string{"b,a", "a,a", "A", ",a", "a,", "a,,b", strings.Repeat("a,", 10) + "b"} {
		if checkStoredTags(stored) {
			t.Errorf("checkStoredTags(%q) = true; want false", stored)
		}
	}
	if !HasTag("sms,spring", "spring") || HasTag("sms,spring", "spr") || HasTag("", "a") {
		t.Error("HasTag matches part of a tag or misses a whole one")
	}
}

// tagIndexKeys returns every tag index key of owner as "tag/^index/code".
func tagIndexKeys(t *testing.T, s *Store, owner string) []string {
	t.Helper()
	var out []string
	for _, e := range dump(t, s) {
		p := append([]byte{tabTagIndex}, owner...)
		p = append(p, 0)
		if !bytes.HasPrefix(e.k, p) {
			continue
		}
		tag, rest, _ := bytes.Cut(e.k[len(p):], []byte{0})
		out = append(out, fmt.Sprintf("%s/%d/%s", tag, ^binary.BigEndian.Uint64(rest[:8]), rest[8:]))
	}
	return out
}

// The tag index follows every create and edit in the same batch, keyed by
// the index that created the link, whatever index later edits carry.
func TestTagIndexFollowsEdits(t *testing.T) {
	s := newTestStore(t)
	l := sampleLink("tg00001", "own", 10)
	l.Tags = "sms,spring"
	apply(t, s, 10, func(b *Batch) error { return b.CreateLink(&l) })
	if got, want := fmt.Sprint(tagIndexKeys(t, s, "own")), "[sms/10/tg00001 spring/10/tg00001]"; got != want {
		t.Fatalf("after create: %s; want %s", got, want)
	}
	// Replace spring by q4: one key goes, one comes, sms stays at index 10.
	apply(t, s, 20, func(b *Batch) error {
		_, err := b.UpdateLink(&LinkPatch{Code: "tg00001", Owner: "own", UpdatedAt: 1, SetTags: true, Tags: "q4,sms"}, 20)
		return err
	})
	if got, want := fmt.Sprint(tagIndexKeys(t, s, "own")), "[q4/10/tg00001 sms/10/tg00001]"; got != want {
		t.Fatalf("after retag: %s; want %s", got, want)
	}
	// An edit that leaves the tags alone (at index 30) keeps the keys.
	apply(t, s, 30, func(b *Batch) error {
		_, err := b.UpdateLink(&LinkPatch{Code: "tg00001", Owner: "own", UpdatedAt: 2, SetURL: true, URL: "https://x.example/"}, 30)
		return err
	})
	if got, want := fmt.Sprint(tagIndexKeys(t, s, "own")), "[q4/10/tg00001 sms/10/tg00001]"; got != want {
		t.Fatalf("after a URL edit: %s; want %s", got, want)
	}
	var got Link
	if _, err := s.GetLink([]byte("tg00001"), &got); err != nil || got.Tags != "q4,sms" || got.Index != 30 {
		t.Fatalf("link = %+v, %v; want tags q4,sms at index 30", got, err)
	}
	h, err := s.LinkHistory("tg00001", 0)
	if err != nil || len(h) != 3 || fmt.Sprint(h[1].Changes) != "[{tags sms,spring q4,sms}]" {
		t.Fatalf("history = %+v, %v; want the retag recorded as tags sms,spring -> q4,sms", h, err)
	}
	// Clearing removes every key.
	apply(t, s, 40, func(b *Batch) error {
		_, err := b.UpdateLink(&LinkPatch{Code: "tg00001", Owner: "own", UpdatedAt: 3, SetTags: true}, 40)
		return err
	})
	if got := tagIndexKeys(t, s, "own"); len(got) != 0 {
		t.Fatalf("after clearing: %v; want no keys", got)
	}
	// A refused edit leaves nothing behind: bad tags never reach the store.
	b := s.NewBatch()
	defer b.Close()
	if _, err := b.UpdateLink(&LinkPatch{Code: "tg00001", Owner: "own", SetTags: true, Tags: "B,a"}, 50); !errors.Is(err, ErrInvalidTags) {
		t.Fatalf("UpdateLink with tags not in normal form: %v; want ErrInvalidTags", err)
	}
}

// A link older than the history (no create record) is found through the
// owner index when its tags first change.
func TestTagIndexLinkWithoutHistory(t *testing.T) {
	s := newTestStore(t)
	l := sampleLink("old0001", "own", 7)
	apply(t, s, 7, func(b *Batch) error {
		if err := b.set(ownerIndexKey(l.Owner, l.Index, l.Code), nil); err != nil {
			return err
		}
		return b.PutLink(&l)
	})
	apply(t, s, 9, func(b *Batch) error {
		_, err := b.UpdateLink(&LinkPatch{Code: "old0001", Owner: "own", UpdatedAt: 1, SetTags: true, Tags: "legacy"}, 9)
		return err
	})
	if got, want := fmt.Sprint(tagIndexKeys(t, s, "own")), "[legacy/7/old0001]"; got != want {
		t.Fatalf("tag index = %s; want %s", got, want)
	}
}

// searchAll pages through q with a page size and returns the codes of
// every page.
func searchAll(t *testing.T, s *Store, q LinkQuery) [][]string {
	t.Helper()
	var pages [][]string
	for range 100 {
		links, next, err := s.SearchLinks(q)
		if err != nil {
			t.Fatalf("SearchLinks(%+v): %v", q, err)
		}
		var codes []string
		for _, l := range links {
			codes = append(codes, l.Code)
		}
		pages = append(pages, codes)
		if next == "" {
			return pages
		}
		q.Cursor = next
	}
	t.Fatal("more than 100 pages")
	return nil
}

func TestSearchLinksByTagAndMatch(t *testing.T) {
	s := newTestStore(t)
	// Links l01..l09 at indexes 1..9; l03, l05, l06, l09 tagged spring;
	// l05 and l09 point at /promo. Another owner's l10 is tagged spring too.
	for i := 1; i <= 10; i++ {
		owner := "own"
		if i == 10 {
			owner = "other"
		}
		l := sampleLink(fmt.Sprintf("l%02d", i), owner, uint64(i))
		switch i {
		case 3, 6, 10:
			l.Tags = "spring"
		case 5, 9:
			l.Tags = "sms,spring"
			l.URL = "https://example.com/PROMO/" + l.Code
		}
		apply(t, s, uint64(i), func(b *Batch) error { return b.CreateLink(&l) })
	}
	if got, want := fmt.Sprint(searchAll(t, s, LinkQuery{Owner: "own", Tag: "spring", Limit: 3})), "[[l09 l06 l05] [l03]]"; got != want {
		t.Errorf("tag spring, pages of 3: %s; want %s", got, want)
	}
	if got, want := fmt.Sprint(searchAll(t, s, LinkQuery{Owner: "own", Tag: "sms", Limit: 10})), "[[l09 l05]]"; got != want {
		t.Errorf("tag sms: %s; want %s", got, want)
	}
	promo := func(l *Link) bool { return strings.Contains(strings.ToLower(l.URL), "promo") }
	if got, want := fmt.Sprint(searchAll(t, s, LinkQuery{Owner: "own", Match: promo, Limit: 1})), "[[l09] [l05] []]"; got != want {
		// A filtered page cannot know nothing matches after it without
		// reading on: the last page may come empty.
		t.Errorf("match promo, pages of 1: %s; want %s", got, want)
	}
	// A scan budget of 2 entries: pages may come short (even empty) but
	// together they hold every match once, in order.
	if got, want := fmt.Sprint(searchAll(t, s, LinkQuery{Owner: "own", Match: promo, Limit: 5, ScanLimit: 2})), "[[l09] [] [l05] [] []]"; got != want {
		t.Errorf("match promo, scan budget 2: %s; want %s", got, want)
	}
	if got, want := fmt.Sprint(searchAll(t, s, LinkQuery{Owner: "own", Tag: "nothing", Limit: 5})), "[[]]"; got != want {
		t.Errorf("unknown tag: %s; want %s", got, want)
	}
	if _, _, err := s.SearchLinks(LinkQuery{Owner: "own", Tag: "Bad Tag", Limit: 5}); !errors.Is(err, ErrInvalidTags) {
		t.Errorf("bad tag: %v; want ErrInvalidTags", err)
	}
}

// A cursor survives creates made after it was handed out: the next page
// goes on where it stopped, and the new links lead a fresh first page.
func TestSearchCursorStableUnderCreates(t *testing.T) {
	for _, tag := range []string{"", "t"} {
		s := newTestStore(t)
		for i := 1; i <= 6; i++ {
			l := sampleLink(fmt.Sprintf("c%02d", i), "own", uint64(i))
			l.Tags = "t"
			apply(t, s, uint64(i), func(b *Batch) error { return b.CreateLink(&l) })
		}
		page, next, err := s.SearchLinks(LinkQuery{Owner: "own", Tag: tag, Limit: 3})
		if err != nil || len(page) != 3 || page[0].Code != "c06" || next == "" {
			t.Fatalf("tag %q first page = %v, %q, %v", tag, page, next, err)
		}
		idx := uint64(100)
		for i := range 4 {
			l := sampleLink(fmt.Sprintf("n%d%02d", idx, i), "own", idx+uint64(i))
			l.Tags = "t"
			apply(t, s, idx+uint64(i), func(b *Batch) error { return b.CreateLink(&l) })
		}
		if got, want := fmt.Sprint(searchAll(t, s, LinkQuery{Owner: "own", Tag: tag, Cursor: next, Limit: 3})), "[[c03 c02 c01]]"; got != want {
			t.Errorf("tag %q after 4 creates: %s; want %s", tag, got, want)
		}
	}
}

func TestDecodeCursor(t *testing.T) {
	pos := binary.BigEndian.AppendUint64(nil, ^uint64(42))
	pos = append(pos, "abc"...)
	got, err := DecodeCursor(EncodeCursor(pos))
	if err != nil || !bytes.Equal(got, pos) {
		t.Fatalf("round trip = %x, %v; want %x", got, err, pos)
	}
	for _, bad := range []string{
		"", "!!!", "abc=", base64.RawURLEncoding.EncodeToString([]byte("12345678")), // no code
		base64.StdEncoding.EncodeToString(pos), // padded, standard alphabet
		base64.RawURLEncoding.EncodeToString(append(bytes.Clone(pos), 0)),
		base64.RawURLEncoding.EncodeToString(append(bytes.Clone(pos), '/')),
		"not-a-cursor",
		base64.RawURLEncoding.EncodeToString(append(bytes.Clone(pos[:8]), bytes.Repeat([]byte("x"), maxCursorCode+1)...)),
	} {
		if _, err := DecodeCursor(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeCursor(%q) = %v; want ErrCorrupt", bad, err)
		}
	}
}

// FuzzDecodeCursor: any string either decodes to a position that encodes
// back to the same cursor, or is ErrCorrupt; it never panics.
func FuzzDecodeCursor(f *testing.F) {
	f.Add("")
	f.Add("AAAAAAAAAP9hYmM")
	f.Add(EncodeCursor(append(binary.BigEndian.AppendUint64(nil, ^uint64(7)), "my-alias"...)))
	f.Add("AAAAAAAAAP8A")
	f.Add("////////////")
	f.Fuzz(func(t *testing.T, cursor string) {
		pos, err := DecodeCursor(cursor)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeCursor(%q) = %v; want ErrCorrupt", cursor, err)
			}
			return
		}
		if len(pos) < 9 || EncodeCursor(pos) != cursor {
			t.Fatalf("DecodeCursor(%q) = %x, which encodes as %q", cursor, pos, EncodeCursor(pos))
		}
	})
}
