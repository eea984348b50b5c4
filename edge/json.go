package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/waymark/waymark/store"
)

// maxBodyBytes bounds an API request body; larger bodies get 413.
const maxBodyBytes = 16 << 10

// jsonObject is a request body decoded one level deep, so each field can be
// checked with its own clear message and absent can be told from null.
type jsonObject map[string]json.RawMessage

type fieldState uint8

const (
	fieldAbsent fieldState = iota
	fieldNull
	fieldSet
)

// decodeObject parses body as a JSON object whose keys are all in allowed.
func decodeObject(body []byte, allowed []string) (jsonObject, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, errors.New("request body is empty; send a JSON object")
	}
	if body[0] != '{' {
		if !json.Valid(body) {
			return nil, describeJSONError(json.Unmarshal(body, new(any)))
		}
		return nil, errors.New("request body must be a JSON object")
	}
	var o jsonObject
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, describeJSONError(err)
	}
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return nil, fmt.Errorf("unknown field %q; allowed fields are %s", k, strings.Join(allowed, ", "))
		}
	}
	return o, nil
}

func describeJSONError(err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Errorf("request body is not valid JSON: %s (at byte %d)", syn.Error(), syn.Offset)
	}
	return errors.New("request body is not valid JSON")
}

func (o jsonObject) state(name string) fieldState {
	raw, ok := o[name]
	switch {
	case !ok:
		return fieldAbsent
	case string(raw) == "null":
		return fieldNull
	default:
		return fieldSet
	}
}

func (o jsonObject) str(name string) (string, fieldState, error) {
	st := o.state(name)
	if st != fieldSet {
		return "", st, nil
	}
	var v string
	if err := json.Unmarshal(o[name], &v); err != nil {
		return "", st, fmt.Errorf("field %q must be a string", name)
	}
	return v, st, nil
}

func (o jsonObject) integer(name string) (int64, fieldState, error) {
	st := o.state(name)
	if st != fieldSet {
		return 0, st, nil
	}
	var v int64
	if err := json.Unmarshal(o[name], &v); err != nil {
		return 0, st, fmt.Errorf("field %q must be an integer", name)
	}
	return v, st, nil
}

// timeMillis reads an RFC 3339 time as Unix milliseconds.
func (o jsonObject) timeMillis(name string) (int64, fieldState, error) {
	s, st, err := o.str(name)
	if err != nil || st != fieldSet {
		if err != nil {
			err = fmt.Errorf("field %q must be an RFC 3339 time such as 2030-01-02T15:04:05Z", name)
		}
		return 0, st, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, st, fmt.Errorf("field %q must be an RFC 3339 time such as 2030-01-02T15:04:05Z; got %q", name, s)
	}
	ms := t.UnixMilli()
	if ms <= 0 {
		return 0, st, fmt.Errorf("field %q must be after 1970", name)
	}
	return ms, st, nil
}

// createRequest is the body of POST /v1/links after type checks; the URL is
// still as sent.
type createRequest struct {
	URL        string `json:"url"`
	Alias      string `json:"alias,omitempty"`
	ExpiresAt  int64  `json:"expires_at,omitempty"` // Unix ms; 0 means never
	ClickLimit int64  `json:"click_limit,omitempty"`
	Redirect   int    `json:"redirect"`
	// NoForwardQuery is "forward_query": false (the default is true). The
	// struct is marshalled into the Idempotency-Key request hash, so it is
	// named there, and omitted when false so older bodies hash as before.
	NoForwardQuery bool `json:"no_forward_query,omitempty"`
	// Tags in normal form (store.NormalizeTags), omitted when none so
	// older bodies hash as before.
	Tags string `json:"tags,omitempty"`
	// Domain is the custom domain ("" the default), canonical once the
	// handler checked it; omitted when empty so older bodies hash as before.
	Domain string `json:"domain,omitempty"`
	// Password is never marshalled, so the request hash holds no fast
	// hash of it; Protected stands in for it there. Preview is as sent
	// until the handler normalises its image URL.
	Password  string         `json:"-"`
	Protected bool           `json:"password_protected,omitempty"`
	Preview   *store.Preview `json:"preview,omitempty"`
	// Rules are the redirect rules, encoded (store.EncodeRules) once the
	// handler checked them. The encoding is binary, so the request hash
	// sees it as base64 (RulesHashed), omitted when none so older bodies
	// hash as before.
	Rules       string `json:"-"`
	RulesHashed string `json:"rules,omitempty"`
}

var createFields = []string{"url", "alias", "expires_at", "click_limit", "redirect", "forward_query", "tags", "domain"}

// decodeCreate type-checks a create body. Semantic checks that need the
// server (destination rules, alias rules, the clock) come later; the
// redirect rules come back raw (decodeRules reads them).
func decodeCreate(body []byte) (createRequest, json.RawMessage, error) {
	o, err := decodeObject(body, createBodyFields)
	if err != nil {
		return createRequest{}, nil, err
	}
	req, err := decodeCreateObject(o)
	if err != nil {
		return createRequest{}, nil, err
	}
	g, err := decodeGates(o) // gatesjson.go
	if err != nil {
		return createRequest{}, nil, err
	}
	req.Password, req.Protected = g.password, g.password != ""
	if !g.preview.IsZero() {
		req.Preview = &g.preview
	}
	return req, o["rules"], nil
}

// decodeCreateObject type-checks the create fields of o (a bulk item has
// one more, external_id).
func decodeCreateObject(o jsonObject) (createRequest, error) {
	var err error
	var req createRequest
	var st fieldState
	if req.URL, st, err = o.str("url"); err != nil {
		return createRequest{}, err
	}
	if st != fieldSet {
		return createRequest{}, errors.New(`field "url" is required`)
	}
	if req.Alias, st, err = o.str("alias"); err != nil {
		return createRequest{}, err
	}
	if st == fieldSet && req.Alias == "" {
		return createRequest{}, errors.New(`field "alias" must not be empty; omit it to get a generated code`)
	}
	if req.ExpiresAt, _, err = o.timeMillis("expires_at"); err != nil {
		return createRequest{}, err
	}
	if req.ClickLimit, st, err = o.integer("click_limit"); err != nil {
		return createRequest{}, err
	}
	if st == fieldSet && req.ClickLimit < 1 {
		return createRequest{}, errors.New(`field "click_limit" must be at least 1; omit it or send null for no limit`)
	}
	redirect, st, err := o.integer("redirect")
	if err != nil {
		return createRequest{}, err
	}
	req.Redirect = 302
	if st == fieldSet {
		if redirect < 0 || redirect > 999 || !store.ValidRedirect(int(redirect)) {
			return createRequest{}, fmt.Errorf(`field "redirect" must be 301, 302, 307 or 308; got %d`, redirect)
		}
		req.Redirect = int(redirect)
	}
	forward, st, err := o.boolean("forward_query")
	switch {
	case err != nil:
		return createRequest{}, err
	case st == fieldNull:
		return createRequest{}, errors.New(`field "forward_query" cannot be null; send true or false`)
	}
	req.NoForwardQuery = st == fieldSet && !forward
	if req.Tags, _, err = o.tags("tags"); err != nil {
		return createRequest{}, err
	}
	if req.Domain, st, err = o.str("domain"); err != nil {
		return createRequest{}, err
	}
	if st == fieldSet && req.Domain == "" {
		return createRequest{}, errors.New(`field "domain" must not be empty; omit it for the default domain`)
	}
	return req, nil
}

// patchRequest is the body of PATCH /v1/links/{code}. A nil pointer or a
// false set flag leaves the field alone.
type patchRequest struct {
	url        *string
	setExpiry  bool
	expiresAt  int64 // 0 clears
	setLimit   bool
	clickLimit int64 // 0 clears
	status     *store.Status
	forward    *bool // forward_query
	setTags    bool
	tags       string // normal form; "" clears
	gates      gateFields
	// rules: the raw "rules" member (null or [] clears), read by
	// decodeRules once the link is known.
	setRules bool
	rules    json.RawMessage
}

var patchFields = []string{"url", "expires_at", "click_limit", "status", "forward_query", "tags", "rules"}

func decodePatch(body []byte) (patchRequest, error) {
	o, err := decodeObject(body, patchBodyFields)
	if err != nil {
		return patchRequest{}, err
	}
	var req patchRequest
	if req.gates, err = decodeGates(o); err != nil { // gatesjson.go
		return patchRequest{}, err
	}
	u, st, err := o.str("url")
	switch {
	case err != nil:
		return patchRequest{}, err
	case st == fieldNull:
		return patchRequest{}, errors.New(`field "url" cannot be null`)
	case st == fieldSet:
		req.url = &u
	}
	exp, st, err := o.timeMillis("expires_at")
	if err != nil {
		return patchRequest{}, err
	}
	req.setExpiry, req.expiresAt = st != fieldAbsent, exp
	limit, st, err := o.integer("click_limit")
	if err != nil {
		return patchRequest{}, err
	}
	if st == fieldSet && limit < 1 {
		return patchRequest{}, errors.New(`field "click_limit" must be at least 1; send null to remove the limit`)
	}
	req.setLimit, req.clickLimit = st != fieldAbsent, limit
	name, st, err := o.str("status")
	switch {
	case err != nil:
		return patchRequest{}, err
	case st == fieldNull:
		return patchRequest{}, errors.New(`field "status" cannot be null`)
	case st == fieldSet:
		status, known := store.ParseStatus(name)
		if !known || (status != store.StatusActive && status != store.StatusDisabled) {
			return patchRequest{}, fmt.Errorf(`field "status" must be "active" or "disabled"; got %q`, name)
		}
		req.status = &status
	}
	forward, st, err := o.boolean("forward_query")
	switch {
	case err != nil:
		return patchRequest{}, err
	case st == fieldNull:
		return patchRequest{}, errors.New(`field "forward_query" cannot be null; send true or false`)
	case st == fieldSet:
		req.forward = &forward
	}
	tags, st, err := o.tags("tags")
	if err != nil {
		return patchRequest{}, err
	}
	req.setTags, req.tags = st != fieldAbsent, tags
	if raw, ok := o["rules"]; ok {
		req.setRules, req.rules = true, raw
	}
	return req, nil
}

// tags reads an array of tags (null or [] for none) in normal form: lower
// case, sorted, without duplicates (store.NormalizeTags).
func (o jsonObject) tags(name string) (string, fieldState, error) {
	st := o.state(name)
	if st != fieldSet {
		return "", st, nil
	}
	var v []string
	if err := json.Unmarshal(o[name], &v); err != nil {
		return "", st, fmt.Errorf("field %q must be an array of strings such as [\"spring\", \"sms\"]", name)
	}
	tags, err := store.NormalizeTags(v)
	if err != nil {
		return "", st, fmt.Errorf("field %q: %w (a link has at most %d tags, each 1 to %d characters; upper case is lowered)",
			name, err, store.MaxTags, store.MaxTagLen)
	}
	return tags, st, nil
}

// formatMillis renders Unix milliseconds as RFC 3339 UTC.
func formatMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.999Z07:00")
}
