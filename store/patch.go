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

// ErrStatusChanged means a conditional edit (LinkPatch.OnlyFrom) found the
// link in another status than the one it was meant for: the click-limit
// hook meeting a takedown, say.
var ErrStatusChanged = errors.New("link status changed meanwhile")

// StatusMask is a set of statuses, one bit per Status.
type StatusMask uint8

// MaskOf returns the set of the given statuses.
func MaskOf(ss ...Status) StatusMask {
	var m StatusMask
	for _, s := range ss {
		m |= 1 << s
	}
	return m
}

// Has reports whether s is in the set.
func (m StatusMask) Has(s Status) bool { return s < 8 && m&(1<<s) != 0 }

// OperatorStatuses are the statuses only an operator sets or lifts.
var OperatorStatuses = MaskOf(StatusBlocked, StatusLegalBlock, StatusReview)

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

	// OnlyFrom, if not zero, applies the edit only to a link in one of
	// these statuses and fails with ErrStatusChanged otherwise. Checked in
	// the FSM, so a decision made on a read is not applied to a link that
	// changed since (the click-limit hook passes only active links).
	OnlyFrom StatusMask
	// ReviewUntil (Unix ms) opens the review window when the edit changes
	// the destination (the edge computes it from --edit-review, so every
	// replica applies the same value). ClearReview closes it (an operator
	// restore).
	ReviewUntil int64
	ClearReview bool

	// SetForwardQuery sets the link's query forwarding to !NoForwardQuery.
	SetForwardQuery bool
	NoForwardQuery  bool

	// SetTags replaces the link's tags with Tags (normal form, see
	// NormalizeTags; empty clears them).
	SetTags bool
	Tags    string

	// SetRules replaces the link's redirect rules with Rules (EncodeRules;
	// empty clears them).
	SetRules bool
	Rules    string
	// SetPassword replaces the link's password hash with PasswordHash (a
	// PHC argon2id string made by the node that took the API call; empty
	// removes the password). SetPreview replaces its encoded preview
	// (EncodePreview; empty removes it).
	SetPassword  bool
	PasswordHash string
	SetPreview   bool
	Preview      string

	// Audit: who made the edit (default Owner, or "operator" when Owner is
	// empty), what kind of change it is (default derived from the change,
	// see historyAction) and why.
	Actor  string
	Action string
	Reason string
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
	if p.OnlyFrom != 0 && !p.OnlyFrom.Has(l.Status) {
		return fmt.Errorf("%w: it is %s", ErrStatusChanged, l.Status)
	}
	if p.SetURL && l.URL != p.URL && l.Permanent() {
		return ErrPermanentRedirect
	}
	if p.SetURL && l.URL != p.URL && p.ReviewUntil != 0 {
		l.ReviewUntil = p.ReviewUntil // bait and switch: a new destination is reviewed
	}
	if p.SetRules && l.Rules != p.Rules && p.Rules != "" && p.ReviewUntil != 0 {
		l.ReviewUntil = p.ReviewUntil // new rule destinations are reviewed too
	}
	if p.ClearReview {
		l.ReviewUntil = 0
	}
	if p.SetURL {
		l.URL = p.URL
	}
	if p.SetForwardQuery {
		l.NoForwardQuery = p.NoForwardQuery
	}
	if p.SetTags {
		if err := CheckStoredTags(p.Tags); err != nil {
			return err
		}
		l.Tags = p.Tags
	}
	if p.SetRules {
		if err := CheckStoredRules(p.Rules); err != nil {
			return err
		}
		l.Rules = p.Rules
	}
	if p.SetPassword {
		if err := CheckPasswordHash(p.PasswordHash); err != nil {
			return err
		}
		// Checked here, in the FSM, like ErrPermanentRedirect: browsers
		// that followed a 301/308 never ask again, password or not.
		if l.PasswordHash == "" && p.PasswordHash != "" && l.Permanent() {
			return ErrPasswordPermanent
		}
		l.PasswordHash = p.PasswordHash
	}
	if p.SetPreview {
		if err := CheckStoredPreview(p.Preview); err != nil {
			return err
		}
		l.Preview = p.Preview
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
	old := l
	if err := p.Apply(&l); err != nil {
		return Link{}, fmt.Errorf("cannot update link %q: %w", p.Code, err)
	}
	l.Index = index
	if l.Status != old.Status {
		b.durable = true
	}
	if err := b.PutLink(&l); err != nil {
		return Link{}, err
	}
	if err := b.retag(&l, old.Tags, l.Tags); err != nil {
		return Link{}, err
	}
	if err := b.queueLinkEvent(&old, &l); err != nil {
		return Link{}, err
	}
	// The audit record goes into the same batch, so the change and its
	// record commit together or not at all.
	if h, changed := patchHistory(p, &old, &l, index); changed {
		if err := b.AddHistory(&h); err != nil {
			return Link{}, err
		}
	}
	return l, nil
}

// IdempotencyWrite asks CreateLink to remember its answer under an owner's
// Idempotency-Key in the same atomic step as the link itself.
type IdempotencyWrite struct {
	Owner  string
	Key    string
	Record Idempotency
}
