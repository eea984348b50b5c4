package edge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// testWriter applies writes straight to the store through store.Batch, the
// way the FSM does for a committed entry, and invalidates the cache after
// each commit. The real raft path is tested in the raft and node packages.
type testWriter struct {
	st  *store.Store
	srv *Server // set once the server exists

	mu       sync.Mutex
	index    uint64
	perm     *store.Permuter
	block    store.Block
	fail     error  // returned by the next write, then cleared
	nextCode string // returned by the next NewCode instead of a fresh code
}

func newTestWriter(t testing.TB, st *store.Store) *testWriter {
	t.Helper()
	perm, err := store.NewPermuter([]byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := st.AppliedIndex()
	if err != nil {
		t.Fatal(err)
	}
	return &testWriter{st: st, perm: perm, index: idx}
}

// apply runs fn in one batch at the next index and commits it.
func (w *testWriter) apply(fn func(b *store.Batch, index uint64) error) (uint64, error) {
	if err := w.fail; err != nil {
		w.fail = nil
		return 0, err
	}
	b := w.st.NewBatch()
	defer b.Close()
	index := w.index + 1
	if err := fn(b, index); err != nil {
		return 0, err
	}
	if err := b.Commit(index); err != nil {
		return 0, err
	}
	w.index = index
	return index, nil
}

func (w *testWriter) invalidate(code string) {
	if w.srv != nil {
		w.srv.Invalidate(code)
	}
}

func (w *testWriter) CreateLink(_ context.Context, l *store.Link, idem *store.IdempotencyWrite) (uint64, *store.Idempotency, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if idem != nil {
		rec, found, err := w.st.Idempotency(idem.Owner, idem.Key)
		if err != nil {
			return 0, nil, err
		}
		if found && idem.Record.CreatedAt-rec.CreatedAt < store.IdempotencyTTL {
			return 0, &rec, nil
		}
	}
	index, err := w.apply(func(b *store.Batch, index uint64) error {
		l.Index = index
		if err := b.CreateLink(l); err != nil {
			return err
		}
		if idem != nil {
			return b.PutIdempotency(idem.Owner, idem.Key, &idem.Record)
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	w.invalidate(l.Code)
	return index, nil, nil
}

func (w *testWriter) UpdateLink(_ context.Context, p *store.LinkPatch) (store.Link, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out store.Link
	_, err := w.apply(func(b *store.Batch, index uint64) error {
		var err error
		out, err = b.UpdateLink(p, index)
		return err
	})
	if err != nil {
		return store.Link{}, err
	}
	w.invalidate(p.Code)
	return out, nil
}

// CreateLinks is not modelled here: bulk creates are tested against the
// real FSM (raft's bulk tests and cmd/waymark's TestE2EBulk).
func (w *testWriter) CreateLinks(context.Context, []store.BulkItem) ([]store.BulkResult, uint64, error) {
	return nil, 0, errors.New("bulk creates are not modelled by the edge test writer")
}

func (w *testWriter) CreateSite(_ context.Context, s *store.Site) (uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.apply(func(b *store.Batch, _ uint64) error { return b.PutSite(s) })
}

func (w *testWriter) UpdateSite(_ context.Context, p *store.SitePatch) (store.Site, uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out store.Site
	index, err := w.apply(func(b *store.Batch, _ uint64) error {
		var err error
		out, err = b.UpdateSite(p)
		return err
	})
	return out, index, err
}

func (w *testWriter) NewCode(context.Context) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.nextCode; c != "" {
		w.nextCode = ""
		return c, nil
	}
	if w.block.Len() == 0 {
		if _, err := w.apply(func(b *store.Batch, _ uint64) error {
			var err error
			w.block, _, err = b.AllocBlock("test", 1000)
			return err
		}); err != nil {
			return "", err
		}
	}
	id := w.block.Start
	w.block.Start++
	return string(w.perm.AppendCodeFor(nil, id)), nil
}

// putLink writes a link directly, as an operator edit or test fixture.
func (w *testWriter) putLink(t testing.TB, l store.Link) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.Redirect == 0 {
		l.Redirect = 302
	}
	if _, err := w.apply(func(b *store.Batch, index uint64) error {
		l.Index = index
		return b.CreateLink(&l)
	}); err != nil {
		t.Fatal(err)
	}
	w.invalidate(l.Code)
}

// operatorPatch applies an edit without an owner (a takedown).
func (w *testWriter) operatorPatch(t testing.TB, p store.LinkPatch) {
	t.Helper()
	p.Owner = ""
	if _, err := w.UpdateLink(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
}

func (w *testWriter) addOwner(t testing.TB, id, key string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.apply(func(b *store.Batch, _ uint64) error {
		return b.PutOwner(&store.Owner{ID: id, Name: id}, store.HashAPIKey([]byte(key)))
	}); err != nil {
		t.Fatal(err)
	}
}

func (w *testWriter) failNext(err error) {
	w.mu.Lock()
	w.fail = err
	w.mu.Unlock()
}

// fakeClock is an injectable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const (
	keyAlice = "alice-key-0123456789"
	keyBob   = "bob-key-0123456789"
)

// env is one edge server on a loopback listener over a fresh Pebble store.
type env struct {
	t      *testing.T
	st     *store.Store
	w      *testWriter
	srv    *Server
	clock  *fakeClock
	set    *metrics.Set
	addr   string
	client *fasthttp.HostClient
	cfg    Config
}

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newEnv(t *testing.T, mod func(*Config)) *env {
	t.Helper()
	e := &env{t: t, st: openStore(t), clock: newFakeClock(), set: metrics.NewSet()}
	e.w = newTestWriter(t, e.st)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	e.cfg = Config{
		PublicURL:    "http://" + e.addr,
		CacheEntries: 1024,
		BlockedHosts: []string{"evil.example", "[2001:db8::bad]"},
		Logger:       slog.New(slog.DiscardHandler),
		Metrics:      e.set,
		Now:          e.clock.Now,
	}
	if mod != nil {
		mod(&e.cfg)
	}
	e.srv, err = New(e.cfg, e.st, e.w)
	if err != nil {
		t.Fatal(err)
	}
	e.w.srv = e.srv
	e.w.addOwner(t, "alice", keyAlice)
	e.w.addOwner(t, "bob", keyBob)
	done := make(chan error, 1)
	go func() { done <- e.srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	e.client = &fasthttp.HostClient{Addr: e.addr, DisablePathNormalizing: true, ReadTimeout: 10 * time.Second}
	return e
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header *fasthttp.ResponseHeader
	body   []byte
}

func (r *response) get(name string) string { return string(r.header.Peek(name)) }

// problemDoc is an RFC 9457 body as a client reads it.
type problemDoc struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance"`
}

// problem decodes a problem+json body.
func (r *response) problem(t *testing.T) problemDoc {
	t.Helper()
	if ct := r.get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type: got %q; want application/problem+json (status %d, body %s)", ct, r.status, r.body)
	}
	var p problemDoc
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("cannot decode problem %s: %v", r.body, err)
	}
	if p.Status != r.status {
		t.Errorf("problem status: got %d; want %d", p.Status, r.status)
	}
	return p
}

// do sends one request; header pairs follow body.
func (e *env) do(method, path, key, body string, header ...string) *response {
	e.t.Helper()
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := &fasthttp.Response{}
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + e.addr + path)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.SetContentType("application/json")
		req.SetBodyString(body)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if method == fasthttp.MethodHead {
		resp.SkipBody = true
	}
	if err := e.client.Do(req, resp); err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	r := &response{status: resp.StatusCode(), header: &fasthttp.ResponseHeader{}, body: append([]byte(nil), resp.Body()...)}
	resp.Header.CopyTo(r.header)
	return r
}

// expect checks the status and, for problems, the type.
func (e *env) expect(r *response, status int, problemName string) {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("status: got %d; want %d (body %s)", r.status, status, r.body)
	}
	if problemName != "" {
		if p := r.problem(e.t); p.Type != "/problems/"+problemName {
			e.t.Fatalf("problem type: got %q; want %q (detail %q)", p.Type, "/problems/"+problemName, p.Detail)
		}
	}
}

// createLink creates a link through the API and returns its view.
func (e *env) createLink(key, body string, header ...string) linkView {
	e.t.Helper()
	r := e.do("POST", "/v1/links", key, body, header...)
	e.expect(r, 201, "")
	var v linkView
	if err := json.Unmarshal(r.body, &v); err != nil {
		e.t.Fatalf("cannot decode %s: %v", r.body, err)
	}
	return v
}

// rawGet sends a GET over a plain TCP connection and returns the response
// head exactly as written on the wire.
func (e *env) rawGet(path string) (statusLine string, headers map[string]string) {
	e.t.Helper()
	return e.rawRequest("GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
}

// rawRequest writes request bytes as they are and reads the response head.
func (e *env) rawRequest(request string) (statusLine string, headers map[string]string) {
	e.t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, request); err != nil {
		e.t.Fatal(err)
	}
	br := bufio.NewReader(c)
	headers = map[string]string{}
	for i := 0; ; i++ {
		line, err := br.ReadString('\n')
		if err != nil {
			e.t.Fatal(err)
		}
		line = strings.TrimSuffix(line, "\r\n")
		if i == 0 {
			statusLine = line
			continue
		}
		if line == "" {
			return statusLine, headers
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			e.t.Fatalf("malformed header line %q", line)
		}
		headers[k] = v
	}
}

func counterValue(set *metrics.Set, name string) uint64 {
	return set.GetOrCreateCounter(name).Get()
}

var errInjected = errors.New("injected")

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
