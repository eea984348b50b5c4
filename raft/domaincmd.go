package raft

import (
	"context"
	"fmt"

	"github.com/waymark/waymark/store"
)

// domainUpdateCmd is one change of a custom domain (issue 12): an owner
// registers or deletes one, the operator adds or approves one. Version 1
// payload:
//
//	op     byte    store.DomainOp (1 register, 2 add, 3 approve, 4 delete)
//	name   string  the domain, canonical (store.ParseDomainName)
//	owner  string  the caller (register, delete; "" = operator) or the new owner (add)
//	at     varint  the proposer's clock, Unix ms
type domainUpdateCmd struct {
	Change store.DomainChange
}

func (c *domainUpdateCmd) kind() cmdType { return cmdDomainUpdate }

// appendDomainUpdate encodes a domain_update command.
func appendDomainUpdate(dst []byte, ch *store.DomainChange) []byte {
	return appendCommand(dst, &domainUpdateCmd{Change: *ch})
}

func (c *domainUpdateCmd) appendPayload(dst []byte) []byte {
	ch := &c.Change
	dst = append(dst, byte(ch.Op))
	dst = appendString(dst, ch.Name)
	dst = appendString(dst, ch.Owner)
	return appendVarints(dst, ch.At)
}

// decodeDomainUpdate checks every field with the store's own rules, so a
// committed entry that decodes is refused only for what the store holds.
func decodeDomainUpdate(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &domainUpdateCmd{}
	ch := &c.Change
	ch.Op = store.DomainOp(r.Byte())
	ch.Name = r.String()
	ch.Owner = r.String()
	ch.At = r.Varint()
	if !r.Done() {
		return nil, corrupt("domain_update")
	}
	if err := ch.Check(); err != nil {
		return nil, invalid("domain_update", err)
	}
	return c, nil
}

func (c *domainUpdateCmd) apply(a *applier, _ uint64, res *applyResult) {
	d, err := a.b.UpdateDomain(&c.Change)
	if err != nil {
		a.reject(res, err)
		return
	}
	res.Domain = &d
}

// UpdateDomain applies one change of a custom domain through the log and
// returns the domain as stored. Someone else's domain fails with
// store.ErrDomainTaken (register, add) or store.ErrNotFound (approve,
// delete); bad fields are refused here, before the log.
func (n *Node) UpdateDomain(ctx context.Context, ch *store.DomainChange) (store.Domain, uint64, error) {
	if err := ch.Check(); err != nil {
		return store.Domain{}, 0, fmt.Errorf("cannot change domain %q: %w", ch.Name, err)
	}
	res, err := n.apply(ctx, appendDomainUpdate(nil, ch))
	if err != nil {
		return store.Domain{}, 0, err
	}
	if res.Domain == nil {
		return store.Domain{}, res.Index, fmt.Errorf("cannot read the changed domain %q from the answer: %w", ch.Name, store.ErrUnknownOutcome)
	}
	return *res.Domain, res.Index, nil
}
