package raft

import (
	"context"
	"fmt"

	"github.com/waymark/waymark/store"
)

// Issue 12: API keys with scopes. create_key and revoke_key change which
// keys exist; touch_keys carries the last-used times a node collected in
// memory, at most one entry a minute per node (store/DESIGN.md).

// createKeyCmd adds a key to an existing owner. Version 1 payload:
//
//	owner    string
//	name     string, store.CheckKeyName
//	scopes   byte, non-zero, known bits only
//	created  varint, ms
//	hash     32 bytes: SHA-256 of the secret
type createKeyCmd struct {
	Key store.APIKey // ID and LastUsed are not carried
}

func (c *createKeyCmd) kind() cmdType { return cmdCreateKey }

func appendCreateKey(dst []byte, k *store.APIKey) []byte {
	return appendCommand(dst, &createKeyCmd{Key: *k})
}

func (c *createKeyCmd) appendPayload(dst []byte) []byte {
	dst = appendString(dst, c.Key.Owner)
	dst = appendString(dst, c.Key.Name)
	dst = append(dst, byte(c.Key.Scopes))
	dst = appendVarints(dst, c.Key.CreatedAt)
	return append(dst, c.Key.Hash[:]...)
}

func decodeCreateKey(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &createKeyCmd{}
	c.Key.Owner = r.String()
	c.Key.Name = r.String()
	c.Key.Scopes = store.Scopes(r.Byte())
	c.Key.CreatedAt = r.Varint()
	copy(c.Key.Hash[:], r.Fixed(len(c.Key.Hash)))
	if !r.Done() || c.Key.Owner == "" {
		return nil, corrupt("create_key")
	}
	if c.Key.Scopes == 0 || c.Key.Scopes&^store.AllScopes != 0 {
		return nil, invalid("create_key", fmt.Errorf("scopes %#x", byte(c.Key.Scopes)))
	}
	if err := store.CheckOwnerID(c.Key.Owner); err != nil {
		return nil, invalid("create_key", err)
	}
	if err := store.CheckKeyName(c.Key.Name); err != nil {
		return nil, invalid("create_key", err)
	}
	return c, nil
}

func (c *createKeyCmd) apply(a *applier, _ uint64, res *applyResult) {
	k := c.Key
	if err := a.b.CreateAPIKey(&k); err != nil {
		a.reject(res, err)
	}
}

// revokeKeyCmd deletes a key. Version 1 payload:
//
//	owner  string: the key must be this owner's; empty for an operator
//	id     string, store.KeyIDLen lower-case hex digits
type revokeKeyCmd struct {
	Owner string
	ID    string
}

func (c *revokeKeyCmd) kind() cmdType { return cmdRevokeKey }

func appendRevokeKey(dst []byte, owner, id string) []byte {
	return appendCommand(dst, &revokeKeyCmd{Owner: owner, ID: id})
}

func (c *revokeKeyCmd) appendPayload(dst []byte) []byte {
	return appendString(appendString(dst, c.Owner), c.ID)
}

func decodeRevokeKey(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &revokeKeyCmd{Owner: r.String(), ID: r.String()}
	if !r.Done() || !validKeyID(c.ID) {
		return nil, corrupt("revoke_key")
	}
	if err := store.CheckOwnerID(c.Owner); err != nil {
		return nil, invalid("revoke_key", err)
	}
	return c, nil
}

func validKeyID(id string) bool {
	if len(id) != store.KeyIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func (c *revokeKeyCmd) apply(a *applier, _ uint64, res *applyResult) {
	k, err := a.b.RevokeAPIKey(c.Owner, c.ID)
	if err != nil {
		a.reject(res, err)
		return
	}
	a.revokedKeys = append(a.revokedKeys, k.Hash)
}

// MaxTouchesPerEntry bounds the keys one touch_keys entry names; a node
// with more changed keys sends several entries.
const MaxTouchesPerEntry = 1024

// touchKeysCmd raises keys' last-used times. Version 1 payload:
//
//	count   uvarint, 1 to MaxTouchesPerEntry
//	count × { hash 32 bytes, at varint ms ≥ 0 }
type touchKeysCmd struct {
	Touches []store.KeyTouch
}

func (c *touchKeysCmd) kind() cmdType { return cmdTouchKeys }

func appendTouchKeys(dst []byte, touches []store.KeyTouch) []byte {
	return appendCommand(dst, &touchKeysCmd{Touches: touches})
}

func (c *touchKeysCmd) appendPayload(dst []byte) []byte {
	dst = appendUvarint(dst, uint64(len(c.Touches)))
	for _, t := range c.Touches {
		dst = append(dst, t.Hash[:]...)
		dst = appendVarints(dst, t.At)
	}
	return dst
}

func decodeTouchKeys(_ byte, b []byte) (command, error) {
	r := newReader(b)
	n := r.Uvarint()
	if n == 0 || n > MaxTouchesPerEntry {
		return nil, corrupt("touch_keys")
	}
	c := &touchKeysCmd{Touches: make([]store.KeyTouch, 0, n)}
	for i := uint64(0); i < n; i++ {
		var t store.KeyTouch
		copy(t.Hash[:], r.Fixed(len(t.Hash)))
		if t.At = r.Varint(); t.At < 0 {
			r.Fail()
		}
		c.Touches = append(c.Touches, t)
	}
	if !r.Done() {
		return nil, corrupt("touch_keys")
	}
	return c, nil
}

func (c *touchKeysCmd) apply(a *applier, _ uint64, res *applyResult) {
	if _, err := a.b.TouchAPIKeys(c.Touches); err != nil {
		a.reject(res, err)
	}
}

// CreateKey adds a key to an existing owner through the log and returns it
// as this node's store holds it afterwards. An unknown owner is
// store.ErrNotFound, an id already in use store.ErrKeyIDTaken.
func (n *Node) CreateKey(ctx context.Context, k *store.APIKey) (store.APIKey, error) {
	res, err := n.apply(ctx, appendCreateKey(nil, k))
	if err != nil {
		return store.APIKey{}, fmt.Errorf("cannot create API key for owner %q: %w", k.Owner, err)
	}
	n.waitApplied(ctx, res.Index)
	got, found, err := n.st.APIKeyByID(store.KeyID(k.Hash))
	if err != nil {
		return store.APIKey{}, err
	}
	if !found {
		return store.APIKey{}, fmt.Errorf("cannot read API key %s after index %d: %w", store.KeyID(k.Hash), res.Index, store.ErrNotFound)
	}
	return got, nil
}

// RevokeKey deletes the key id through the log; a non-empty owner must own
// it. An unknown key (or another owner's) is store.ErrNotFound. When it
// returns, this node no longer accepts the key.
func (n *Node) RevokeKey(ctx context.Context, owner, id string) error {
	if !validKeyID(id) {
		return fmt.Errorf("cannot revoke API key %q: %w", id, store.ErrNotFound)
	}
	res, err := n.apply(ctx, appendRevokeKey(nil, owner, id))
	if err != nil {
		return fmt.Errorf("cannot revoke API key %s: %w", id, err)
	}
	n.waitApplied(ctx, res.Index)
	return nil
}

// TouchKeys writes last-used times through the log, in entries of at most
// MaxTouchesPerEntry keys. It stops at the first entry that fails.
func (n *Node) TouchKeys(ctx context.Context, touches []store.KeyTouch) error {
	for len(touches) > 0 {
		part := touches[:min(len(touches), MaxTouchesPerEntry)]
		touches = touches[len(part):]
		if _, err := n.apply(ctx, appendTouchKeys(nil, part)); err != nil {
			return fmt.Errorf("cannot record API key use: %w", err)
		}
	}
	return nil
}
