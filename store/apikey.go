package store

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"
)

// API keys with scopes (issue 12). A key is still found by the SHA-256 of
// its secret in table K (hash -> owner id), exactly as before; table A
// adds what a key may do:
//
//	A  key id -> API key record (owner, name, scopes, created, last used, hash)
//
// The key id is the hex of the hash's first 8 bytes, so it is derived, not
// stored: a key made before this table existed (a K entry with no A
// record, the key `waymark owners create` made) has an id too, is found by
// id with one prefix seek on K, and reads as a key with every scope.

// Scopes is a set of API key permissions, one bit each.
type Scopes uint8

// The scopes, in the order they are listed. Never renumbered: the bits are
// stored in key records and carried in raft commands.
const (
	ScopeLinksRead Scopes = 1 << iota
	ScopeLinksWrite
	ScopeStatsRead
	ScopeSitesWrite
	ScopeDomainsWrite
	ScopeKeysWrite

	// AllScopes is every scope this build knows: a key made by
	// `waymark owners create` and every key without a key record.
	AllScopes = ScopeLinksRead | ScopeLinksWrite | ScopeStatsRead | ScopeSitesWrite | ScopeDomainsWrite | ScopeKeysWrite
)

var scopeNames = [...]struct {
	s    Scopes
	name string
}{
	{ScopeLinksRead, "links:read"},
	{ScopeLinksWrite, "links:write"},
	{ScopeStatsRead, "stats:read"},
	{ScopeSitesWrite, "sites:write"},
	{ScopeDomainsWrite, "domains:write"},
	{ScopeKeysWrite, "keys:write"},
}

// ParseScope returns the scope a name such as "links:read" stands for.
func ParseScope(name string) (Scopes, bool) {
	for _, n := range scopeNames {
		if n.name == name {
			return n.s, true
		}
	}
	return 0, false
}

// ScopeNames lists every known scope name, in order.
func ScopeNames() []string {
	out := make([]string, len(scopeNames))
	for i, n := range scopeNames {
		out[i] = n.name
	}
	return out
}

// Has reports whether s holds every scope of need.
func (s Scopes) Has(need Scopes) bool { return s&need == need }

// Names lists the scopes in s, in order; never nil.
func (s Scopes) Names() []string {
	out := []string{}
	for _, n := range scopeNames {
		if s&n.s != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// String is the comma-separated names.
func (s Scopes) String() string { return strings.Join(s.Names(), ",") }

// APIKey is one API key of an owner; the secret itself is never stored.
type APIKey struct {
	ID        string // KeyID(Hash)
	Hash      KeyHash
	Owner     string
	Name      string
	Scopes    Scopes
	CreatedAt int64 // Unix ms
	// LastUsed is the newest use any node has flushed (TouchAPIKeys), in
	// Unix ms at minute resolution; 0 = never.
	LastUsed int64
}

// APIKeyPrefix starts every secret, so secret scanners recognise them.
const APIKeyPrefix = "wm_"

// NewAPIKeySecret makes a new secret: the prefix and 24 random bytes in
// hex, the shape `waymark owners create` has always made.
func NewAPIKeySecret() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cannot make an API key: %w", err)
	}
	return APIKeyPrefix + hex.EncodeToString(b[:]), nil
}

// KeyIDLen is the length of a key id: the hex of the hash's first 8 bytes.
const KeyIDLen = 16

// KeyID is the public id of the key with hash h.
func KeyID(h KeyHash) string { return hex.EncodeToString(h[:KeyIDLen/2]) }

// MaxKeyNameLen bounds a key's name, in bytes.
const MaxKeyNameLen = 100

// ErrKeyIDTaken means a new key's id (its hash's first 8 bytes) is already
// an existing key's: the caller makes a new secret and tries again.
var ErrKeyIDTaken = errors.New("API key id already taken")

// CheckKeyName refuses a name a key record cannot hold: 1 to MaxKeyNameLen
// bytes of UTF-8 without control characters.
func CheckKeyName(name string) error {
	switch {
	case name == "":
		return errors.New("the key name is empty")
	case len(name) > MaxKeyNameLen:
		return fmt.Errorf("the key name is %d bytes; the limit is %d", len(name), MaxKeyNameLen)
	case !utf8.ValidString(name):
		return errors.New("the key name is not valid UTF-8")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return errors.New("the key name holds a control character")
		}
	}
	return nil
}

// checkKeyID refuses anything but 16 lower-case hex digits.
func checkKeyID(id string) bool {
	if len(id) != KeyIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func apiKeyKey(id string) []byte { return append([]byte{tabAPIKey}, id...) }

const apiKeyVersion = 1

// AppendAPIKey appends the record of k to dst (version 1: owner, name,
// scopes, created, last used, hash). The id is not stored: it is the hash's.
func AppendAPIKey(dst []byte, k *APIKey) []byte {
	dst = append(dst, apiKeyVersion)
	dst = AppendString(dst, k.Owner)
	dst = AppendString(dst, k.Name)
	dst = append(dst, byte(k.Scopes))
	dst = appendVarint(dst, k.CreatedAt)
	dst = appendVarint(dst, k.LastUsed)
	return append(dst, k.Hash[:]...)
}

// DecodeAPIKey decodes a record written by AppendAPIKey.
func DecodeAPIKey(b []byte, k *APIKey) error {
	r := NewFieldReader(b)
	if r.Byte() != apiKeyVersion {
		return fmt.Errorf("cannot decode API key: %w: unknown version", ErrCorrupt)
	}
	*k = APIKey{Owner: r.String(), Name: r.String(), Scopes: Scopes(r.Byte()), CreatedAt: r.Varint(), LastUsed: r.Varint()}
	copy(k.Hash[:], r.Fixed(len(k.Hash)))
	if !r.Done() || k.Scopes == 0 || k.Scopes&^AllScopes != 0 || k.Owner == "" || CheckKeyName(k.Name) != nil {
		return fmt.Errorf("cannot decode API key: %w", ErrCorrupt)
	}
	k.ID = KeyID(k.Hash)
	return nil
}

// legacyKey is the key record an old K entry without an A record reads as.
func legacyKey(h KeyHash, o *Owner) APIKey {
	return APIKey{ID: KeyID(h), Hash: h, Owner: o.ID, Name: "default", Scopes: AllScopes, CreatedAt: o.CreatedAt}
}

// keyByID finds the key with id: its A record, or else a K entry whose
// hash starts with the id (a key older than table A). ok is false when
// neither exists.
func keyByID(r pebble.Reader, id string) (k APIKey, legacy bool, ok bool, err error) {
	if !checkKeyID(id) {
		return APIKey{}, false, false, nil
	}
	found, err := get(r, apiKeyKey(id), func(v []byte) error { return DecodeAPIKey(v, &k) })
	if err != nil || found {
		return k, false, found, err
	}
	prefix, _ := hex.DecodeString(id)
	lower := append([]byte{tabKeyHash}, prefix...)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return APIKey{}, false, false, storageErr(err)
	}
	defer it.Close()
	if !it.First() {
		if err := it.Error(); err != nil {
			return APIKey{}, false, false, storageErr(err)
		}
		return APIKey{}, false, false, nil
	}
	if len(it.Key()) != 1+len(k.Hash) {
		return APIKey{}, false, false, fmt.Errorf("cannot read API key %s: %w", id, storageErr(ErrCorrupt))
	}
	var h KeyHash
	copy(h[:], it.Key()[1:])
	owner := string(it.Value())
	var o Owner
	if found, err := get(r, ownerKey(owner), func(v []byte) error { return DecodeOwner(v, &o) }); err != nil {
		return APIKey{}, false, false, err
	} else if !found {
		o.ID = owner // an owner record that went missing; the key still names it
	}
	return legacyKey(h, &o), true, true, nil
}

// APIKeyByHash returns the owner of the key with hash h and the key's
// record (every scope for a key without one).
func (s *Store) APIKeyByHash(h KeyHash) (Owner, APIKey, bool, error) {
	o, found, err := s.OwnerByKey(h)
	if err != nil || !found {
		return Owner{}, APIKey{}, false, err
	}
	var k APIKey
	found, err = get(s.db, apiKeyKey(KeyID(h)), func(v []byte) error { return DecodeAPIKey(v, &k) })
	switch {
	case err != nil:
		return Owner{}, APIKey{}, false, fmt.Errorf("cannot read API key: %w", err)
	case !found || k.Hash != h:
		// No record, or the record of another key sharing the id prefix
		// (CreateAPIKey refuses that, so only an old key can be here).
		k = legacyKey(h, &o)
	}
	return o, k, true, nil
}

// APIKeyByID returns the key with the given id.
func (s *Store) APIKeyByID(id string) (APIKey, bool, error) {
	k, _, found, err := keyByID(s.db, id)
	return k, found, err
}

// APIKeys lists the keys of owner, oldest first (by creation, then id).
// It walks table K, one entry per key in the cluster: listing is rare and
// K is the only table that holds every key, old ones included.
func (s *Store) APIKeys(owner string) ([]APIKey, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabKeyHash}, UpperBound: []byte{tabKeyHash + 1}})
	if err != nil {
		return nil, fmt.Errorf("cannot list API keys: %w", storageErr(err))
	}
	defer it.Close()
	var hashes []KeyHash
	for valid := it.First(); valid; valid = it.Next() {
		if !bytes.Equal(it.Value(), []byte(owner)) || len(it.Key()) != 1+len(KeyHash{}) {
			continue
		}
		var h KeyHash
		copy(h[:], it.Key()[1:])
		hashes = append(hashes, h)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("cannot list API keys: %w", storageErr(err))
	}
	keys := make([]APIKey, 0, len(hashes))
	for _, h := range hashes {
		_, k, found, err := s.APIKeyByHash(h)
		if err != nil {
			return nil, err
		}
		if found && k.Owner == owner {
			keys = append(keys, k)
		}
	}
	sortKeys(keys)
	return keys, nil
}

func sortKeys(keys []APIKey) {
	for i := 1; i < len(keys); i++ { // insertion sort: an owner has a few keys
		for j := i; j > 0 && keyBefore(&keys[j], &keys[j-1]); j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
}

func keyBefore(a, b *APIKey) bool {
	if a.CreatedAt != b.CreatedAt {
		return a.CreatedAt < b.CreatedAt
	}
	return a.ID < b.ID
}

// CreateAPIKey stores a new key of an existing owner. It refuses a key
// whose id is taken (ErrKeyIDTaken), a name CheckKeyName refuses, no or
// unknown scopes and an unknown owner (ErrNotFound).
func (b *Batch) CreateAPIKey(k *APIKey) error {
	if err := CheckKeyName(k.Name); err != nil {
		return fmt.Errorf("cannot create API key: %w", err)
	}
	if k.Scopes == 0 || k.Scopes&^AllScopes != 0 {
		return fmt.Errorf("cannot create API key: scopes %#x", byte(k.Scopes))
	}
	if found, err := get(b.b, ownerKey(k.Owner), func([]byte) error { return nil }); err != nil || !found {
		if err == nil {
			err = ErrNotFound
		}
		return fmt.Errorf("cannot create API key for owner %q: %w", k.Owner, err)
	}
	id := KeyID(k.Hash)
	if _, _, taken, err := keyByID(b.b, id); err != nil || taken {
		if err == nil {
			err = ErrKeyIDTaken
		}
		return fmt.Errorf("cannot create API key %s: %w", id, err)
	}
	k.ID = id
	if err := b.set(keyHashKey(k.Hash), []byte(k.Owner)); err != nil {
		return fmt.Errorf("cannot write API key %s: %w", id, err)
	}
	if err := b.set(apiKeyKey(id), AppendAPIKey(nil, k)); err != nil {
		return fmt.Errorf("cannot write API key %s: %w", id, err)
	}
	return nil
}

// RevokeAPIKey deletes the key with id and returns it. A non-empty owner
// must own the key: another owner's key is ErrNotFound, like a missing one.
func (b *Batch) RevokeAPIKey(owner, id string) (APIKey, error) {
	k, _, found, err := keyByID(b.b, id)
	if err != nil {
		return APIKey{}, err
	}
	if !found || (owner != "" && k.Owner != owner) {
		return APIKey{}, fmt.Errorf("cannot revoke API key %q: %w", id, ErrNotFound)
	}
	if err := b.b.Delete(keyHashKey(k.Hash), nil); err != nil {
		return APIKey{}, fmt.Errorf("cannot revoke API key %s: %w", id, storageErr(err))
	}
	if err := b.b.Delete(apiKeyKey(id), nil); err != nil {
		return APIKey{}, fmt.Errorf("cannot revoke API key %s: %w", id, storageErr(err))
	}
	return k, nil
}

// KeyTouch is one key's newest use seen by a node.
type KeyTouch struct {
	Hash KeyHash
	At   int64 // Unix ms
}

// TouchAPIKeys raises the last-used time of each key to its touch's, if
// later. A key that was revoked meanwhile is skipped; a key without a
// record (older than table A) gets one, with every scope. It returns how
// many keys changed.
func (b *Batch) TouchAPIKeys(touches []KeyTouch) (int, error) {
	changed := 0
	for _, t := range touches {
		var owner string
		found, err := get(b.b, keyHashKey(t.Hash), func(v []byte) error { owner = string(v); return nil })
		if err != nil {
			return changed, err
		}
		if !found {
			continue
		}
		id := KeyID(t.Hash)
		var k APIKey
		found, err = get(b.b, apiKeyKey(id), func(v []byte) error { return DecodeAPIKey(v, &k) })
		if err != nil {
			return changed, err
		}
		switch {
		case found && k.Hash != t.Hash:
			continue // an old key whose id prefix another record holds: nothing to keep it in
		case !found:
			var o Owner
			if _, err := get(b.b, ownerKey(owner), func(v []byte) error { return DecodeOwner(v, &o) }); err != nil {
				return changed, err
			}
			o.ID = owner
			k = legacyKey(t.Hash, &o)
		case t.At <= k.LastUsed:
			continue
		}
		k.LastUsed = max(k.LastUsed, t.At)
		if err := b.set(apiKeyKey(id), AppendAPIKey(nil, &k)); err != nil {
			return changed, fmt.Errorf("cannot write API key %s: %w", id, err)
		}
		changed++
	}
	return changed, nil
}
