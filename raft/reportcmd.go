package raft

import (
	"context"
	"fmt"

	"github.com/waymark/waymark/store"
)

// Public abuse reports (issue 11 point 3). A file_report entry folds one or
// more reports of a code into its open case; a resolve_report entry closes
// a case and, in the same entry, puts the operator status on the link.

// fileReportCmd files reports of one code. Version 1 payload:
//
//	code              string
//	reasons           byte (store.ReportReasons, non-empty, known bits)
//	count             uvarint, >= 1
//	first, last time  varints (ms)
//	details           uvarint count <= store.MaxReportDetails, then strings
type fileReportCmd struct {
	Filing store.ReportFiling
}

func (c *fileReportCmd) kind() cmdType { return cmdFileReport }

func appendFileReport(dst []byte, f *store.ReportFiling) []byte {
	return appendCommand(dst, &fileReportCmd{Filing: *f})
}

func (c *fileReportCmd) appendPayload(dst []byte) []byte {
	f := &c.Filing
	dst = appendString(dst, f.Code)
	dst = append(dst, byte(f.Reasons))
	dst = appendUvarint(dst, f.Count)
	dst = appendVarints(dst, f.FirstAt, f.LastAt)
	dst = appendUvarint(dst, uint64(len(f.Details)))
	for _, d := range f.Details {
		dst = appendString(dst, d)
	}
	return dst
}

func decodeFileReport(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &fileReportCmd{}
	f := &c.Filing
	f.Code = r.String()
	f.Reasons = store.ReportReasons(r.Byte())
	f.Count = r.Uvarint()
	f.FirstAt = r.Varint()
	f.LastAt = r.Varint()
	n := r.Uvarint()
	if n > store.MaxReportDetails {
		r.Fail()
		n = 0
	}
	for i := uint64(0); i < n; i++ {
		f.Details = append(f.Details, r.String())
	}
	if !r.Done() {
		return nil, corrupt("file_report")
	}
	if err := f.Check(); err != nil {
		return nil, invalid("file_report", err)
	}
	return c, nil
}

func (c *fileReportCmd) apply(a *applier, index uint64, res *applyResult) {
	r, err := a.b.FileReport(&c.Filing, index)
	if err != nil {
		a.reject(res, err)
		return
	}
	res.Report = &r
}

// resolveReportCmd closes a case. Version 1 payload:
//
//	id                uvarint (the case)
//	action            byte (store.ReportAction, not none)
//	reason, actor     strings ("" actor = the operator)
//	time              varint (ms, the leader-side request time)
type resolveReportCmd struct {
	Res store.ReportResolution
}

func (c *resolveReportCmd) kind() cmdType { return cmdResolveReport }

func appendResolveReport(dst []byte, r *store.ReportResolution) []byte {
	return appendCommand(dst, &resolveReportCmd{Res: *r})
}

func (c *resolveReportCmd) appendPayload(dst []byte) []byte {
	r := &c.Res
	dst = appendUvarint(dst, r.ID)
	dst = append(dst, byte(r.Action))
	dst = appendString(dst, r.Reason)
	dst = appendString(dst, r.Actor)
	return appendVarints(dst, r.At)
}

func decodeResolveReport(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &resolveReportCmd{}
	c.Res.ID = r.Uvarint()
	c.Res.Action = store.ReportAction(r.Byte())
	c.Res.Reason = r.String()
	c.Res.Actor = r.String()
	c.Res.At = r.Varint()
	if !r.Done() {
		return nil, corrupt("resolve_report")
	}
	if err := c.Res.Check(); err != nil {
		return nil, invalid("resolve_report", err)
	}
	return c, nil
}

// apply closes the case and applies the action to the link in this one
// entry. The resolution's actor, reason and time are kept in the case
// record itself; the link history (table 'H', another branch) is written
// next to it when the two are merged.
func (c *resolveReportCmd) apply(a *applier, index uint64, res *applyResult) {
	r, l, err := a.b.ResolveReport(&c.Res, index)
	if err != nil {
		a.reject(res, err)
		return
	}
	res.Report = &r
	if l != nil {
		res.Link = *l
		// Evicted from every cache exactly as an update_link is.
		a.changed = append(a.changed, l.Code)
	}
}

// FileReport folds reports of a code into its open case (or opens one) and
// returns the case. An unknown code fails with store.ErrNotFound.
func (n *Node) FileReport(ctx context.Context, f *store.ReportFiling) (store.Report, error) {
	if err := f.Check(); err != nil {
		return store.Report{}, fmt.Errorf("cannot file report: %w", err)
	}
	res, err := n.apply(ctx, appendFileReport(nil, f))
	if err != nil {
		return store.Report{}, err
	}
	if res.Report == nil {
		return store.Report{}, fmt.Errorf("cannot read the filed report of %q from the answer: %w", f.Code, store.ErrUnknownOutcome)
	}
	return *res.Report, nil
}

// ResolveReport closes a case and applies its action to the link, in one
// log entry. An unknown case fails with store.ErrNotFound, a closed one
// with store.ErrReportResolved.
func (n *Node) ResolveReport(ctx context.Context, r *store.ReportResolution) (store.Report, error) {
	if err := r.Check(); err != nil {
		return store.Report{}, fmt.Errorf("cannot resolve report: %w", err)
	}
	res, err := n.apply(ctx, appendResolveReport(nil, r))
	if err != nil {
		return store.Report{}, err
	}
	if res.Report == nil {
		return store.Report{}, fmt.Errorf("cannot read the resolved report %d from the answer: %w", r.ID, store.ErrUnknownOutcome)
	}
	return *res.Report, nil
}

// appendReportResult and reportResult carry a case in a forwarded answer.
func appendReportResult(dst []byte, r *store.Report) []byte {
	return appendBytes(dst, store.AppendReport(nil, r))
}

func (r *reader) reportResult() *store.Report {
	b := r.Bytes()
	rep := &store.Report{}
	if store.DecodeReport(b, rep) != nil {
		r.Fail()
	}
	return rep
}
