package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/waymark/waymark/docs"
)

func init() {
	// The HTML pages and the tracker script are strings to the validator.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/javascript", openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder("image/svg+xml", openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder("image/png", openapi3filter.FileBodyDecoder)
}

// specValidator checks every exchange that goes through it against
// docs/openapi.yaml: the request (path, method, parameters, body) and the
// answer (a documented status, its headers and its body's schema). It
// records which operations and statuses it saw, so a test can demand
// that every operation was exercised.
type specValidator struct {
	t      *testing.T
	doc    *openapi3.T
	router routers.Router
	next   http.RoundTripper

	mu   sync.Mutex
	seen map[string]map[int]int // operationId -> status -> count
	errs []string
}

// newSpecValidator loads and validates the description, pointed at base
// (http://host:port of the node under test).
func newSpecValidator(t *testing.T, base string) *specValidator {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(docs.OpenAPIYAML)
	if err != nil {
		t.Fatalf("cannot load docs/openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("docs/openapi.yaml is not a valid OpenAPI description: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: base}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("cannot route docs/openapi.yaml: %v", err)
	}
	return &specValidator{t: t, doc: doc, router: router, next: http.DefaultTransport, seen: map[string]map[int]int{}}
}

// client is an HTTP client whose every exchange is validated; it does
// not follow redirects (they are answers to check).
func (v *specValidator) client() *http.Client {
	return &http.Client{Transport: v, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// invalidRequestKey marks a request the test sends on purpose outside the
// description (a bad body, a missing field): the validator then demands
// that the description refuses it, and still checks the answer.
type invalidRequestKey struct{}

func markInvalid(req *http.Request) *http.Request {
	return req.WithContext(context.WithValue(req.Context(), invalidRequestKey{}, true))
}

func (v *specValidator) fail(format string, args ...any) {
	v.mu.Lock()
	v.errs = append(v.errs, fmt.Sprintf(format, args...))
	v.mu.Unlock()
}

func (v *specValidator) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	what := req.Method + " " + req.URL.RequestURI()
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		v.fail("%s: no operation in the description: %v", what, err)
		return v.next.RoundTrip(req)
	}
	// A copy for the validator, which reads the body itself.
	check := req.Clone(req.Context())
	check.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{
		Request: check, PathParams: params, Route: route,
		Options: &openapi3filter.Options{
			// Whether a key is good is the server's to say; the
			// validator checks the answers (401 included).
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
			MultiError:         true,
		},
	}
	reqErr := openapi3filter.ValidateRequest(req.Context(), in)
	wantInvalid, _ := req.Context().Value(invalidRequestKey{}).(bool)
	switch {
	case wantInvalid && reqErr == nil:
		v.fail("%s: sent as outside the description, but the description accepts it (body %.200s)", what, body)
	case !wantInvalid && reqErr != nil:
		v.fail("%s: request does not match the description: %v", what, reqErr)
	}

	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))

	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(respBody)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true, // an undocumented status is an error
			MultiError:            true,
		},
	}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		v.fail("%s: answer %d does not match the description: %v\n  body: %.300s", what, resp.StatusCode, err, respBody)
	}
	// openapi3filter skips HEAD and the statuses 301, 304, 307 and 308
	// altogether; check those answers' status and headers here.
	if skippedByFilter(req.Method, resp.StatusCode) {
		if err := checkStatusAndHeaders(route.Operation, resp); err != nil {
			v.fail("%s: answer %d does not match the description: %v", what, resp.StatusCode, err)
		}
		if req.Method == http.MethodHead && len(respBody) > 0 {
			v.fail("%s: a HEAD answer has a body", what)
		}
	}
	v.mu.Lock()
	op := route.Operation.OperationID
	if v.seen[op] == nil {
		v.seen[op] = map[int]int{}
	}
	v.seen[op][resp.StatusCode]++
	v.mu.Unlock()
	return resp, nil
}

// skippedByFilter reports whether openapi3filter.ValidateResponse
// returns nil without looking (kin-openapi v0.153.0,
// validate_response.go).
func skippedByFilter(method string, status int) bool {
	switch status {
	case http.StatusNotModified, http.StatusPermanentRedirect, http.StatusTemporaryRedirect, http.StatusMovedPermanently:
		return true
	}
	return method == http.MethodHead
}

// checkStatusAndHeaders checks that the status is documented for op and
// that the answer has every required header of it, each matching its
// schema.
func checkStatusAndHeaders(op *openapi3.Operation, resp *http.Response) error {
	ref := op.Responses.Status(resp.StatusCode)
	if ref == nil {
		ref = op.Responses.Default()
	}
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("status %d is not documented", resp.StatusCode)
	}
	for name, h := range ref.Value.Headers {
		if h.Value == nil {
			continue
		}
		got, present := resp.Header[http.CanonicalHeaderKey(name)]
		if !present {
			if h.Value.Required {
				return fmt.Errorf("required header %s is missing", name)
			}
			continue
		}
		if s := h.Value.Schema; s != nil && s.Value != nil {
			if err := s.Value.VisitJSON(got[0], openapi3.EnableJSONSchema2020()); err != nil {
				return fmt.Errorf("header %s: %v", name, err)
			}
		}
	}
	return nil
}

// check fails the test with every mismatch seen so far.
func (v *specValidator) check(t *testing.T) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range v.errs {
		t.Error(e)
	}
	v.errs = nil
}

// operations lists every operationId of the description.
func (v *specValidator) operations() []string {
	var ops []string
	for _, item := range v.doc.Paths.Map() {
		for _, op := range item.Operations() {
			ops = append(ops, op.OperationID)
		}
	}
	slices.Sort(ops)
	return ops
}

// statuses returns the statuses seen for op.
func (v *specValidator) statuses(op string) []int {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []int
	for s := range v.seen[op] {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// exchange is one validated request's answer.
type exchange = response

// send makes one request through the validator.
func (v *specValidator) send(t *testing.T, method, rawURL, key, body string, opts ...func(*http.Request) *http.Request) exchange {
	t.Helper()
	req := newRequest(t, method, rawURL, key, body)
	for _, o := range opts {
		req = o(req)
	}
	return roundTrip(t, v.client(), req)
}

func withHeader(name, value string) func(*http.Request) *http.Request {
	return func(r *http.Request) *http.Request { r.Header.Set(name, value); return r }
}

func invalid(r *http.Request) *http.Request { return markInvalid(r) }

func query(base string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return base + "?" + q.Encode()
}
