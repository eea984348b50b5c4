package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"
)

// Public abuse reports. One record per case: every report of a code while
// its case is open is folded into that case (count, reasons, first and last
// time, the first few details), so a flood of reports of one code grows
// neither the store nor the record. Resolving closes the case; a later
// report of the same code opens a new one. See DESIGN.md, "Reports".

// ErrReportResolved means a report case was already resolved.
var ErrReportResolved = errors.New("report already resolved")

// Bounds of a report case, checked by the command decoders and the store.
const (
	MaxReportDetails   = 5    // detail texts kept per case (the first ones)
	MaxReportDetailLen = 1000 // bytes of one detail text
	// The resolution goes into the link's history too, as
	// "report ID: reason" by the same actor, so both fit its bounds.
	MaxReportReasonLen  = MaxReasonLen - 32 // bytes of an operator's resolution reason
	MaxReportActorLen   = MaxActorLen       // bytes of the resolving actor's name
	MaxReportCodeLen    = 255               // bytes of a reported code: "domain/code" on a custom domain (MaxDomainLen)
	reportRecordVersion = 1
)

// ReportReasons is a set of report reasons, one bit each.
type ReportReasons uint8

const (
	ReasonPhishing ReportReasons = 1 << iota
	ReasonMalware
	ReasonSpam
	ReasonIllegal
	ReasonOther
	reasonsKnown = ReasonPhishing | ReasonMalware | ReasonSpam | ReasonIllegal | ReasonOther
)

var reasonNames = [...]string{"phishing", "malware", "spam", "illegal", "other"}

// ParseReportReason parses one reason name.
func ParseReportReason(name string) (ReportReasons, bool) {
	for i, n := range reasonNames {
		if n == name {
			return 1 << i, true
		}
	}
	return 0, false
}

// Valid reports whether r is a non-empty set of known reasons.
func (r ReportReasons) Valid() bool { return r != 0 && r&^reasonsKnown == 0 }

// Names lists the reasons in r in a fixed order.
func (r ReportReasons) Names() []string {
	out := make([]string, 0, bits.OnesCount8(uint8(r)))
	for i, n := range reasonNames {
		if r&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// ReportAction is what an operator did with a report case.
type ReportAction uint8

const (
	ReportNone    ReportAction = 0 // open case
	ReportBlock   ReportAction = 1 // link blocked (410)
	ReportLegal   ReportAction = 2 // link legally blocked (451)
	ReportReview  ReportAction = 3 // link behind the review interstitial
	ReportDismiss ReportAction = 4 // no change to the link
	actionCount                = 5
)

var actionNames = [actionCount]string{"", "block", "legal", "review", "dismiss"}

func (a ReportAction) String() string {
	if a < actionCount {
		return actionNames[a]
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// ParseReportAction parses an action name; "" is not an action.
func ParseReportAction(name string) (ReportAction, bool) {
	for i, n := range actionNames {
		if i > 0 && n == name {
			return ReportAction(i), true
		}
	}
	return 0, false
}

// LinkStatus is the operator status the action puts on the link; false
// for dismiss, which leaves the link alone.
func (a ReportAction) LinkStatus() (Status, bool) {
	switch a {
	case ReportBlock:
		return StatusBlocked, true
	case ReportLegal:
		return StatusLegalBlock, true
	case ReportReview:
		return StatusReview, true
	}
	return 0, false
}

// Report is one case: every report of Code from its opening to its
// resolution. Times are Unix milliseconds.
type Report struct {
	ID      uint64 // Raft index of the entry that opened the case
	Code    string
	Count   uint64 // reports folded into the case
	Reasons ReportReasons
	FirstAt int64
	LastAt  int64
	Details []string // the first MaxReportDetails non-empty details
	// Resolution, zero while the case is open. The actor and reason are
	// kept here so the case itself says who closed it, when and why.
	Action         ReportAction
	ResolvedAt     int64
	ResolvedBy     string
	ResolvedReason string
}

// Open reports whether the case is still open.
func (r *Report) Open() bool { return r.Action == ReportNone }

// ReportFiling is one or more reports of a code to fold into its open case
// (an edge coalesces repeated reports of a code into one filing).
type ReportFiling struct {
	Code    string
	Reasons ReportReasons
	Count   uint64
	FirstAt int64
	LastAt  int64
	Details []string
}

// Check refuses a filing the store could not hold.
func (f *ReportFiling) Check() error {
	switch {
	case f.Code == "" || len(f.Code) > MaxReportCodeLen:
		return fmt.Errorf("report code %q: empty or longer than %d bytes", f.Code, MaxReportCodeLen)
	case !f.Reasons.Valid():
		return fmt.Errorf("report reasons %#x: empty or unknown", uint8(f.Reasons))
	case f.Count == 0:
		return errors.New("report count is zero")
	case f.LastAt < f.FirstAt:
		return errors.New("report last time is before its first time")
	case len(f.Details) > MaxReportDetails:
		return fmt.Errorf("report has %d details; at most %d", len(f.Details), MaxReportDetails)
	}
	for _, d := range f.Details {
		if err := checkReportText("detail", d, MaxReportDetailLen); err != nil {
			return err
		}
		if d == "" {
			return errors.New("report detail is empty")
		}
	}
	return nil
}

// ReportResolution closes a case and applies its action to the link.
type ReportResolution struct {
	ID     uint64
	Action ReportAction
	Reason string
	Actor  string // "" is the operator
	At     int64
}

// Check refuses a resolution the store could not hold.
func (r *ReportResolution) Check() error {
	switch {
	case r.ID == 0:
		return errors.New("report id is zero")
	case r.Action == ReportNone || r.Action >= actionCount:
		return fmt.Errorf("unknown report action %d", r.Action)
	}
	if err := checkReportText("resolution reason", r.Reason, MaxReportReasonLen); err != nil {
		return err
	}
	if err := checkReportText("actor", r.Actor, MaxReportActorLen); err != nil {
		return err
	}
	return nil
}

func checkReportText(what, s string, limit int) error {
	if len(s) > limit {
		return fmt.Errorf("report %s is %d bytes; at most %d", what, len(s), limit)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("report %s is not UTF-8", what)
	}
	return nil
}

func reportKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{tabReport}, id)
}

func reportByCodeKey(code string) []byte { return append([]byte{tabReportByCode}, code...) }

// AppendReport appends the encoding of r to dst.
func AppendReport(dst []byte, r *Report) []byte {
	dst = append(dst, reportRecordVersion)
	dst = appendUvarint(dst, r.ID)
	dst = AppendString(dst, r.Code)
	dst = appendUvarint(dst, r.Count)
	dst = append(dst, byte(r.Reasons))
	dst = appendVarint(dst, r.FirstAt)
	dst = appendVarint(dst, r.LastAt)
	dst = appendUvarint(dst, uint64(len(r.Details)))
	for _, d := range r.Details {
		dst = AppendString(dst, d)
	}
	dst = append(dst, byte(r.Action))
	dst = appendVarint(dst, r.ResolvedAt)
	dst = AppendString(dst, r.ResolvedBy)
	return AppendString(dst, r.ResolvedReason)
}

// DecodeReport decodes a record written by AppendReport.
func DecodeReport(b []byte, r *Report) error {
	fr := NewFieldReader(b)
	if fr.Byte() != reportRecordVersion {
		return fmt.Errorf("cannot decode report: %w: unknown version", ErrCorrupt)
	}
	*r = Report{ID: fr.Uvarint(), Code: fr.String(), Count: fr.Uvarint()}
	r.Reasons = ReportReasons(fr.Byte())
	r.FirstAt = fr.Varint()
	r.LastAt = fr.Varint()
	n := fr.Uvarint()
	if n > MaxReportDetails {
		fr.Fail()
	}
	for i := uint64(0); i < n && !fr.bad; i++ {
		r.Details = append(r.Details, fr.String())
	}
	r.Action = ReportAction(fr.Byte())
	r.ResolvedAt = fr.Varint()
	r.ResolvedBy = fr.String()
	r.ResolvedReason = fr.String()
	if !fr.Done() || r.ID == 0 || r.Action >= actionCount {
		return fmt.Errorf("cannot decode report: %w", ErrCorrupt)
	}
	f := ReportFiling{Code: r.Code, Reasons: r.Reasons, Count: r.Count, FirstAt: r.FirstAt, LastAt: r.LastAt, Details: r.Details}
	if err := f.Check(); err != nil {
		return fmt.Errorf("cannot decode report: %w: %w", ErrCorrupt, err)
	}
	return nil
}

// Report reads a case as of the batch.
func (b *Batch) Report(id uint64, r *Report) (bool, error) {
	found, err := get(b.b, reportKey(id), func(v []byte) error { return DecodeReport(v, r) })
	if err != nil {
		return false, fmt.Errorf("cannot read report %d: %w", id, err)
	}
	return found, nil
}

// openReportID returns the id of the code's open case, if any.
func openReportID(rd pebble.Reader, code string) (uint64, bool, error) {
	var id uint64
	found, err := get(rd, reportByCodeKey(code), func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("cannot decode report index of %q: %w", code, ErrCorrupt)
		}
		id = binary.BigEndian.Uint64(v)
		return nil
	})
	return id, found, err
}

// FileReport folds f into the code's open case, or opens a case with id
// index. An unknown code fails with ErrNotFound and writes nothing.
func (b *Batch) FileReport(f *ReportFiling, index uint64) (Report, error) {
	if err := f.Check(); err != nil {
		return Report{}, fmt.Errorf("cannot file report: %w", err)
	}
	var l Link
	if found, err := b.Link(f.Code, &l); err != nil || !found {
		if err == nil {
			err = ErrNotFound
		}
		return Report{}, fmt.Errorf("cannot file report of %q: %w", f.Code, err)
	}
	id, open, err := openReportID(b.b, f.Code)
	if err != nil {
		return Report{}, err
	}
	var r Report
	if open {
		found, err := b.Report(id, &r)
		if err != nil {
			return Report{}, err
		}
		if !found || !r.Open() || r.Code != f.Code {
			return Report{}, fmt.Errorf("cannot file report of %q: index names case %d, which is not its open case: %w", f.Code, id, ErrStorage)
		}
		r.Count = satAdd(r.Count, f.Count)
		r.Reasons |= f.Reasons
		r.FirstAt = min(r.FirstAt, f.FirstAt)
		r.LastAt = max(r.LastAt, f.LastAt)
		for _, d := range f.Details {
			if len(r.Details) < MaxReportDetails {
				r.Details = append(r.Details, d)
			}
		}
	} else {
		if index == 0 {
			return Report{}, errors.New("BUG: report opened at log index 0")
		}
		r = Report{ID: index, Code: f.Code, Count: f.Count, Reasons: f.Reasons, FirstAt: f.FirstAt, LastAt: f.LastAt,
			Details: append([]string(nil), f.Details...)}
		if err := b.set(reportByCodeKey(f.Code), binary.BigEndian.AppendUint64(nil, r.ID)); err != nil {
			return Report{}, fmt.Errorf("cannot index report %d: %w", r.ID, err)
		}
	}
	if err := b.set(reportKey(r.ID), AppendReport(nil, &r)); err != nil {
		return Report{}, fmt.Errorf("cannot write report %d: %w", r.ID, err)
	}
	return r, nil
}

func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// ResolveReport closes an open case and applies its action to the link
// through the operator edit path (LinkPatch with an empty Owner), in the
// same batch. It returns the closed case and, if the link changed, the
// link as stored. An unknown case fails with ErrNotFound, a closed one
// with ErrReportResolved; either writes nothing.
func (b *Batch) ResolveReport(res *ReportResolution, index uint64) (Report, *Link, error) {
	if err := res.Check(); err != nil {
		return Report{}, nil, fmt.Errorf("cannot resolve report: %w", err)
	}
	var r Report
	found, err := b.Report(res.ID, &r)
	if err != nil {
		return Report{}, nil, err
	}
	if !found {
		return Report{}, nil, fmt.Errorf("cannot resolve report %d: %w", res.ID, ErrNotFound)
	}
	if !r.Open() {
		return Report{}, nil, fmt.Errorf("cannot resolve report %d: %w (%s)", res.ID, ErrReportResolved, r.Action)
	}
	// The link's history records the resolution in this entry's batch:
	// UpdateLink writes it with the status change; a dismissal, which
	// changes nothing, gets a record of its own.
	actor := res.Actor
	if actor == "" {
		actor = ActorOperator
	}
	action := "report_" + res.Action.String()
	reason := fmt.Sprintf("report %d", r.ID)
	if res.Reason != "" {
		reason += ": " + res.Reason
	}
	var changed *Link
	if status, ok := res.Action.LinkStatus(); ok {
		l, err := b.UpdateLink(&LinkPatch{Code: r.Code, UpdatedAt: res.At, SetStatus: true, Status: status,
			Actor: actor, Action: action, Reason: reason}, index)
		if err != nil {
			return Report{}, nil, fmt.Errorf("cannot resolve report %d: %w", res.ID, err)
		}
		changed = &l
	} else if err := b.AddHistory(&HistoryEntry{Code: r.Code, Index: index, At: res.At, Actor: actor, Action: action, Reason: reason}); err != nil {
		return Report{}, nil, fmt.Errorf("cannot resolve report %d: %w", res.ID, err)
	}
	r.Action, r.ResolvedAt, r.ResolvedBy, r.ResolvedReason = res.Action, res.At, res.Actor, res.Reason
	if err := b.set(reportKey(r.ID), AppendReport(nil, &r)); err != nil {
		return Report{}, nil, fmt.Errorf("cannot write report %d: %w", r.ID, err)
	}
	if err := b.b.Delete(reportByCodeKey(r.Code), nil); err != nil {
		return Report{}, nil, fmt.Errorf("cannot unindex report %d: %w", r.ID, storageErr(err))
	}
	return r, changed, nil
}

// Report returns one case.
func (s *Store) Report(id uint64) (Report, bool, error) {
	var r Report
	found, err := get(s.db, reportKey(id), func(v []byte) error { return DecodeReport(v, &r) })
	if err != nil {
		return Report{}, false, fmt.Errorf("cannot read report %d: %w", id, err)
	}
	return r, found, nil
}

// OpenReport returns the code's open case, if it has one.
func (s *Store) OpenReport(code string) (Report, bool, error) {
	id, found, err := openReportID(s.db, code)
	if err != nil || !found {
		return Report{}, false, err
	}
	return s.Report(id)
}

// Reports lists cases oldest first: open ones, resolved ones, or both.
// limit <= 0 means no limit.
func (s *Store) Reports(open, resolved bool, limit int) ([]Report, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabReport}, UpperBound: []byte{tabReport + 1}})
	if err != nil {
		return nil, fmt.Errorf("cannot list reports: %w", storageErr(err))
	}
	defer it.Close()
	var out []Report
	for valid := it.First(); valid; valid = it.Next() {
		var r Report
		if err := DecodeReport(it.Value(), &r); err != nil {
			return nil, storageErr(err)
		}
		if (r.Open() && open) || (!r.Open() && resolved) {
			out = append(out, r)
			if limit > 0 && len(out) >= limit {
				break
			}
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("cannot list reports: %w", storageErr(err))
	}
	return out, nil
}
