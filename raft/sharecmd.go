package raft

import (
	"context"
	"fmt"

	"github.com/waymark/waymark/store"
)

// Issue 13 point 6: shared dashboards. create_share and delete_share
// change which share tokens exist (store/share.go). Every node reads
// shares from its own replica on every request, so a delete takes effect
// on a node as soon as that node applies it.
const (
	cmdCreateShare cmdType = 26
	cmdDeleteShare cmdType = 27
)

// Wire codes of the share sentinels (result.go).
const (
	errCodeShareIDTaken  errCode = 23
	errCodeTooManyShares errCode = 24
)

func init() {
	commandTable[cmdCreateShare] = commandSpec{name: "create_share", version: 1, decode: decodeCreateShare}
	commandTable[cmdDeleteShare] = commandSpec{name: "delete_share", version: 1, decode: decodeDeleteShare}
	forwardable[cmdCreateShare], forwardable[cmdDeleteShare] = true, true // an owner's writes, from any node
	wireErrors = append(wireErrors,
		struct {
			code errCode
			err  error
		}{errCodeShareIDTaken, store.ErrShareIDTaken},
		struct {
			code errCode
			err  error
		}{errCodeTooManyShares, store.ErrTooManyShares})
}

// createShareCmd adds a share. Version 1 payload:
//
//	kind      byte, store.ShareKind
//	owner     string
//	target    string: site id or link identifier
//	name      string
//	password  string: encoded hash, empty for none
//	created   varint, ms
//	hash      32 bytes: SHA-256 of the token's random bytes
type createShareCmd struct {
	Share store.Share // ID is not carried
}

func (c *createShareCmd) kind() cmdType { return cmdCreateShare }

func (c *createShareCmd) appendPayload(dst []byte) []byte {
	s := &c.Share
	dst = append(dst, byte(s.Kind))
	dst = appendString(dst, s.Owner)
	dst = appendString(dst, s.Target)
	dst = appendString(dst, s.Name)
	dst = appendString(dst, s.PasswordHash)
	dst = appendVarints(dst, s.CreatedAt)
	return append(dst, s.Hash[:]...)
}

func decodeCreateShare(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &createShareCmd{}
	s := &c.Share
	s.Kind = store.ShareKind(r.Byte())
	s.Owner = r.String()
	s.Target = r.String()
	s.Name = r.String()
	s.PasswordHash = r.String()
	s.CreatedAt = r.Varint()
	copy(s.Hash[:], r.Fixed(len(s.Hash)))
	if !r.Done() {
		return nil, corrupt("create_share")
	}
	if err := store.CheckShare(s); err != nil {
		return nil, invalid("create_share", err)
	}
	return c, nil
}

func (c *createShareCmd) apply(a *applier, _ uint64, res *applyResult) {
	s := c.Share
	if err := a.b.CreateShare(&s); err != nil {
		a.reject(res, err)
	}
}

// deleteShareCmd removes a share. Version 1 payload:
//
//	kind    byte, store.ShareKind
//	owner   string: the share must be this owner's; empty for an operator
//	target  string
//	id      string, store.ShareIDLen lower-case hex digits
type deleteShareCmd struct {
	Kind   store.ShareKind
	Owner  string
	Target string
	ID     string
}

func (c *deleteShareCmd) kind() cmdType { return cmdDeleteShare }

func (c *deleteShareCmd) appendPayload(dst []byte) []byte {
	dst = append(dst, byte(c.Kind))
	return appendString(appendString(appendString(dst, c.Owner), c.Target), c.ID)
}

func decodeDeleteShare(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &deleteShareCmd{Kind: store.ShareKind(r.Byte()), Owner: r.String(), Target: r.String(), ID: r.String()}
	if !r.Done() || !validKeyID(c.ID) || (c.Kind != store.ShareSite && c.Kind != store.ShareLink) || c.Target == "" {
		return nil, corrupt("delete_share")
	}
	if err := store.CheckOwnerID(c.Owner); err != nil {
		return nil, invalid("delete_share", err)
	}
	return c, nil
}

func (c *deleteShareCmd) apply(a *applier, _ uint64, res *applyResult) {
	if _, err := a.b.DeleteShare(c.Owner, c.Kind, c.Target, c.ID); err != nil {
		a.reject(res, err)
	}
}

// CreateShare stores a new share through the log and returns it as this
// node's store holds it afterwards: the share opens the dashboard on this
// node when CreateShare returns. An id already in use is
// store.ErrShareIDTaken; a target with too many shares
// store.ErrTooManyShares.
func (n *Node) CreateShare(ctx context.Context, s *store.Share) (store.Share, error) {
	res, err := n.apply(ctx, appendCommand(nil, &createShareCmd{Share: *s}))
	if err != nil {
		return store.Share{}, fmt.Errorf("cannot create share of %s %q: %w", s.Kind, s.Target, err)
	}
	n.waitApplied(ctx, res.Index)
	got, found, err := n.st.ShareByHash(s.Hash)
	if err != nil {
		return store.Share{}, err
	}
	if !found {
		return store.Share{}, fmt.Errorf("cannot read share %s after index %d: %w", store.ShareID(s.Hash), res.Index, store.ErrNotFound)
	}
	return got, nil
}

// DeleteShare revokes the share id of one site or link through the log; a
// non-empty owner must own it. An unknown share (or another owner's, or
// another target's) is store.ErrNotFound. When it returns, this node no
// longer opens the share.
func (n *Node) DeleteShare(ctx context.Context, owner string, kind store.ShareKind, target, id string) error {
	if !validKeyID(id) {
		return fmt.Errorf("cannot delete share %q: %w", id, store.ErrNotFound)
	}
	res, err := n.apply(ctx, appendCommand(nil, &deleteShareCmd{Kind: kind, Owner: owner, Target: target, ID: id}))
	if err != nil {
		return fmt.Errorf("cannot delete share %s: %w", id, err)
	}
	n.waitApplied(ctx, res.Index)
	return nil
}
