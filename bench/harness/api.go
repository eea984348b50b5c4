package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// APIClient calls a node's public API as one owner.
type APIClient struct {
	BaseURL string // "http://127.0.0.1:PORT"
	Key     string // the owner's API key
	HTTP    *http.Client
}

// NewAPIClient keeps a few connections open, so tight polling and query
// loops do not churn loopback ports.
func NewAPIClient(baseURL, key string) *APIClient {
	return &APIClient{BaseURL: baseURL, Key: key, HTTP: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: time.Minute},
	}}
}

// GetJSON GETs path (with its query) and decodes a 200 answer into v.
func (c *APIClient) GetJSON(ctx context.Context, path string, v any) error {
	return c.do(ctx, http.MethodGet, path, nil, http.StatusOK, v)
}

// PostJSON POSTs body as JSON and decodes an answer with status want into
// v (nil to ignore it). 429 and 503 are retried for up to 30 s.
func (c *APIClient) PostJSON(ctx context.Context, path string, body any, want int, v any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("cannot encode %s body: %w", path, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	wait := 20 * time.Millisecond
	for {
		err := c.do(ctx, http.MethodPost, path, b, want, v)
		se, retry := err.(statusError)
		if err == nil || !retry || (se.status != http.StatusTooManyRequests && se.status != http.StatusServiceUnavailable) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

type statusError struct {
	method, path string
	status       int
	body         string
}

func (e statusError) Error() string {
	return fmt.Sprintf("%s %s: status %d: %s", e.method, e.path, e.status, e.body)
}

func (c *APIClient) do(ctx context.Context, method, path string, body []byte, want int, v any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return fmt.Errorf("cannot build %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("cannot %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("cannot read the answer to %s %s: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return statusError{method, path, resp.StatusCode, truncate(b, 300)}
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("cannot decode the answer to %s %s: %w", method, path, err)
	}
	return nil
}
