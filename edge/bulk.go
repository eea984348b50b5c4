package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

// POST /v1/links/bulk creates up to maxBulkItems links in one call:
//
//	{"links": [{...the fields of POST /v1/links..., "external_id": "..."}]}
//
// It answers 207 with one result per item, in order: the link (201, or
// 200 with "existing" when the item's external_id already named a link of
// the owner) or an RFC 9457 problem with its status. A bad item refuses
// only itself. The good items go to the log together (raft's
// create_links_bulk: one entry, or a few for very long URLs).
//
// Limits: the call takes one token of the address, write and key buckets
// (as one create does) and each item one token of its destination
// domain's bucket; an item over that limit answers 429 with
// "retry_after" and the others go on. The body is capped at
// maxBulkBodyBytes (413) and maxBulkItems items (413 too: the call is too
// large as a whole, whatever its bytes).
const (
	bulkPath         = "/v1/links/bulk"
	maxBulkItems     = 1000
	maxBulkBodyBytes = 2 << 20
)

var bulkItemFields = append(append([]string(nil), createFields...), "external_id")

// bulkInput is one decoded item, or the problem that refused it.
type bulkInput struct {
	req        createRequest
	externalID string
	prob       string // problem type name; "" while the item is good
	detail     string
}

// decodeBulk splits a bulk body into its items' raw JSON. It refuses the
// call as a whole (tooMany set for more than maxBulkItems items).
func decodeBulk(body []byte) (items []json.RawMessage, tooMany bool, err error) {
	o, err := decodeObject(body, []string{"links"})
	if err != nil {
		return nil, false, err
	}
	raw := bytes.TrimSpace(o["links"])
	if len(raw) == 0 || raw[0] != '[' {
		return nil, false, errors.New(`field "links" is required and must be an array of link objects`)
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, false, describeJSONError(err)
	}
	switch {
	case len(items) == 0:
		return nil, false, errors.New(`field "links" is empty; send 1 to ` + strconv.Itoa(maxBulkItems) + ` links`)
	case len(items) > maxBulkItems:
		return nil, true, fmt.Errorf(`field "links" holds %d links; the limit is %d per call`, len(items), maxBulkItems)
	}
	return items, false, nil
}

// decodeBulkItem type-checks one item: the create fields and external_id.
func decodeBulkItem(raw json.RawMessage) (createRequest, string, error) {
	o, err := decodeObject(raw, bulkItemFields)
	if err != nil {
		return createRequest{}, "", err
	}
	req, err := decodeCreateObject(o)
	if err != nil {
		return createRequest{}, "", err
	}
	ext, st, err := o.str("external_id")
	switch {
	case err != nil:
		return createRequest{}, "", err
	case st == fieldSet && ext == "":
		return createRequest{}, "", errors.New(`field "external_id" must not be empty; omit it for an item without one`)
	}
	if err := store.CheckExternalID(ext); err != nil {
		return createRequest{}, "", fmt.Errorf(`field "external_id": %w`, err)
	}
	return req, ext, nil
}

// bulkResult is one item's answer.
type bulkResult struct {
	Index      int             `json:"index"`
	Status     int             `json:"status"`
	ExternalID string          `json:"external_id,omitempty"`
	Existing   bool            `json:"existing,omitempty"`
	Link       *linkView       `json:"link,omitempty"`
	Problem    json.RawMessage `json:"problem,omitempty"`
	RetryAfter int             `json:"retry_after,omitempty"`
}

type bulkAnswer struct {
	Created  int          `json:"created"`
	Existing int          `json:"existing"`
	Failed   int          `json:"failed"`
	Results  []bulkResult `json:"results"`
}

func (r *bulkResult) fail(name, detail string) {
	status, b := problem.Body(name, detail, "")
	r.Status, r.Problem = status, bytes.TrimSpace(b)
}

func (s *Server) createLinksBulk(ctx *fasthttp.RequestCtx, owner store.Owner) {
	body := ctx.PostBody()
	if len(body) > maxBulkBodyBytes {
		writeProblem(ctx, probTooLarge, "request body is "+strconv.Itoa(len(body))+" bytes; the limit for a bulk call is "+strconv.Itoa(maxBulkBodyBytes))
		return
	}
	raws, tooMany, err := decodeBulk(body)
	if tooMany {
		writeProblem(ctx, probTooLarge, err.Error())
		return
	}
	if err != nil {
		writeProblem(ctx, probInvalidRequest, err.Error())
		return
	}
	now := s.now()
	in := make([]bulkInput, len(raws))
	results := make([]bulkResult, len(raws))
	aliases := make(map[string]int) // alias -> first item asking for it
	for i, raw := range raws {
		results[i].Index = i
		s.checkBulkItem(&in[i], raw, now.UnixMilli(), aliases, i)
		results[i].ExternalID = in[i].externalID
	}

	// Items whose external id already names a link answer it at once.
	for i := range in {
		if in[i].prob != "" || in[i].externalID == "" {
			continue
		}
		code, found, err := s.st.ExternalID(owner.ID, in[i].externalID)
		if err != nil {
			s.log.Error("cannot read external id", "owner", owner.ID, "err", err)
			writeProblem(ctx, probInternal, "the external ids could not be checked")
			return
		}
		var l store.Link
		if found {
			if found, err = s.st.GetLink([]byte(code), &l); err != nil {
				s.log.Error("cannot read link", "code", code, "err", err)
				writeProblem(ctx, probInternal, "the external ids could not be checked")
				return
			}
		}
		if found && l.Owner == owner.ID {
			v := s.linkView(&l, now)
			results[i].Status, results[i].Existing, results[i].Link = fasthttp.StatusOK, true, &v
			in[i].prob = "existing" // not sent to the log
		}
	}

	// The rest: the alias's availability, the domain's budget, a code.
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	var items []store.BulkItem
	var pos []int        // item index of each entry of items
	var domains []string // domain token taken for each entry of items
	for i := range in {
		it := &in[i]
		if it.prob != "" {
			continue
		}
		linkDomain, r := s.resolveLinkDomain(owner.ID, it.req.Domain)
		if r != nil {
			it.prob, it.detail = r.prob, r.detail
			continue
		}
		code := it.req.Alias
		if code != "" {
			var existing store.Link
			taken, err := s.st.GetLink([]byte(store.LinkID(linkDomain, code)), &existing)
			if err != nil {
				s.log.Error("cannot check alias", "alias", code, "err", err)
				writeProblem(ctx, probInternal, "the aliases could not be checked")
				return
			}
			if taken {
				it.prob, it.detail = probAliasUnavailable, fmt.Sprintf("alias %q is already taken", code)
				continue
			}
		}
		d, _ := parseDestination(it.req.URL) // checked: cannot fail
		domain, wait, ok := s.takeBulkDomain(d.host)
		if !ok {
			results[i].RetryAfter = wait
			it.prob, it.detail = probRateLimited, "too many new links to "+registrableDomain(d.host)+" on this node; retry this item in "+strconv.Itoa(wait)+" s"
			continue
		}
		if code == "" {
			if code, err = s.w.NewCode(wctx); err != nil {
				s.refundCreateDomain(domain)
				for _, dom := range domains {
					s.refundCreateDomain(dom)
				}
				s.writeWriteError(ctx, "bulk create", err)
				return
			}
		}
		items = append(items, store.BulkItem{ExternalID: it.externalID, Link: store.Link{
			Code: store.LinkID(linkDomain, code), URL: it.req.URL, Owner: owner.ID,
			CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli(),
			ExpiresAt: it.req.ExpiresAt, ClickLimit: it.req.ClickLimit,
			Status: store.StatusActive, Redirect: uint16(it.req.Redirect),
			NoForwardQuery: it.req.NoForwardQuery, Tags: it.req.Tags,
		}})
		pos = append(pos, i)
		domains = append(domains, domain)
	}

	var index uint64
	if len(items) > 0 {
		var rs []store.BulkResult
		rs, index, err = s.w.CreateLinks(wctx, items)
		if err != nil && len(rs) == 0 {
			for _, dom := range domains {
				s.refundCreateDomain(dom)
			}
			s.writeWriteError(ctx, "bulk create", err)
			return
		}
		for j := range items {
			i := pos[j]
			if j >= len(rs) {
				// A later entry of a split call failed.
				s.refundCreateDomain(domains[j])
				in[i].prob, in[i].detail = probUnavailable, "this item may or may not have been created (the cluster did not confirm it); retry it: its external_id makes a retry safe"
				continue
			}
			s.bulkOutcome(&in[i], &results[i], &rs[j], domains[j], now)
		}
	}

	ans := bulkAnswer{Results: results}
	for i := range results {
		if in[i].prob != "" && in[i].prob != "existing" {
			results[i].fail(in[i].prob, in[i].detail)
		}
		switch {
		case results[i].Status == fasthttp.StatusCreated:
			ans.Created++
		case results[i].Existing:
			ans.Existing++
		default:
			ans.Failed++
		}
	}
	s.m.bulkItemsCreated.Add(ans.Created)
	s.m.bulkItemsFailed.Add(ans.Failed)
	if index != 0 {
		setIndex(ctx, index)
	}
	writeJSON(ctx, fasthttp.StatusMultiStatus, marshalJSON(ans))
}

// checkBulkItem runs the checks of one create that need no write: the
// body, the destination, the expiry, the alias rules, and a second item
// asking for an alias of the same call.
func (s *Server) checkBulkItem(it *bulkInput, raw json.RawMessage, nowMs int64, aliases map[string]int, i int) {
	req, ext, err := decodeBulkItem(raw)
	it.externalID = ext
	if err != nil {
		it.prob, it.detail = probInvalidRequest, err.Error()
		return
	}
	d, prob, detail := s.destinationProblem(req.URL)
	if prob != "" {
		it.prob, it.detail = prob, detail
		return
	}
	req.URL = d.url
	if req.ExpiresAt != 0 && req.ExpiresAt <= nowMs {
		it.prob, it.detail = probInvalidRequest, `field "expires_at" is in the past`
		return
	}
	if req.Alias != "" {
		if err := s.checkAlias(req.Alias); err != nil {
			var ae *aliasError
			it.prob, it.detail = probInvalidRequest, err.Error()
			if errors.As(err, &ae) && ae.unavailable {
				it.prob = probAliasUnavailable
			}
			return
		}
		key := strings.ToLower(req.Domain) + "/" + req.Alias // one alias per domain
		if first, dup := aliases[key]; dup {
			it.prob, it.detail = probAliasUnavailable, fmt.Sprintf("alias %q is asked for by item %d of this call already", req.Alias, first)
			return
		}
		aliases[key] = i
	}
	it.req = req
}

// bulkOutcome turns the log's answer for one item into its result.
func (s *Server) bulkOutcome(it *bulkInput, r *bulkResult, res *store.BulkResult, domain string, now time.Time) {
	switch {
	case res.Err == nil && res.Existing:
		s.refundCreateDomain(domain)
		v := s.linkView(&res.Link, now)
		r.Status, r.Existing, r.Link = fasthttp.StatusOK, true, &v
		it.prob = "existing"
	case res.Err == nil:
		v := s.linkView(&res.Link, now)
		r.Status, r.Link = fasthttp.StatusCreated, &v
	case errors.Is(res.Err, store.ErrCodeTaken) && it.req.Alias != "":
		s.refundCreateDomain(domain)
		it.prob, it.detail = probAliasUnavailable, fmt.Sprintf("alias %q is already taken", it.req.Alias)
	case errors.Is(res.Err, store.ErrDomainNotOwned), errors.Is(res.Err, store.ErrDomainNotApproved):
		// The domain changed between the check above and the commit.
		s.refundCreateDomain(domain)
		it.prob, it.detail = probDomainForbidden, "the item's domain is no longer yours to use: "+res.Err.Error()
		if errors.Is(res.Err, store.ErrDomainNotApproved) {
			it.prob = probDomainNotApproved
		}
	default:
		s.refundCreateDomain(domain)
		s.log.Error("bulk item refused", "err", res.Err)
		it.prob, it.detail = probInternal, "this item could not be created; retry it"
	}
}

// takeBulkDomain is takeCreateDomain for one item of a bulk call: the
// refusal is the item's, with the wait in whole seconds.
func (s *Server) takeBulkDomain(host string) (string, int, bool) {
	c := &s.creates
	if c.domain == nil {
		return "", 0, true
	}
	domain := registrableDomain(host)
	if ok, wait := c.domain.allow(domain); !ok {
		c.refusedDomain.Inc()
		return "", max(1, int((wait.Seconds())+0.999)), false
	}
	return domain, 0, true
}

// AliasFits reports why alias cannot be kept as a link's code (its
// characters or length, or the shape of a generated code), or nil. The
// importer uses it to keep a foreign code only when it fits; a reserved
// word or a taken alias still answers 409 at create.
func AliasFits(alias string) error {
	if !validCodeSyntax(alias) {
		return fmt.Errorf("alias must be %d to %d characters of A-Z, a-z, 0-9, '_' and '-'", minAliasLen, maxAliasLen)
	}
	if _, err := store.ParseCode([]byte(alias)); err == nil {
		return fmt.Errorf("alias has the shape of a generated code (%d letters and digits)", store.CodeLen)
	}
	return nil
}
