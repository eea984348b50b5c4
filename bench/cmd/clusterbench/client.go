package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// apiClient makes the single requests of the lag and takedown phases
// (the throughput phases use harness.RunCreates). Redirects are reported,
// never followed.
type apiClient struct {
	http *http.Client
}

func newAPIClient() *apiClient {
	return &apiClient{http: &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{MaxIdleConnsPerHost: 32, IdleConnTimeout: time.Minute},
	}}
}

func (a *apiClient) close() { a.http.CloseIdleConnections() }

// created is one acknowledged create.
type created struct {
	code  string
	index uint64    // Waymark-Index: the log index of the create
	acked time.Time // when the answer arrived
}

// create makes a link through baseURL and returns it once acknowledged.
func (a *apiClient) create(ctx context.Context, baseURL, key, dest string) (created, error) {
	body, _ := json.Marshal(map[string]string{"url": dest})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/links", strings.NewReader(string(body)))
	if err != nil {
		return created{}, fmt.Errorf("cannot build create request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return created{}, fmt.Errorf("cannot create a link through %s: %w", baseURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	acked := time.Now()
	if err != nil {
		return created{}, fmt.Errorf("cannot read the create answer from %s: %w", baseURL, err)
	}
	if resp.StatusCode != http.StatusCreated {
		return created{}, fmt.Errorf("create through %s: got status %d: %s; want 201", baseURL, resp.StatusCode, truncate(b))
	}
	var cr struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(b, &cr); err != nil || cr.Code == "" {
		return created{}, fmt.Errorf("create through %s: no code in %s", baseURL, truncate(b))
	}
	index, err := strconv.ParseUint(resp.Header.Get("Waymark-Index"), 10, 64)
	if err != nil {
		return created{}, fmt.Errorf("create through %s: bad Waymark-Index %q", baseURL, resp.Header.Get("Waymark-Index"))
	}
	return created{code: cr.Code, index: index, acked: acked}, nil
}

// takeDown deletes code through baseURL.
func (a *apiClient) takeDown(ctx context.Context, baseURL, key, code string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, baseURL+"/v1/links/"+code, nil)
	if err != nil {
		return fmt.Errorf("cannot build delete request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot delete %s through %s: %w", code, baseURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("delete %s through %s: got status %d: %s; want 204", code, baseURL, resp.StatusCode, truncate(b))
	}
	return nil
}

// redirect requests GET /code and returns the status and Location.
func (a *apiClient) redirect(ctx context.Context, baseURL, code string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/"+code, nil)
	if err != nil {
		return 0, "", fmt.Errorf("cannot build request: %w", err)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("cannot get %s/%s: %w", baseURL, code, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location"), nil
}

func truncate(b []byte) string {
	const n = 300
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

// pause waits d, or less if ctx ends first.
func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
