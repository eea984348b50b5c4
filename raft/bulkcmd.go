package raft

import (
	"context"
	"fmt"
	"strings"

	"github.com/waymark/waymark/store"
)

// createLinksBulkCmd (create_links_bulk, type 21) creates up to
// MaxBulkItems links in one log entry. Each item applies on its own, as a
// create_link would: a refused item (a code already taken) gets its error
// in its own result and the others still apply. An item with an external
// id its owner already used makes nothing and answers the link that id
// names (store/external.go).
//
// Payload (version 2; version 1 knows only flag bits 0 and 1):
//
//	count   uvarint  items, 1..MaxBulkItems
//	item    ...      count times: appendLinkFields (the bare code), flags
//	                 byte (bit 0 external id follows, bit 1 no forward
//	                 query, bit 2 custom domain follows, bit 3 tags follow),
//	                 then if flagged: external id, domain, tags (strings)
type createLinksBulkCmd struct {
	Items []store.BulkItem // Link.Index is set by the FSM, not carried
}

// MaxBulkItems bounds the items of one bulk entry (and of one API call).
const MaxBulkItems = 1000

// maxBulkEntryBytes is the encoded size past which CreateLinks starts a
// further entry: the entry and its forwarded answer stay well under the
// internal forwarding body limit (1 MiB) whatever the URLs' lengths.
const maxBulkEntryBytes = 256 << 10

const (
	bulkItemExternal       byte = 1 << 0
	bulkItemNoForwardQuery byte = 1 << 1
	bulkItemDomain         byte = 1 << 2 // version 2
	bulkItemTags           byte = 1 << 3 // version 2
	bulkItemKnownV1             = bulkItemExternal | bulkItemNoForwardQuery
	bulkItemKnown               = bulkItemKnownV1 | bulkItemDomain | bulkItemTags
)

func (c *createLinksBulkCmd) kind() cmdType { return cmdCreateLinksBulk }

func (c *createLinksBulkCmd) appendPayload(dst []byte) []byte {
	dst = appendUvarint(dst, uint64(len(c.Items)))
	for i := range c.Items {
		dst = appendBulkItem(dst, &c.Items[i])
	}
	return dst
}

func appendBulkItem(dst []byte, it *store.BulkItem) []byte {
	// As in create_link, the domain travels in its own field.
	l := it.Link
	domain, code := store.SplitLinkID(l.Code)
	l.Code = code
	dst = appendLinkFields(dst, &l)
	var flags byte
	if it.ExternalID != "" {
		flags |= bulkItemExternal
	}
	if l.NoForwardQuery {
		flags |= bulkItemNoForwardQuery
	}
	if domain != "" {
		flags |= bulkItemDomain
	}
	if l.Tags != "" {
		flags |= bulkItemTags
	}
	dst = append(dst, flags)
	if it.ExternalID != "" {
		dst = appendString(dst, it.ExternalID)
	}
	if domain != "" {
		dst = appendString(dst, domain)
	}
	if l.Tags != "" {
		dst = appendString(dst, l.Tags)
	}
	return dst
}

func decodeCreateLinksBulk(version byte, p []byte) (command, error) {
	r := newReader(p)
	n := r.Uvarint()
	if n == 0 || n > MaxBulkItems {
		return nil, corrupt("create_links_bulk")
	}
	c := &createLinksBulkCmd{Items: make([]store.BulkItem, 0, min(n, uint64(len(p)/8+1)))}
	for range n {
		var it store.BulkItem
		r.linkFields(&it.Link)
		known := bulkItemKnownV1
		if version >= 2 {
			known = bulkItemKnown
		}
		flags := r.Byte()
		if flags&^known != 0 || strings.IndexByte(it.Link.Code, '/') >= 0 {
			r.Fail()
		}
		it.Link.NoForwardQuery = flags&bulkItemNoForwardQuery != 0
		if flags&bulkItemExternal != 0 {
			if it.ExternalID = r.String(); it.ExternalID == "" {
				r.Fail()
			}
		}
		if flags&bulkItemDomain != 0 {
			domain := r.String()
			if err := store.CheckDomainName(domain); err != nil {
				return nil, invalid("create_links_bulk", err)
			}
			it.Link.Code = store.LinkID(domain, it.Link.Code)
		}
		if flags&bulkItemTags != 0 {
			if it.Link.Tags = r.String(); it.Link.Tags == "" {
				r.Fail()
			}
			if err := store.CheckStoredTags(it.Link.Tags); err != nil {
				return nil, invalid("create_links_bulk", err)
			}
		}
		if err := store.CheckOwnerID(it.Link.Owner); err != nil {
			return nil, invalid("create_links_bulk", err)
		}
		if err := store.CheckExternalID(it.ExternalID); err != nil {
			return nil, invalid("create_links_bulk", err)
		}
		c.Items = append(c.Items, it)
	}
	if !r.Done() {
		return nil, corrupt("create_links_bulk")
	}
	return c, nil
}

func (c *createLinksBulkCmd) apply(a *applier, index uint64, res *applyResult) {
	res.Bulk = make([]store.BulkResult, len(c.Items))
	for i := range c.Items {
		it := &c.Items[i]
		out := &res.Bulk[i]
		if it.ExternalID != "" {
			code, found, err := a.b.ExternalID(it.Link.Owner, it.ExternalID)
			if err != nil {
				a.reject(res, err)
				return
			}
			if found {
				found, err = a.b.Link(code, &out.Link)
				if err != nil {
					a.reject(res, err)
					return
				}
				if found {
					out.Existing = true
					continue
				}
				// The id names a code with no link: a broken record;
				// make the link as if the id were new.
			}
		}
		l := it.Link
		l.Index = index
		if err := a.b.CreateLink(&l); err != nil {
			if isStorageError(err) {
				a.reject(res, err)
				return
			}
			out.Err = fmt.Errorf("cannot create link %q: %w", l.Code, err)
			continue
		}
		if it.ExternalID != "" {
			if err := a.b.PutExternalID(l.Owner, it.ExternalID, l.Code); err != nil {
				a.reject(res, err)
				return
			}
		}
		out.Link = l
		a.changed = append(a.changed, l.Code)
	}
}

// CreateLinks creates items (each Link with its code chosen, Redirect 0
// meaning 302) in one log entry, or in a few when their encoding passes
// maxBulkEntryBytes, and returns one result per item in order. A refused
// item has its Err; err is for the call as a whole: items of entries
// before the failed one are in their results, the rest read as the error
// (their outcome unknown when err says so).
func (n *Node) CreateLinks(ctx context.Context, items []store.BulkItem) ([]store.BulkResult, uint64, error) {
	results := make([]store.BulkResult, 0, len(items))
	var index uint64
	var scratch []byte
	for start := 0; start < len(items); {
		chunk := make([]store.BulkItem, 0, min(len(items)-start, MaxBulkItems))
		size := 0
		for end := start; end < len(items) && len(chunk) < MaxBulkItems && (len(chunk) == 0 || size < maxBulkEntryBytes); end++ {
			it := items[end]
			if it.Link.Redirect == 0 {
				it.Link.Redirect = 302
			}
			if err := validateLink(&it.Link); err != nil {
				return results, index, err
			}
			scratch = appendBulkItem(scratch[:0], &it)
			size += len(scratch)
			chunk = append(chunk, it)
		}
		res, err := n.apply(ctx, appendCommand(nil, &createLinksBulkCmd{Items: chunk}))
		if err != nil {
			return results, index, err
		}
		if len(res.Bulk) != len(chunk) {
			return results, index, fmt.Errorf("cannot read bulk result: %d results for %d items: %w", len(res.Bulk), len(chunk), store.ErrUnknownOutcome)
		}
		results = append(results, res.Bulk...)
		index = res.Index
		start += len(chunk)
	}
	return results, index, nil
}

// A forwarded bulk answer, after the rest of the result:
//
//	count   uvarint  items
//	item    ...      count times: flags byte (bit 0 link, bit 1 existing,
//	                 bit 2 no forward query, bit 3 review), err byte
//	                 (errCode), message string if err != 0, then if
//	                 flagged appendLinkFields, Index (uvarint) and
//	                 ReviewUntil (varint, bit 3), tags (string, bit 4)
const (
	bulkResLink byte = 1 << iota
	bulkResExisting
	bulkResNoForwardQuery
	bulkResReview
	bulkResTags  // the link's tags follow, after the review window
	bulkResKnown = bulkResLink | bulkResExisting | bulkResNoForwardQuery | bulkResReview | bulkResTags
)

func appendBulkResults(dst []byte, rs []store.BulkResult) []byte {
	dst = appendUvarint(dst, uint64(len(rs)))
	for i := range rs {
		r := &rs[i]
		var flags byte
		if r.Link.Code != "" {
			flags |= bulkResLink
			if r.Existing {
				flags |= bulkResExisting
			}
			if r.Link.NoForwardQuery {
				flags |= bulkResNoForwardQuery
			}
			if r.Link.ReviewUntil != 0 {
				flags |= bulkResReview
			}
			if r.Link.Tags != "" {
				flags |= bulkResTags
			}
		}
		code := codeOf(r.Err)
		dst = append(dst, flags, byte(code))
		if code != errCodeNone {
			dst = appendString(dst, r.Err.Error())
		}
		if flags&bulkResLink != 0 {
			dst = appendLinkFields(dst, &r.Link)
			dst = appendUvarint(dst, r.Link.Index)
		}
		if flags&bulkResReview != 0 {
			dst = appendVarints(dst, r.Link.ReviewUntil)
		}
		if flags&bulkResTags != 0 {
			dst = appendString(dst, r.Link.Tags)
		}
	}
	return dst
}

func (r *reader) bulkResults() []store.BulkResult {
	n := r.Uvarint()
	if n > MaxBulkItems {
		r.Fail()
		return nil
	}
	rs := make([]store.BulkResult, n)
	for i := range rs {
		out := &rs[i]
		flags := r.Byte()
		if flags&^bulkResKnown != 0 || (flags&bulkResLink == 0 && flags != 0) {
			r.Fail()
		}
		if code := errCode(r.Byte()); code != errCodeNone {
			out.Err = &remoteError{msg: r.String(), sentinel: sentinelOf(code)}
		}
		if flags&bulkResLink != 0 {
			r.linkFields(&out.Link)
			out.Link.Index = r.Uvarint()
			out.Existing = flags&bulkResExisting != 0
			out.Link.NoForwardQuery = flags&bulkResNoForwardQuery != 0
		}
		if flags&bulkResReview != 0 {
			if out.Link.ReviewUntil = r.Varint(); out.Link.ReviewUntil == 0 {
				r.Fail()
			}
		}
		if flags&bulkResTags != 0 {
			if out.Link.Tags = r.String(); store.CheckStoredTags(out.Link.Tags) != nil || out.Link.Tags == "" {
				r.Fail()
			}
		}
	}
	return rs
}
