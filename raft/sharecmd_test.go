package raft

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

// testPHC is a well-formed argon2id PHC string (store.ParsePasswordHash).
var testPHC = (&store.PasswordHash{MemoryKiB: 19456, Time: 2, Threads: 1,
	Salt: []byte("0123456789abcdef"), Key: []byte("0123456789abcdef0123456789abcdef")}).String()

func testShare(owner string, kind store.ShareKind, target string, seed byte) *store.Share {
	var tok [store.ShareTokenLen]byte
	tok[0], tok[1] = seed, byte(kind)
	copy(tok[2:], target)
	return &store.Share{Hash: store.HashShareToken(tok), Owner: owner, Kind: kind, Target: target,
		Name: "share " + string('a'+seed%26), CreatedAt: 1700000000000 + int64(seed)}
}

func TestShareCommandsRoundTrip(t *testing.T) {
	s := testShare("o1", store.ShareSite, "site-1", 1)
	s.PasswordHash = testPHC
	for _, c := range []command{
		&createShareCmd{Share: *s},
		&deleteShareCmd{Kind: store.ShareLink, Owner: "o1", Target: "example.org/abc", ID: store.ShareID(s.Hash)},
	} {
		h, got, err := decodeCommand(appendCommand(nil, c))
		if err != nil || !reflect.DeepEqual(got, c) || h.typ != c.kind() {
			t.Fatalf("round trip of %T: got %+v (%v); want %+v", c, got, err, c)
		}
	}
	if cmdCreateShare != 26 || cmdDeleteShare != 27 || commandTable[26].name != "create_share" || commandTable[27].name != "delete_share" {
		t.Fatal("share commands must be types 26 and 27")
	}
}

func TestDecodeShareCommandsRejects(t *testing.T) {
	good := testShare("o1", store.ShareLink, "abc", 2)
	enc := func(mod func(*store.Share)) []byte {
		s := *good
		mod(&s)
		return appendCommand(nil, &createShareCmd{Share: s})
	}
	goodBytes := enc(func(*store.Share) {})
	id := store.ShareID(good.Hash)
	cases := []struct {
		name string
		data []byte
	}{
		{"unknown kind", enc(func(s *store.Share) { s.Kind = 9 })},
		{"no owner", enc(func(s *store.Share) { s.Owner = "" })},
		{"owner with NUL", enc(func(s *store.Share) { s.Owner = "o\x00" })},
		{"no target", enc(func(s *store.Share) { s.Target = "" })},
		{"target with NUL", enc(func(s *store.Share) { s.Target = "a\x00b" })},
		{"name too long", enc(func(s *store.Share) { s.Name = strings.Repeat("n", store.MaxShareNameLen+1) })},
		{"name not UTF-8", enc(func(s *store.Share) { s.Name = "\xff" })},
		{"password hash not PHC", enc(func(s *store.Share) { s.PasswordHash = "$argon2id$plain" })},
		{"hash truncated", goodBytes[:len(goodBytes)-1]},
		{"trailing byte", append(append([]byte(nil), goodBytes...), 0)},
		{"delete of a short id", appendCommand(nil, &deleteShareCmd{Kind: store.ShareSite, Owner: "o", Target: "s", ID: "abc"})},
		{"delete of an unknown kind", appendCommand(nil, &deleteShareCmd{Kind: 0, Owner: "o", Target: "s", ID: id})},
		{"delete without target", appendCommand(nil, &deleteShareCmd{Kind: store.ShareSite, Owner: "o", ID: id})},
		{"delete owner with NUL", appendCommand(nil, &deleteShareCmd{Kind: store.ShareSite, Owner: "o\x00", Target: "s", ID: id})},
	}
	for _, tc := range cases {
		if _, _, err := decodeCommand(tc.data); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s: got %v; want ErrCorrupt", tc.name, err)
		}
	}
}

func TestShareWireErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code errCode
	}{{store.ErrShareIDTaken, 23}, {store.ErrTooManyShares, 24}} {
		wrapped := fmt.Errorf("cannot create share: %w", tc.err)
		if got := codeOf(wrapped); got != tc.code {
			t.Errorf("codeOf(%v) = %d; want %d", tc.err, got, tc.code)
		}
		if got := sentinelOf(tc.code); got != tc.err {
			t.Errorf("sentinelOf(%d) = %v; want %v", tc.code, got, tc.err)
		}
	}
}

func TestShareCreateListDelete(t *testing.T) {
	tn := newTestNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := testShare("o1", store.ShareSite, "site-1", 1)
	a.PasswordHash = testPHC
	got, err := tn.n.CreateShare(ctx, a)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if got.ID != store.ShareID(a.Hash) || got.Owner != "o1" || got.Target != "site-1" || got.PasswordHash != a.PasswordHash {
		t.Fatalf("created share reads back as %+v", got)
	}
	if _, err := tn.n.CreateShare(ctx, a); !errors.Is(err, store.ErrShareIDTaken) {
		t.Fatalf("the same token again: %v; want ErrShareIDTaken", err)
	}
	b := testShare("o1", store.ShareSite, "site-1", 2)
	if _, err := tn.n.CreateShare(ctx, b); err != nil {
		t.Fatal(err)
	}
	other := testShare("o1", store.ShareSite, "site-2", 3)
	if _, err := tn.n.CreateShare(ctx, other); err != nil {
		t.Fatal(err)
	}
	list, err := tn.st.Shares(store.ShareSite, "site-1")
	if err != nil || len(list) != 2 || list[0].ID != got.ID || list[1].ID != store.ShareID(b.Hash) {
		t.Fatalf("list of site-1: %+v %v; want the two shares, oldest first", list, err)
	}
	// Another owner, another target: not found, and nothing deleted.
	if err := tn.n.DeleteShare(ctx, "o2", store.ShareSite, "site-1", got.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete by another owner: %v; want ErrNotFound", err)
	}
	if err := tn.n.DeleteShare(ctx, "o1", store.ShareSite, "site-2", got.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete through another site: %v; want ErrNotFound", err)
	}
	if err := tn.n.DeleteShare(ctx, "o1", store.ShareSite, "site-1", got.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, found, err := tn.st.ShareByHash(a.Hash); found || err != nil {
		t.Fatalf("deleted share still found (%v)", err)
	}
	if list, _ := tn.st.Shares(store.ShareSite, "site-1"); len(list) != 1 {
		t.Fatalf("after delete the list is %+v; want one share", list)
	}
	if err := tn.n.DeleteShare(ctx, "o1", store.ShareSite, "site-1", got.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v; want ErrNotFound", err)
	}
	// The cap per target.
	for i := 0; i < store.MaxSharesPerTarget; i++ {
		_, err := tn.n.CreateShare(ctx, testShare("o1", store.ShareLink, "abc", byte(10+i)))
		if i < store.MaxSharesPerTarget && err != nil {
			t.Fatalf("share %d: %v", i, err)
		}
	}
	if _, err := tn.n.CreateShare(ctx, testShare("o1", store.ShareLink, "abc", 200)); !errors.Is(err, store.ErrTooManyShares) {
		t.Fatalf("share past the cap: %v; want ErrTooManyShares", err)
	}
}

// TestShareRevokedOnEveryNode: a delete committed through the leader is
// gone from every replica once applied there.
func TestShareRevokedOnEveryNode(t *testing.T) {
	c := newCluster(t, nil)
	voters, leader, follower := c.threeVoters()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := testShare("o1", store.ShareLink, "abc", 7)
	if _, err := follower.node().CreateShare(ctx, s); err != nil {
		t.Fatalf("create through a follower: %v", err)
	}
	for _, m := range voters {
		waitFor(t, "share on "+m.id, func() (bool, string) {
			_, found, err := m.store().ShareByHash(s.Hash)
			return found, fmt.Sprint(err)
		})
	}
	if err := leader.node().DeleteShare(ctx, "o1", store.ShareLink, "abc", store.ShareID(s.Hash)); err != nil {
		t.Fatal(err)
	}
	for _, m := range voters {
		waitFor(t, "share gone on "+m.id, func() (bool, string) {
			_, found, err := m.store().ShareByHash(s.Hash)
			return !found, fmt.Sprint(err)
		})
	}
}

func FuzzDecodeShareCommand(f *testing.F) {
	s := testShare("o1", store.ShareSite, "site-1", 1)
	f.Add(appendCommand(nil, &createShareCmd{Share: *s}))
	f.Add(appendCommand(nil, &deleteShareCmd{Kind: store.ShareSite, Owner: "o1", Target: "site-1", ID: store.ShareID(s.Hash)}))
	f.Add([]byte{26, 1, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, c, err := decodeCommand(data)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) && !errors.Is(err, errUnknownCommand) {
				t.Fatalf("got error %v; want ErrCorrupt or errUnknownCommand", err)
			}
			return
		}
		_, c2, err := decodeCommand(appendCommand(nil, c))
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip: got %+v (%v); want %+v", c2, err, c)
		}
	})
}
