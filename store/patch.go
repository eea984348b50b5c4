package store

import (
	"errors"
	"fmt"
)

// ErrPermanentRedirect means a destination change was asked of a 301/308
// link, whose redirect browsers may have cached forever.
var ErrPermanentRedirect = errors.New("destination of a permanent redirect cannot change")

// ErrLinkLocked means an owner tried to change a link an operator has put
// under review, blocked or legally blocked.
var ErrLinkLocked = errors.New("link is locked by an operator")

// OperatorStatus reports whether only an operator may set or leave s.
func OperatorStatus(s Status) bool {
	return s == StatusBlocked || s == StatusLegalBlock || s == StatusReview
}

// LinkPatch is an edit of a link. Only the Set* fields are applied. An
// empty Owner is an operator edit (takedown, click limit) that any link
// accepts; otherwise the link must belong to Owner.
type LinkPatch struct {
	Code          string
	Owner         string
	UpdatedAt     int64
	SetURL        bool
	URL           string
	SetExpiresAt  bool
	ExpiresAt     int64
	SetClickLimit bool
	ClickLimit    int64
	SetStatus     bool
	Status        Status
}

// Apply edits l in place.
func (p *LinkPatch) Apply(l *Link) error {
	// A purged link has no destination left to restore or redirect to:
	// nobody edits it again (its code stays reserved).
	if l.Purged() {
		return fmt.Errorf("destination was purged after deletion: %w", ErrNotFound)
	}
	// Checked here, inside the FSM, so an owner's edit racing an operator
	// takedown can never undo it.
	if p.Owner != "" && (OperatorStatus(l.Status) || (p.SetStatus && OperatorStatus(p.Status))) {
		return ErrLinkLocked
	}
	if p.SetURL && l.URL != p.URL && l.Permanent() {
		return ErrPermanentRedirect
	}
	if p.SetURL {
		l.URL = p.URL
	}
	if p.SetExpiresAt {
		l.ExpiresAt = p.ExpiresAt
	}
	if p.SetClickLimit {
		l.ClickLimit = p.ClickLimit
	}
	if p.SetStatus {
		l.Status = p.Status
	}
	l.UpdatedAt = p.UpdatedAt
	return nil
}

// UpdateLink applies p to the stored link and returns the new record.
// Another owner's link reports ErrNotFound, never a permission error.
func (b *Batch) UpdateLink(p *LinkPatch, index uint64) (Link, error) {
	var l Link
	found, err := b.Link(p.Code, &l)
	if err != nil {
		return Link{}, err
	}
	if !found || (p.Owner != "" && p.Owner != l.Owner) {
		return Link{}, fmt.Errorf("cannot update link %q: %w", p.Code, ErrNotFound)
	}
	oldStatus := l.Status
	if err := p.Apply(&l); err != nil {
		return Link{}, fmt.Errorf("cannot update link %q: %w", p.Code, err)
	}
	l.Index = index
	if l.Status != oldStatus {
		b.durable = true
	}
	return l, b.PutLink(&l)
}

// IdempotencyWrite asks CreateLink to remember its answer under an owner's
// Idempotency-Key in the same atomic step as the link itself.
type IdempotencyWrite struct {
	Owner  string
	Key    string
	Record Idempotency
}
