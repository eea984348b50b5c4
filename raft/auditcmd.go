package raft

import "github.com/waymark/waymark/store"

// The audit part of update_link version 2: who, what kind of change, why,
// the condition under which it applies and the review window it opens.
//
//	actor        string  store.MaxActorLen bytes at most
//	action       string  store.MaxActionLen
//	reason       string  store.MaxReasonLen
//	flags        byte    bit 0 = ClearReview; other bits refused
//	only_from    byte    store.StatusMask, 0 = any status
//	review_until varint  Unix ms, 0 = none

const (
	auditClearReview byte = 1 << iota
	auditKnown            = auditClearReview
)

func appendPatchAudit(dst []byte, p *store.LinkPatch) []byte {
	dst = appendString(dst, p.Actor)
	dst = appendString(dst, p.Action)
	dst = appendString(dst, p.Reason)
	var flags byte
	if p.ClearReview {
		flags |= auditClearReview
	}
	dst = append(dst, flags, byte(p.OnlyFrom))
	return appendVarints(dst, p.ReviewUntil)
}

// patchAudit reads what appendPatchAudit wrote; a field past its bound
// marks r bad, so every replica refuses the entry alike.
func (r *reader) patchAudit(p *store.LinkPatch) {
	p.Actor = r.String()
	p.Action = r.String()
	p.Reason = r.String()
	flags := r.Byte()
	p.OnlyFrom = store.StatusMask(r.Byte())
	p.ReviewUntil = r.Varint()
	p.ClearReview = flags&auditClearReview != 0
	if flags&^auditKnown != 0 || len(p.Actor) > store.MaxActorLen || len(p.Action) > store.MaxActionLen || len(p.Reason) > store.MaxReasonLen {
		r.Fail()
	}
}
