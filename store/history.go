package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// The audit trail of a link: one record per change, written by the FSM in
// the batch of the log entry that made the change, so a change without its
// record (or the reverse) never exists on any replica.

// Actors that are not owners.
const (
	ActorOperator = "operator" // the admin API (`waymark links ...`)
	ActorSystem   = "system"   // the node itself (click limit reached)
)

// Actions a history entry names. Other commands (report resolution) may
// name their own.
const (
	ActionCreate     = "create"
	ActionEdit       = "edit"
	ActionDelete     = "delete"
	ActionStatus     = "status" // an owner's status change other than delete
	ActionBlock      = "block"
	ActionLegalBlock = "legal_block"
	ActionReview     = "review"
	ActionRestore    = "restore"
	ActionClickLimit = "click_limit"
)

// Bounds of one history record, checked when written and when decoded.
const (
	MaxActorLen      = 128
	MaxActionLen     = 64
	MaxReasonLen     = 1024
	maxChanges       = 16
	maxChangeValue   = 64 << 10 // a destination URL is far shorter
	maxHistoryPerKey = 256      // records of one link in one log entry
	// MaxHistoryList bounds the records one read returns (the newest).
	MaxHistoryList = 1000
)

// ErrHistoryInvalid means a history entry breaks a bound above.
var ErrHistoryInvalid = errors.New("invalid history entry")

// FieldChange is one field an entry changed, as text.
type FieldChange struct {
	Field string `json:"field"`
	Old   string `json:"old"`
	New   string `json:"new"`
}

// HistoryEntry is one change to a link.
type HistoryEntry struct {
	Code    string        // from the key
	Index   uint64        // raft index of the log entry; from the key
	At      int64         // Unix ms, the proposer's clock carried in the command
	Actor   string        // owner id, ActorOperator or ActorSystem
	Action  string        // ActionCreate, ...
	Reason  string        // why, as the actor gave it; may be empty
	Changes []FieldChange // what changed; may be empty (a report dismissed)
}

const historyVersion = 1

// checkHistory refuses an entry that DecodeHistory (or the key) would
// reject.
func checkHistory(h *HistoryEntry) error {
	if h.Code == "" || strings.IndexByte(h.Code, 0) >= 0 {
		return fmt.Errorf("%w: code %q", ErrHistoryInvalid, h.Code)
	}
	return checkHistoryFields(h)
}

// checkHistoryFields checks the fields the record itself holds.
func checkHistoryFields(h *HistoryEntry) error {
	switch {
	case h.Actor == "" || len(h.Actor) > MaxActorLen:
		return fmt.Errorf("%w: actor of %d bytes", ErrHistoryInvalid, len(h.Actor))
	case h.Action == "" || len(h.Action) > MaxActionLen:
		return fmt.Errorf("%w: action of %d bytes", ErrHistoryInvalid, len(h.Action))
	case len(h.Reason) > MaxReasonLen:
		return fmt.Errorf("%w: reason of %d bytes, at most %d", ErrHistoryInvalid, len(h.Reason), MaxReasonLen)
	case len(h.Changes) > maxChanges:
		return fmt.Errorf("%w: %d changes", ErrHistoryInvalid, len(h.Changes))
	}
	for _, c := range h.Changes {
		if c.Field == "" || len(c.Field) > MaxActionLen || len(c.Old) > maxChangeValue || len(c.New) > maxChangeValue {
			return fmt.Errorf("%w: change of field %q", ErrHistoryInvalid, c.Field)
		}
	}
	return nil
}

// AppendHistory appends the encoding of h (without Code and Index, which
// are in the key) to dst.
func AppendHistory(dst []byte, h *HistoryEntry) []byte {
	dst = append(dst, historyVersion)
	dst = appendVarint(dst, h.At)
	dst = AppendString(dst, h.Actor)
	dst = AppendString(dst, h.Action)
	dst = AppendString(dst, h.Reason)
	dst = appendUvarint(dst, uint64(len(h.Changes)))
	for _, c := range h.Changes {
		dst = AppendString(dst, c.Field)
		dst = AppendString(dst, c.Old)
		dst = AppendString(dst, c.New)
	}
	return dst
}

// DecodeHistory decodes a record written by AppendHistory into h, leaving
// h.Code and h.Index alone.
func DecodeHistory(b []byte, h *HistoryEntry) error {
	r := NewFieldReader(b)
	if r.Byte() != historyVersion {
		return fmt.Errorf("cannot decode history entry: %w: unknown version", ErrCorrupt)
	}
	h.At = r.Varint()
	h.Actor = r.String()
	h.Action = r.String()
	h.Reason = r.String()
	n := r.Uvarint()
	h.Changes = nil
	if n > maxChanges {
		r.Fail()
	}
	for i := uint64(0); i < n && !r.bad; i++ {
		h.Changes = append(h.Changes, FieldChange{Field: r.String(), Old: r.String(), New: r.String()})
	}
	if !r.Done() {
		return fmt.Errorf("cannot decode history entry: %w", ErrCorrupt)
	}
	if err := checkHistoryFields(h); err != nil {
		return fmt.Errorf("cannot decode history entry: %w: %w", ErrCorrupt, err)
	}
	return nil
}

// historyPrefix is H code 0x00: every record of one link, oldest first.
func historyPrefix(code string) []byte {
	k := make([]byte, 0, len(code)+12)
	k = append(k, tabHistory)
	k = append(k, code...)
	return append(k, 0)
}

// historyKey is H code 0x00 index(be64) seq(1).
func historyKey(code string, index uint64, seq int) []byte {
	k := historyPrefix(code)
	k = binary.BigEndian.AppendUint64(k, index)
	return append(k, byte(seq))
}

// AddHistory records h in the batch under (h.Code, h.Index); a second
// record of the same link in the same entry takes the next sequence
// number. Commands that change a link outside UpdateLink and CreateLink
// (report resolution) call it inside their own apply, with the entry's
// index, so the record commits with their change.
func (b *Batch) AddHistory(h *HistoryEntry) error {
	if err := checkHistory(h); err != nil {
		return fmt.Errorf("cannot record history of link %q: %w", h.Code, err)
	}
	for seq := 0; seq < maxHistoryPerKey; seq++ {
		k := historyKey(h.Code, h.Index, seq)
		found, err := get(b.b, k, func([]byte) error { return nil })
		if err != nil {
			return fmt.Errorf("cannot record history of link %q: %w", h.Code, err)
		}
		if found {
			continue
		}
		if err := b.set(k, AppendHistory(nil, h)); err != nil {
			return fmt.Errorf("cannot record history of link %q: %w", h.Code, err)
		}
		return nil
	}
	return fmt.Errorf("cannot record history of link %q: %w: %d records in entry %d", h.Code, ErrHistoryInvalid, maxHistoryPerKey, h.Index)
}

// LinkHistory returns the newest limit (at most MaxHistoryList) records of
// code's history, oldest first.
func (s *Store) LinkHistory(code string, limit int) ([]HistoryEntry, error) {
	if limit <= 0 || limit > MaxHistoryList {
		limit = MaxHistoryList
	}
	prefix := historyPrefix(code)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("cannot read history of link %q: %w", code, storageErr(err))
	}
	var out []HistoryEntry
	for valid := it.Last(); valid && len(out) < limit; valid = it.Prev() {
		k := it.Key()[len(prefix):]
		if len(k) != 9 {
			it.Close()
			return nil, fmt.Errorf("cannot read history of link %q: %w: key of %d bytes", code, storageErr(ErrCorrupt), len(k))
		}
		h := HistoryEntry{Code: code, Index: binary.BigEndian.Uint64(k)}
		if err := DecodeHistory(it.Value(), &h); err != nil {
			it.Close()
			return nil, fmt.Errorf("cannot read history of link %q: %w", code, storageErr(err))
		}
		out = append(out, h)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("cannot read history of link %q: %w", code, storageErr(err))
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// createHistory is the record of a new link.
func createHistory(l *Link) HistoryEntry {
	h := HistoryEntry{Code: l.Code, Index: l.Index, At: l.CreatedAt, Actor: l.Owner, Action: ActionCreate,
		Changes: []FieldChange{
			{Field: "url", New: l.URL},
			{Field: "status", New: l.Status.String()},
			{Field: "redirect", New: strconv.Itoa(int(l.Redirect))},
		}}
	if h.Actor == "" {
		h.Actor = ActorOperator
	}
	if l.ExpiresAt != 0 {
		h.Changes = append(h.Changes, FieldChange{Field: "expires_at", New: millisText(l.ExpiresAt)})
	}
	if l.ClickLimit != 0 {
		h.Changes = append(h.Changes, FieldChange{Field: "click_limit", New: strconv.FormatInt(l.ClickLimit, 10)})
	}
	if l.NoForwardQuery {
		h.Changes = append(h.Changes, FieldChange{Field: "forward_query", New: "false"})
	}
	if l.Tags != "" {
		h.Changes = append(h.Changes, FieldChange{Field: "tags", New: l.Tags})
	}
	if l.Rules != "" {
		h.Changes = append(h.Changes, FieldChange{Field: "rules", New: RulesSummary(l.Rules)})
	}
	return h
}

// patchHistory is the record of p turning old into l; changed is false
// when nothing changed and the patch names no action of its own.
func patchHistory(p *LinkPatch, old, l *Link, index uint64) (HistoryEntry, bool) {
	h := HistoryEntry{Code: l.Code, Index: index, At: p.UpdatedAt, Actor: p.Actor, Action: p.Action, Reason: p.Reason}
	if h.Actor == "" {
		h.Actor = p.Owner
	}
	if h.Actor == "" {
		h.Actor = ActorOperator
	}
	add := func(field, o, n string) {
		if o != n {
			h.Changes = append(h.Changes, FieldChange{Field: field, Old: o, New: n})
		}
	}
	add("url", old.URL, l.URL)
	add("expires_at", millisText(old.ExpiresAt), millisText(l.ExpiresAt))
	add("click_limit", intText(old.ClickLimit), intText(l.ClickLimit))
	add("status", old.Status.String(), l.Status.String())
	add("review_until", millisText(old.ReviewUntil), millisText(l.ReviewUntil))
	add("forward_query", strconv.FormatBool(!old.NoForwardQuery), strconv.FormatBool(!l.NoForwardQuery))
	add("tags", old.Tags, l.Tags)
	if old.Rules != l.Rules {
		h.Changes = append(h.Changes, FieldChange{Field: "rules", Old: RulesSummary(old.Rules), New: RulesSummary(l.Rules)})
	}
	if old.PasswordHash != l.PasswordHash {
		o, n := passwordText(old.PasswordHash, l.PasswordHash)
		h.Changes = append(h.Changes, FieldChange{Field: "password", Old: o, New: n})
	}
	add("preview", previewText(old.Preview), previewText(l.Preview))
	if len(h.Changes) == 0 && h.Action == "" {
		return h, false
	}
	if h.Action == "" {
		h.Action = historyAction(p, old, l)
	}
	if len(h.Reason) > MaxReasonLen {
		h.Reason = h.Reason[:MaxReasonLen] // the command decoder bounds it already
	}
	return h, true
}

// historyAction names a change that did not name itself.
func historyAction(p *LinkPatch, old, l *Link) string {
	if old.Status == l.Status {
		if p.Owner == "" && old.ReviewUntil != 0 && l.ReviewUntil == 0 {
			return ActionRestore // an operator ended an edit's review window
		}
		return ActionEdit
	}
	switch l.Status {
	case StatusBlocked:
		return ActionBlock
	case StatusLegalBlock:
		return ActionLegalBlock
	case StatusReview:
		return ActionReview
	case StatusLimited:
		return ActionClickLimit
	case StatusDisabled:
		if p.Owner != "" {
			return ActionDelete
		}
	}
	if OperatorStatus(old.Status) {
		return ActionRestore
	}
	return ActionStatus
}

// millisText shows a Unix ms time as the UTC RFC 3339 text the API uses;
// zero (unset) is empty.
func millisText(ms int64) string {
	if ms == 0 {
		return ""
	}
	return formatMillis(ms)
}

func formatMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.999Z07:00")
}

func intText(v int64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatInt(v, 10)
}
