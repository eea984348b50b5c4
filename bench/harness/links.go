package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LinkLoadConfig describes a bulk create through the public API.
type LinkLoadConfig struct {
	BaseURL string // "http://127.0.0.1:PORT"
	// APIKeys are used round-robin by worker: worker w always uses key
	// w % len(APIKeys). The node rate-limits writes per key, so more keys
	// load faster.
	APIKeys []string
	Count   int
	Workers int                // concurrent creates; zero means 32
	Domain  string             // the custom domain the links are made on; empty: the default
	URL     func(i int) string // destination of link i; nil means BenchURL
	// RunID makes Idempotency-Keys unique per run, so a retried create is
	// applied once and a second run against the same node creates new links.
	RunID    string
	Progress io.Writer // a line every 10 %, if set
}

// BenchURL is the default destination of link i.
func BenchURL(i int) string { return "https://example.com/p/" + strconv.Itoa(i) }

// Retry bounds for one create; the Idempotency-Key makes each retry safe.
// A 429 only says "slower", so it gets a far larger budget than 503s and
// transport errors, which suggest something is broken.
const (
	createAttempts     = 8
	rateLimitedRetries = 300
)

// LoadLinks creates cfg.Count links with POST /v1/links and returns their
// codes, codes[i] being link i. The first create that fails for good stops
// the whole load.
func LoadLinks(ctx context.Context, cfg LinkLoadConfig) ([]string, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 32
	}
	if len(cfg.APIKeys) == 0 {
		return nil, errors.New("cannot load links: no API key")
	}
	if cfg.URL == nil {
		cfg.URL = BenchURL
	}
	if cfg.RunID == "" {
		cfg.RunID = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	client := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConnsPerHost: cfg.Workers, // reuse connections instead of churning ports
			MaxConnsPerHost:     cfg.Workers,
		},
	}
	defer client.CloseIdleConnections()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	codes := make([]string, cfg.Count)
	var next, done atomic.Int64
	progress := newProgress(cfg.Progress, cfg.Count)
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		key := cfg.APIKeys[w%len(cfg.APIKeys)]
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= cfg.Count {
					return
				}
				code, err := createLink(ctx, client, cfg, key, i)
				if err != nil {
					cancel(err)
					return
				}
				codes[i] = code
				progress.report(int(done.Add(1)))
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("cannot load links: %w", err)
	}
	return codes, nil
}

type createResponse struct {
	Code string `json:"code"`
}

func createLink(ctx context.Context, client *http.Client, cfg LinkLoadConfig, key string, i int) (string, error) {
	fields := map[string]string{"url": cfg.URL(i)}
	if cfg.Domain != "" {
		fields["domain"] = cfg.Domain
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return "", fmt.Errorf("cannot encode link %d: %w", i, err)
	}
	idemKey := "bench-" + cfg.RunID + "-" + strconv.Itoa(i)
	failures, limited := 0, 0
	for {
		code, retry, err := createOnce(ctx, client, cfg.BaseURL, key, body, idemKey)
		if err == nil {
			return code, nil
		}
		if !retry || ctx.Err() != nil {
			return "", fmt.Errorf("cannot create link %d: %w", i, err)
		}
		var wait time.Duration
		if ra := (retryAfterError{}); errors.As(err, &ra) && ra.status == http.StatusTooManyRequests {
			if limited++; limited > rateLimitedRetries {
				return "", fmt.Errorf("cannot create link %d: still rate limited after %d retries", i, rateLimitedRetries)
			}
			wait = min(max(ra.after, 100*time.Millisecond), 5*time.Second)
		} else {
			if failures++; failures >= createAttempts {
				return "", fmt.Errorf("cannot create link %d after %d attempts: %w", i, createAttempts, err)
			}
			wait = min(50*time.Millisecond<<failures, 5*time.Second)
			if ra.after > 0 {
				wait = min(ra.after, 5*time.Second)
			}
		}
		select {
		case <-ctx.Done():
			return "", context.Cause(ctx)
		case <-time.After(wait):
		}
	}
}

type retryAfterError struct {
	status int
	after  time.Duration
}

func (e retryAfterError) Error() string { return "status " + strconv.Itoa(e.status) }

// createOnce sends one create and says whether a failure is worth retrying.
func createOnce(ctx context.Context, client *http.Client, baseURL, key string, body []byte, idemKey string) (string, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/links", bytes.NewReader(body))
	if err != nil {
		return "", false, fmt.Errorf("cannot build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idemKey)
	resp, err := client.Do(req)
	if err != nil {
		return "", true, err
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", true, fmt.Errorf("cannot read answer: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return "", true, retryAfterError{status: resp.StatusCode, after: time.Duration(secs) * time.Second}
	case resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK:
		return "", false, fmt.Errorf("got status %d: %s", resp.StatusCode, truncate(respBody, 300))
	}
	var cr createResponse
	if err := json.Unmarshal(respBody, &cr); err != nil {
		return "", false, fmt.Errorf("cannot decode answer %q: %w", truncate(respBody, 300), err)
	}
	if cr.Code == "" {
		return "", false, errors.New("answer has no code: " + truncate(respBody, 300))
	}
	return cr.Code, false, nil
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

// progress prints a line each time another tenth of the work is done.
type progress struct {
	w       io.Writer
	total   int
	started time.Time
	mu      sync.Mutex
	printed int // tenths already printed
}

func newProgress(w io.Writer, total int) *progress {
	return &progress{w: w, total: total, started: time.Now()}
}

func (p *progress) report(done int) {
	if p.w == nil || p.total == 0 {
		return
	}
	tenth := done * 10 / p.total
	p.mu.Lock()
	defer p.mu.Unlock()
	if tenth <= p.printed {
		return
	}
	p.printed = tenth
	elapsed := time.Since(p.started)
	fmt.Fprintf(p.w, "  loaded %d/%d links (%d%%) in %v, %.0f/s\n",
		done, p.total, tenth*10, elapsed.Round(time.Millisecond), float64(done)/elapsed.Seconds())
}

// CheckRedirects fetches each code once, without following the redirect,
// and checks it answers 302 with the expected Location.
func CheckRedirects(ctx context.Context, baseURL string, codes []string, want func(i int) string, sample []int) error {
	return CheckRedirectsOn(ctx, baseURL, "", codes, want, sample)
}

// CheckRedirectsOn is CheckRedirects with the Host header host (a custom
// domain; empty: the address of baseURL).
func CheckRedirectsOn(ctx context.Context, baseURL, host string, codes []string, want func(i int) string, sample []int) error {
	client := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	for _, i := range sample {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/"+codes[i], nil)
		if err != nil {
			return fmt.Errorf("cannot build request for %q: %w", codes[i], err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("cannot get %q: %w", codes[i], err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || got != want(i) {
			return fmt.Errorf("GET /%s answered %d Location %q; want 302 Location %q", codes[i], resp.StatusCode, got, want(i))
		}
	}
	return nil
}

// LoadNodeLinks creates count links in a started dev node with its dev
// API key (start the node with a high --write-rate: one key is limited to
// it), checks that 20 of them, spread over the range, redirect to
// BenchURL(i), and returns the codes.
func LoadNodeLinks(ctx context.Context, n *Node, count, workers int, out io.Writer) ([]string, error) {
	return LoadNodeLinksOn(ctx, n, "", count, workers, out)
}

// LoadNodeLinksOn is LoadNodeLinks on a custom domain the dev owner holds
// (RegisterDevDomain); empty: the default domain.
func LoadNodeLinksOn(ctx context.Context, n *Node, domain string, count, workers int, out io.Writer) ([]string, error) {
	start := time.Now()
	codes, err := LoadLinks(ctx, LinkLoadConfig{BaseURL: n.BaseURL, APIKeys: []string{n.APIKey}, Count: count, Workers: workers, Domain: domain})
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	if out != nil {
		fmt.Fprintf(out, "  loaded %d links in %v (%.0f creates/s)\n", len(codes), took.Round(time.Millisecond), float64(len(codes))/took.Seconds())
	}
	k := min(20, len(codes))
	sample := make([]int, k)
	for i := range sample {
		sample[i] = i * len(codes) / k
	}
	if err := CheckRedirectsOn(ctx, n.BaseURL, domain, codes, BenchURL, sample); err != nil {
		return nil, fmt.Errorf("cannot trust the redirects of %s: %w", n.BaseURL, err)
	}
	return codes, nil
}

// NodeWriteRateArgs lift a node's per-key write limit and its create
// limits (per address, key and destination domain), so one API key loads
// links and sites quickly; they play no part in redirects or events.
var NodeWriteRateArgs = []string{"--write-rate", "1000000", "--create-rate-ip", "0", "--create-rate-key", "0", "--create-rate-domain", "0"}

// RegisterDevDomain makes domain a custom domain of a dev node's owner:
// registered with its API key, approved with the operator token.
func RegisterDevDomain(ctx context.Context, n *Node, domain string) error {
	admin, err := NewDevAdminClient(n.DataDir)
	if err != nil {
		return err
	}
	steps := []struct{ url, token, body string }{
		{n.BaseURL + "/v1/domains", n.APIKey, `{"domain":"` + domain + `"}`},
		{admin.BaseURL + "/v1/domains/" + domain + "/approve", admin.Token, ""},
	}
	for _, st := range steps {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.url, strings.NewReader(st.body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+st.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := admin.client.Do(req)
		if err != nil {
			return fmt.Errorf("cannot register domain %s: %w", domain, err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("cannot register domain %s: POST %s: %d %s", domain, st.url, resp.StatusCode, truncate(b, 300))
		}
	}
	return nil
}
