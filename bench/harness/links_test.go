package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNode is a tiny stand-in for the link API and redirect path: enough to
// test the loader, not a model of Waymark.
type fakeNode struct {
	mu      sync.Mutex
	byKey   map[string]string // Idempotency-Key -> code
	byCode  map[string]string // code -> destination
	refused map[string]bool   // keys already answered 429 once
}

func newFakeNode() *fakeNode {
	return &fakeNode{byKey: map[string]string{}, byCode: map[string]string{}, refused: map[string]bool{}}
}

func (f *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/links" {
		f.create(w, r)
		return
	}
	f.mu.Lock()
	dest, ok := f.byCode[strings.TrimPrefix(r.URL.Path, "/")]
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Location", dest)
	w.WriteHeader(http.StatusFound)
}

func (f *fakeNode) create(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer k1" {
		http.Error(w, `{"type":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	var body struct {
		URL string `json:"url"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&body); err != nil || body.URL == "" {
		http.Error(w, `{"type":"invalid-url"}`, http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	defer f.mu.Unlock()
	// Every seventh new key is rate limited once, to exercise the retry.
	if len(f.byKey)%7 == 0 && !f.refused[key] {
		f.refused[key] = true
		w.Header().Set("Retry-After", "0")
		http.Error(w, `{"type":"rate-limited"}`, http.StatusTooManyRequests)
		return
	}
	code, ok := f.byKey[key]
	if !ok {
		code = fmt.Sprintf("c%06d", len(f.byKey))
		f.byKey[key] = code
		f.byCode[code] = body.URL
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"code":%q,"url":%q}`, code, body.URL)
}

func TestLoadLinksAgainstFakeNode(t *testing.T) {
	fake := newFakeNode()
	srv := httptest.NewServer(fake)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var progress strings.Builder
	const n = 300
	codes, err := LoadLinks(ctx, LinkLoadConfig{BaseURL: srv.URL, APIKeys: []string{"k1"}, Count: n, Workers: 8, Progress: &progress})
	if err != nil {
		t.Fatalf("LoadLinks: %v", err)
	}
	if len(codes) != n {
		t.Fatalf("got %d codes; want %d", len(codes), n)
	}
	seen := map[string]bool{}
	for i, c := range codes {
		if c == "" || seen[c] {
			t.Fatalf("code %d = %q; want a fresh non-empty code", i, c)
		}
		seen[c] = true
	}
	if got, want := len(fake.byCode), n; got != want {
		t.Errorf("fake node holds %d links; want %d (retries must not create twice)", got, want)
	}
	if got := strings.Count(progress.String(), "\n"); got != 10 {
		t.Errorf("got %d progress lines; want 10:\n%s", got, progress.String())
	}
	if err := CheckRedirects(ctx, srv.URL, codes, BenchURL, []int{0, 1, n - 1}); err != nil {
		t.Errorf("CheckRedirects: %v", err)
	}
	// A code pointing somewhere else must be caught.
	swapped := append([]string(nil), codes...)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	if err := CheckRedirects(ctx, srv.URL, swapped, BenchURL, []int{0}); err == nil {
		t.Error("CheckRedirects with swapped codes succeeded; want an error")
	}
}

func TestLoadLinksStopsOnRejectedKey(t *testing.T) {
	srv := httptest.NewServer(newFakeNode())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := LoadLinks(ctx, LinkLoadConfig{BaseURL: srv.URL, APIKeys: []string{"wrong"}, Count: 50, Workers: 4})
	if err == nil || !strings.Contains(err.Error(), "status 401") {
		t.Errorf("LoadLinks with a bad key: got %v; want a status 401 error", err)
	}
}
