package store

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Retention of deleted links: once a link has been deleted (status
// disabled) for long enough, its destination is purged. The record itself
// stays, with an empty URL, so the code is reserved for ever: CreateLink
// still finds it taken and generated codes never come back to it.
//
// There is no index of deleted links by time: the leader scans the link
// table in bounded pages (DeletedLinksDue) and names the codes it found in
// a log entry; every replica checks each code again (PurgeDeletedLinks),
// so all of them purge exactly the same links whatever their clocks say.

// ActionPurge is the history action of a purge; PurgedValue replaces the
// destination in every earlier history record of the link.
const (
	ActionPurge = "purge"
	PurgedValue = "(purged)"
)

// Purged reports whether l is a deleted link whose destination is gone.
func (l *Link) Purged() bool { return l.Status == StatusDisabled && l.URL == "" }

// purgeDue reports whether l is deleted, not yet purged, and was last
// changed (deleted) at or before cutoff.
func purgeDue(l *Link, cutoff int64) bool {
	return l.Status == StatusDisabled && l.URL != "" && l.UpdatedAt <= cutoff
}

// PurgeDeletedLinks clears the destination of every named link that is
// still due at cutoff (deleted at or before it, not purged yet); the
// others are left alone. A purged link gets UpdatedAt = at and Index =
// index. It returns the codes it purged. Deterministic given the same
// prior state, as an FSM step must be.
func (b *Batch) PurgeDeletedLinks(codes []string, cutoff, at int64, index uint64) ([]string, error) {
	var purged []string
	for _, code := range codes {
		var l Link
		found, err := b.Link(code, &l)
		if err != nil {
			return nil, err
		}
		if !found || !purgeDue(&l, cutoff) {
			continue
		}
		l.URL, l.UpdatedAt, l.Index = "", at, index
		if err := b.PutLink(&l); err != nil {
			return nil, err
		}
		if err := b.scrubHistory(code, at, index); err != nil {
			return nil, err
		}
		purged = append(purged, code)
	}
	return purged, nil
}

// DeletedLinksDue scans up to scanLimit links in code order, starting
// after the code from (empty: from the first), and returns the codes of
// at most max deleted links due for purging at cutoff. next is the code
// to continue after, or "" once the scan reached the end of the table.
func (s *Store) DeletedLinksDue(from string, cutoff int64, scanLimit, max int) (due []string, next string, err error) {
	lower := []byte{tabLink}
	if from != "" {
		lower = append(linkKey(nil, []byte(from)), 0) // the first key after from
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{tabLink + 1}})
	if err != nil {
		return nil, "", fmt.Errorf("cannot scan links: %w", storageErr(err))
	}
	defer it.Close()
	scanned := 0
	var last []byte
	for valid := it.First(); valid; valid = it.Next() {
		if scanned == scanLimit || len(due) == max {
			return due, string(last), nil
		}
		scanned++
		last = append(last[:0], it.Key()[1:]...)
		var l Link
		if err := DecodeLink(it.Value(), &l); err != nil {
			return nil, "", fmt.Errorf("cannot scan links: %w", storageErr(err))
		}
		if purgeDue(&l, cutoff) {
			due = append(due, string(last))
		}
	}
	if err := it.Error(); err != nil {
		return nil, "", fmt.Errorf("cannot scan links: %w", storageErr(err))
	}
	return due, "", nil
}

// scrubHistory replaces the destination in every history record of code
// (its create and edits name it) with PurgedValue, and records the purge
// itself, by the system, in the purging entry.
func (b *Batch) scrubHistory(code string, at int64, index uint64) error {
	prefix := historyPrefix(code)
	it, err := b.b.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("cannot read history of link %q: %w", code, storageErr(err))
	}
	type rewrite struct {
		key []byte
		h   HistoryEntry
	}
	// Collect first: the batch is not written while its iterator is open.
	var todo []rewrite
	for valid := it.First(); valid; valid = it.Next() {
		h := HistoryEntry{Code: code}
		if err := DecodeHistory(it.Value(), &h); err != nil {
			it.Close()
			return fmt.Errorf("cannot read history of link %q: %w", code, storageErr(err))
		}
		changed := false
		for i := range h.Changes {
			c := &h.Changes[i]
			if c.Field != "url" {
				continue
			}
			if c.Old != "" {
				c.Old, changed = PurgedValue, true
			}
			if c.New != "" {
				c.New, changed = PurgedValue, true
			}
		}
		if changed {
			todo = append(todo, rewrite{key: append([]byte(nil), it.Key()...), h: h})
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("cannot read history of link %q: %w", code, storageErr(err))
	}
	for _, r := range todo {
		if err := b.set(r.key, AppendHistory(nil, &r.h)); err != nil {
			return fmt.Errorf("cannot rewrite history of link %q: %w", code, err)
		}
	}
	return b.AddHistory(&HistoryEntry{Code: code, Index: index, At: at, Actor: ActorSystem, Action: ActionPurge,
		Reason:  "destination purged after the link was deleted",
		Changes: []FieldChange{{Field: "url", Old: PurgedValue}}})
}
