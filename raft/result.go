package raft

import (
	"errors"
	"fmt"

	"github.com/waymark/waymark/store"
)

// A forwarded command's answer travels back from the leader as bytes:
//
//	version  byte     resultVersion
//	flags    byte     bit 0 link, bit 1 block, bit 2 existing idempotency record, bit 3 site
//	index    uvarint  log index of the entry
//	err      byte     errCode; 0 = success
//	message  string   the leader's error text, only when err != 0
//	link     ...      appendLinkFields, then Index (uvarint), if flagged
//	block    ...      Start, End (uvarints), if flagged
//	existing ...      appendIdempotency, if flagged
//	site     ...      appendSiteFields, if flagged (UpdateSite)
//	review   varint   the link's ReviewUntil, if flagged (only when not 0)
//	report   ...      store.AppendReport as bytes, if flagged (bit 5; reports)
//	(bit 6)           the link's NoForwardQuery, a flag without a payload
//	(bit 7)           a second flags byte follows the first (resultMore*):
//	domain   bytes    store.AppendDomain, if flagged in the second byte (bit 0)
//	tags     string   the link's tags, if flagged in the second byte (bit 1)
//	rules    string   the link's redirect rules, if flagged in the second
//	                  byte (bit 4)
//	password string   the link's password hash, if flagged in the second byte (bit 5)
//	preview  string   the link's encoded preview, if flagged in the second byte (bit 6)
//	bulk     ...      bulk results (appendBulkResults, bulkcmd.go), if
//	                  flagged in the second byte (bit 3); always last
//
// The error is sent as a stable code so that errors.Is(err, store.ErrX)
// holds on the forwarding node exactly as it would on the leader.
const resultVersion byte = 1

const (
	resultHasLink byte = 1 << iota
	resultHasBlock
	resultHasExisting
	resultHasSite
	resultHasReview
	resultHasReport
	resultNoForwardQuery // the link's NoForwardQuery; no payload
	resultMoreFlags      // a second flags byte follows
	resultKnownFlags     = resultHasLink | resultHasBlock | resultHasExisting | resultHasSite | resultHasReview | resultHasReport | resultNoForwardQuery | resultMoreFlags
)

// Bits of the second flags byte (present only when bit 7 of the first is
// set, and then never zero). Payloads follow every first-byte payload, in
// bit order.
const (
	resultMoreDomain   byte = 1 << 0 // store.AppendDomain as bytes (domain_update)
	resultMoreTags     byte = 1 << 1 // the link's tags
	resultMoreBulk     byte = 1 << 3 // bulk results
	resultMoreRules    byte = 1 << 4 // the link's redirect rules (before the bulk results)
	resultMorePassword byte = 1 << 5 // the link's password hash
	resultMorePreview  byte = 1 << 6 // the link's encoded preview
	resultMoreKnown         = resultMoreDomain | resultMoreTags | resultMoreBulk | resultMoreRules | resultMorePassword | resultMorePreview
)

// errCode names a sentinel error on the wire; never renumbered or reused.
type errCode byte

const (
	errCodeNone              errCode = 0
	errCodeOther             errCode = 1 // read back as an unknown outcome
	errCodeUnknownOutcome    errCode = 2
	errCodeNoLeader          errCode = 3
	errCodeCodeTaken         errCode = 4
	errCodeNotFound          errCode = 5
	errCodePermanentRedirect errCode = 6
	errCodeDomainTaken       errCode = 7
	errCodeRangeExhausted    errCode = 8
	errCodeRegionSpaceFull   errCode = 9
	errCodeCorrupt           errCode = 10
	errCodeLinkLocked        errCode = 11
	errCodeGoalExists        errCode = 12
	errCodeTooManyGoals      errCode = 13
	errCodeInvalidSiteEdit   errCode = 14
	errCodeRegionUnclaimed   errCode = 15
	errCodeStatusChanged     errCode = 16
	errCodeReportResolved    errCode = 17
	errCodeDomainNotApproved errCode = 18
	errCodeDomainNotOwned    errCode = 19
	errCodeKeyIDTaken        errCode = 20 // issue 12, keys
	errCodeTooManyWebhooks   errCode = 21 // issue 13, webhooks (22 reserved for webhooks)
	// Issue 13 (passwords and previews).
	errCodePasswordPermanent errCode = 26
	errCodeInvalidLinkGate   errCode = 27
)

// wireErrors maps codes to sentinels. Order matters when encoding: an
// unknown outcome wins over everything it may wrap, so a forwarded write
// is never reported as a plain refusal when it may have committed.
var wireErrors = []struct {
	code errCode
	err  error
}{
	{errCodeUnknownOutcome, store.ErrUnknownOutcome},
	{errCodeNoLeader, store.ErrNoLeader},
	{errCodeCodeTaken, store.ErrCodeTaken},
	{errCodeNotFound, store.ErrNotFound},
	{errCodePermanentRedirect, store.ErrPermanentRedirect},
	{errCodeDomainTaken, store.ErrDomainTaken},
	{errCodeRangeExhausted, store.ErrRangeExhausted},
	{errCodeRegionSpaceFull, store.ErrRegionSpaceFull},
	{errCodeRegionUnclaimed, store.ErrRegionUnclaimed},
	{errCodeLinkLocked, store.ErrLinkLocked},
	{errCodeStatusChanged, store.ErrStatusChanged},
	{errCodeGoalExists, store.ErrGoalExists},
	{errCodeTooManyGoals, store.ErrTooManyGoals},
	{errCodeInvalidSiteEdit, store.ErrInvalidSiteEdit},
	{errCodeReportResolved, store.ErrReportResolved},
	{errCodeDomainNotApproved, store.ErrDomainNotApproved},
	{errCodeDomainNotOwned, store.ErrDomainNotOwned},
	{errCodeKeyIDTaken, store.ErrKeyIDTaken},
	{errCodeTooManyWebhooks, store.ErrTooManyWebhooks},
	{errCodePasswordPermanent, store.ErrPasswordPermanent},
	{errCodeInvalidLinkGate, store.ErrInvalidLinkGate},
	{errCodeCorrupt, store.ErrCorrupt},
}

func codeOf(err error) errCode {
	if err == nil {
		return errCodeNone
	}
	for _, w := range wireErrors {
		if errors.Is(err, w.err) {
			return w.code
		}
	}
	return errCodeOther
}

// sentinelOf is the error a code stands for on this side. A code this
// build does not know (a newer leader) and errCodeOther read as an unknown
// outcome: the write may have happened, so it must not look like success
// or like a clean refusal.
func sentinelOf(c errCode) error {
	for _, w := range wireErrors {
		if w.code == c {
			return w.err
		}
	}
	return store.ErrUnknownOutcome
}

// remoteError is an error the leader answered with: its text, and the
// sentinel it carried.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// appendResult encodes res (including res.Err) for the forwarding node.
func appendResult(dst []byte, res *applyResult) []byte {
	var flags byte
	if res.Link.Code != "" {
		flags |= resultHasLink
	}
	if res.Block != (store.Block{}) {
		flags |= resultHasBlock
	}
	if res.Existing != nil {
		flags |= resultHasExisting
	}
	if res.Site != nil {
		flags |= resultHasSite
	}
	if flags&resultHasLink != 0 && res.Link.ReviewUntil != 0 {
		flags |= resultHasReview
	}
	if res.Report != nil {
		flags |= resultHasReport
	}
	if flags&resultHasLink != 0 && res.Link.NoForwardQuery {
		flags |= resultNoForwardQuery
	}
	var more byte
	if res.Domain != nil {
		more |= resultMoreDomain
	}
	if flags&resultHasLink != 0 && res.Link.Tags != "" {
		more |= resultMoreTags
	}
	if res.Bulk != nil {
		more |= resultMoreBulk
	}
	if flags&resultHasLink != 0 && res.Link.Rules != "" {
		more |= resultMoreRules
	}
	if flags&resultHasLink != 0 && res.Link.PasswordHash != "" {
		more |= resultMorePassword
	}
	if flags&resultHasLink != 0 && res.Link.Preview != "" {
		more |= resultMorePreview
	}
	if more != 0 {
		flags |= resultMoreFlags
	}
	dst = append(dst, resultVersion, flags)
	if more != 0 {
		dst = append(dst, more)
	}
	dst = appendUvarint(dst, res.Index)
	code := codeOf(res.Err)
	dst = append(dst, byte(code))
	if code != errCodeNone {
		dst = appendString(dst, res.Err.Error())
	}
	if flags&resultHasLink != 0 {
		dst = appendLinkFields(dst, &res.Link)
		dst = appendUvarint(dst, res.Link.Index)
	}
	if flags&resultHasBlock != 0 {
		dst = appendUvarint(dst, res.Block.Start)
		dst = appendUvarint(dst, res.Block.End)
	}
	if flags&resultHasExisting != 0 {
		dst = appendIdempotency(dst, res.Existing)
	}
	if flags&resultHasSite != 0 {
		dst = appendSiteFields(dst, res.Site)
	}
	if flags&resultHasReview != 0 {
		dst = appendVarints(dst, res.Link.ReviewUntil)
	}
	if flags&resultHasReport != 0 {
		dst = appendReportResult(dst, res.Report)
	}
	if more&resultMoreDomain != 0 {
		dst = appendBytes(dst, store.AppendDomain(nil, res.Domain))
	}
	if more&resultMoreTags != 0 {
		dst = appendString(dst, res.Link.Tags)
	}
	if more&resultMoreRules != 0 {
		dst = appendString(dst, res.Link.Rules)
	}
	if more&resultMorePassword != 0 {
		dst = appendString(dst, res.Link.PasswordHash)
	}
	if more&resultMorePreview != 0 {
		dst = appendString(dst, res.Link.Preview)
	}
	if more&resultMoreBulk != 0 {
		dst = appendBulkResults(dst, res.Bulk)
	}
	return dst
}

// decodeResult reads a leader's answer. Bad bytes give an error wrapping
// store.ErrCorrupt; the leader's own error, if any, is in res.Err. It
// never panics.
func decodeResult(b []byte) (*applyResult, error) {
	r := newReader(b)
	if v := r.Byte(); v != resultVersion {
		return nil, fmt.Errorf("cannot decode forwarded result: %w: version %d", store.ErrCorrupt, v)
	}
	flags := r.Byte()
	if flags&^resultKnownFlags != 0 {
		r.Fail()
	}
	var more byte
	if flags&resultMoreFlags != 0 {
		// Never zero: one answer, one encoding.
		if more = r.Byte(); more == 0 || more&^resultMoreKnown != 0 {
			r.Fail()
		}
	}
	res := &applyResult{Index: r.Uvarint()}
	if code := errCode(r.Byte()); code != errCodeNone {
		res.Err = &remoteError{msg: r.String(), sentinel: sentinelOf(code)}
	}
	if flags&resultHasLink != 0 {
		r.linkFields(&res.Link)
		res.Link.Index = r.Uvarint()
	}
	if flags&resultHasBlock != 0 {
		res.Block = store.Block{Start: r.Uvarint(), End: r.Uvarint()}
		if res.Block.End < res.Block.Start || res.Block == (store.Block{}) {
			r.Fail()
		}
	}
	if flags&resultHasExisting != 0 {
		res.Existing = &store.Idempotency{}
		r.idempotency(res.Existing)
	}
	if flags&resultHasSite != 0 {
		res.Site = &store.Site{}
		r.siteFields(res.Site)
	}
	if flags&resultHasReview != 0 {
		// Only a link's, and never zero: one answer, one encoding.
		if res.Link.ReviewUntil = r.Varint(); flags&resultHasLink == 0 || res.Link.ReviewUntil == 0 {
			r.Fail()
		}
	}
	if flags&resultHasReport != 0 {
		res.Report = r.reportResult()
	}
	if flags&resultNoForwardQuery != 0 {
		if res.Link.NoForwardQuery = true; flags&resultHasLink == 0 {
			r.Fail()
		}
	}
	if more&resultMoreDomain != 0 {
		res.Domain = &store.Domain{}
		if store.DecodeDomain(r.Bytes(), res.Domain) != nil {
			r.Fail()
		}
	}
	if more&resultMoreTags != 0 {
		res.Link.Tags = r.String()
		if flags&resultHasLink == 0 || res.Link.Tags == "" || store.CheckStoredTags(res.Link.Tags) != nil {
			r.Fail()
		}
	}
	if more&resultMoreRules != 0 {
		res.Link.Rules = r.String()
		if flags&resultHasLink == 0 || res.Link.Rules == "" || store.CheckStoredRules(res.Link.Rules) != nil {
			r.Fail()
		}
	}
	if more&resultMorePassword != 0 {
		res.Link.PasswordHash = r.String()
		if flags&resultHasLink == 0 || res.Link.PasswordHash == "" || store.CheckPasswordHash(res.Link.PasswordHash) != nil {
			r.Fail()
		}
	}
	if more&resultMorePreview != 0 {
		res.Link.Preview = r.String()
		if flags&resultHasLink == 0 || res.Link.Preview == "" || store.CheckStoredPreview(res.Link.Preview) != nil {
			r.Fail()
		}
	}
	if more&resultMoreBulk != 0 {
		res.Bulk = r.bulkResults()
	}
	if !r.Done() {
		return nil, fmt.Errorf("cannot decode forwarded result: %w", store.ErrCorrupt)
	}
	return res, nil
}
