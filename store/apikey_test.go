package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
)

// TestAPIKeyLifecycle: an old owner key (K only) reads as every scope and
// is listed; a scoped key is created, found by hash and id, touched and
// revoked; a revoked key is gone from every lookup.
func TestAPIKeyLifecycle(t *testing.T) {
	s := newTestStore(t)
	alice := Owner{ID: "alice", Name: "Alice", CreatedAt: 1000}
	oldKey := HashAPIKey([]byte("wm_old_secret"))
	apply(t, s, 1, func(b *Batch) error { return b.PutOwner(&alice, oldKey) })

	o, k, found, err := s.APIKeyByHash(oldKey)
	if err != nil || !found || o.ID != "alice" {
		t.Fatalf("APIKeyByHash(old) = %+v, %v, %v", o, found, err)
	}
	// Worked out by hand: the id is the hex of the first 8 hash bytes.
	sum := sha256.Sum256([]byte("wm_old_secret"))
	if want := hex.EncodeToString(sum[:8]); k.ID != want || k.Scopes != AllScopes || k.Name != "default" || k.CreatedAt != 1000 {
		t.Fatalf("old key = %+v; want id %s, every scope, name default, created 1000", k, want)
	}
	if got, found, err := s.APIKeyByID(k.ID); err != nil || !found || got.Hash != oldKey {
		t.Fatalf("APIKeyByID(old) = %+v, %v, %v", got, found, err)
	}

	scoped := APIKey{Hash: HashAPIKey([]byte("wm_new_secret")), Owner: "alice", Name: "ci", Scopes: ScopeLinksRead | ScopeStatsRead, CreatedAt: 2000}
	apply(t, s, 2, func(b *Batch) error { return b.CreateAPIKey(&scoped) })
	_, k, found, err = s.APIKeyByHash(scoped.Hash)
	if err != nil || !found || k.Scopes != ScopeLinksRead|ScopeStatsRead || k.Name != "ci" || k.ID != KeyID(scoped.Hash) {
		t.Fatalf("APIKeyByHash(scoped) = %+v, %v, %v", k, found, err)
	}
	if k.Scopes.Has(ScopeLinksWrite) || !k.Scopes.Has(ScopeLinksRead) {
		t.Fatalf("Has: %v", k.Scopes)
	}

	// A second create with the same hash (so the same id) is refused and
	// writes nothing.
	b := s.NewBatch()
	dup := scoped
	if err := b.CreateAPIKey(&dup); !errors.Is(err, ErrKeyIDTaken) {
		t.Fatalf("duplicate create: %v; want ErrKeyIDTaken", err)
	}
	b.Close()
	// Unknown owner, empty name, no scopes.
	for name, bad := range map[string]APIKey{
		"unknown owner": {Hash: HashAPIKey([]byte("x1")), Owner: "bob", Name: "n", Scopes: ScopeLinksRead},
		"empty name":    {Hash: HashAPIKey([]byte("x2")), Owner: "alice", Scopes: ScopeLinksRead},
		"no scopes":     {Hash: HashAPIKey([]byte("x3")), Owner: "alice", Name: "n"},
		"unknown scope": {Hash: HashAPIKey([]byte("x4")), Owner: "alice", Name: "n", Scopes: 1 << 7},
		"control char":  {Hash: HashAPIKey([]byte("x5")), Owner: "alice", Name: "a\nb", Scopes: ScopeLinksRead},
	} {
		b := s.NewBatch()
		if err := b.CreateAPIKey(&bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
		b.Close()
	}

	keys, err := s.APIKeys("alice")
	if err != nil || len(keys) != 2 || keys[0].Hash != oldKey || keys[1].Hash != scoped.Hash {
		t.Fatalf("APIKeys = %+v, %v; want old then scoped", keys, err)
	}
	if keys, _ := s.APIKeys("bob"); len(keys) != 0 {
		t.Fatalf("bob's keys = %+v", keys)
	}

	// Touches: the later time wins, an earlier one changes nothing, the
	// old key gets a record with every scope.
	var changed int
	apply(t, s, 3, func(b *Batch) (err error) {
		changed, err = b.TouchAPIKeys([]KeyTouch{{scoped.Hash, 60_000}, {oldKey, 120_000}, {HashAPIKey([]byte("nobody")), 1}})
		return err
	})
	if changed != 2 {
		t.Fatalf("touched %d; want 2", changed)
	}
	apply(t, s, 4, func(b *Batch) (err error) {
		changed, err = b.TouchAPIKeys([]KeyTouch{{scoped.Hash, 30_000}})
		return err
	})
	if changed != 0 {
		t.Fatalf("an earlier touch changed %d keys", changed)
	}
	_, k, _, _ = s.APIKeyByHash(scoped.Hash)
	_, ko, _, _ := s.APIKeyByHash(oldKey)
	if k.LastUsed != 60_000 || ko.LastUsed != 120_000 || ko.Scopes != AllScopes || ko.CreatedAt != 1000 {
		t.Fatalf("after touches: scoped %+v, old %+v", k, ko)
	}

	// Revoke: another owner's revoke is not found; the owner's works, for
	// the new and the old key alike.
	b = s.NewBatch()
	if _, err := b.RevokeAPIKey("bob", scoped.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob revoking alice's key: %v; want ErrNotFound", err)
	}
	b.Close()
	apply(t, s, 5, func(b *Batch) error {
		if _, err := b.RevokeAPIKey("alice", KeyID(scoped.Hash)); err != nil {
			return err
		}
		_, err := b.RevokeAPIKey("", KeyID(oldKey))
		return err
	})
	for _, h := range []KeyHash{scoped.Hash, oldKey} {
		if _, _, found, err := s.APIKeyByHash(h); err != nil || found {
			t.Fatalf("revoked key %s still found: %v", KeyID(h), err)
		}
		if _, found, _ := s.APIKeyByID(KeyID(h)); found {
			t.Fatalf("revoked key %s found by id", KeyID(h))
		}
	}
	if keys, _ := s.APIKeys("alice"); len(keys) != 0 {
		t.Fatalf("keys after revoke = %+v", keys)
	}
	// A touch that arrives after the revoke does not bring the key back.
	apply(t, s, 6, func(b *Batch) (err error) {
		changed, err = b.TouchAPIKeys([]KeyTouch{{scoped.Hash, 999_000}})
		return err
	})
	if _, found, _ := s.APIKeyByID(KeyID(scoped.Hash)); found || changed != 0 {
		t.Fatalf("a touch revived a revoked key")
	}
}

func TestParseScopes(t *testing.T) {
	want := []string{"links:read", "links:write", "stats:read", "sites:write", "domains:write", "keys:write"}
	if got := ScopeNames(); len(got) != len(want) {
		t.Fatalf("ScopeNames = %v", got)
	}
	var all Scopes
	for i, n := range want {
		s, ok := ParseScope(n)
		if !ok || s != 1<<i {
			t.Fatalf("ParseScope(%q) = %v, %v; want bit %d", n, s, ok, i)
		}
		all |= s
	}
	if all != AllScopes || AllScopes.String() != "links:read,links:write,stats:read,sites:write,domains:write,keys:write" {
		t.Fatalf("AllScopes = %v", AllScopes)
	}
	if _, ok := ParseScope("links:*"); ok {
		t.Fatal("links:* parsed")
	}
}

func FuzzDecodeAPIKey(f *testing.F) {
	f.Add(AppendAPIKey(nil, &APIKey{Hash: HashAPIKey([]byte("a")), Owner: "alice", Name: "ci", Scopes: ScopeLinksRead, CreatedAt: 5, LastUsed: 60_000}))
	f.Add(AppendAPIKey(nil, &APIKey{Hash: HashAPIKey([]byte("b")), Owner: "o", Name: "every scope", Scopes: AllScopes, CreatedAt: -1}))
	f.Add([]byte{apiKeyVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		var k APIKey
		if err := DecodeAPIKey(b, &k); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v; want ErrCorrupt", err)
			}
			return
		}
		if again := AppendAPIKey(nil, &k); !bytes.Equal(again, b) {
			t.Fatalf("one encoding: decode+encode gave %x; want %x", again, b)
		}
	})
}
