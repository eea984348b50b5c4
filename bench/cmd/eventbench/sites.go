package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// site is a registered analytics site.
type site struct {
	ID     string `json:"id"`
	Domain string `json:"domain"`
}

// siteDomain names the i-th benchmark site; the first is the issue's
// bench.example.
func siteDomain(i int) string {
	if i == 0 {
		return "bench.example"
	}
	return fmt.Sprintf("bench-%d.example", i+1)
}

var apiClient = &http.Client{Timeout: 10 * time.Second}

// registerSites creates n sites with POST /v1/sites. The node limits writes
// per API key, so 429 and 503 are retried.
func registerSites(ctx context.Context, baseURL, apiKey string, n int) ([]site, error) {
	sites := make([]site, 0, n)
	for i := range n {
		body := fmt.Sprintf(`{"domain":%q,"timezone":"UTC"}`, siteDomain(i))
		var s site
		err := retry(ctx, func() (bool, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/sites", strings.NewReader(body))
			if err != nil {
				return false, err
			}
			req.Header.Set("Authorization", "Bearer "+apiKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := apiClient.Do(req)
			if err != nil {
				return true, err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			switch {
			case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
				return true, fmt.Errorf("status %d: %s", resp.StatusCode, b)
			case resp.StatusCode != http.StatusCreated:
				return false, fmt.Errorf("status %d: %s", resp.StatusCode, b)
			}
			if err := json.Unmarshal(b, &s); err != nil || s.ID == "" {
				return false, fmt.Errorf("want a JSON site with an id, got %q", b)
			}
			return false, nil
		})
		if err != nil {
			return nil, fmt.Errorf("cannot register site %s: %w", siteDomain(i), err)
		}
		s.Domain = siteDomain(i)
		sites = append(sites, s)
	}
	return sites, nil
}

// probeSites posts one event per site until the node accepts it, so the
// measured runs never see a site the ingest path does not know yet. It
// returns the number of accepted probe events: they count towards what the
// store must hold.
func probeSites(ctx context.Context, baseURL string, sites []site) (int, error) {
	for _, s := range sites {
		body := fmt.Sprintf(`{"n":"pageview","u":"https://%s/probe","d":%q}`, s.Domain, s.Domain)
		err := retry(ctx, func() (bool, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/api/event", strings.NewReader(body))
			if err != nil {
				return false, err
			}
			req.Header.Set("Content-Type", "text/plain")
			req.Header.Set("Origin", "https://"+s.Domain)
			req.Header.Set("User-Agent", harness.DesktopUserAgent)
			req.Header.Set("X-Forwarded-For", "198.19.255.254")
			resp, err := apiClient.Do(req)
			if err != nil {
				// No answer: the event may be stored without our knowing,
				// which would spoil the exactly-once check.
				return false, err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			if resp.StatusCode != http.StatusAccepted {
				return false, fmt.Errorf("status %d: %s", resp.StatusCode, b)
			}
			if d := resp.Header.Get(harness.EventDroppedHeader); d != "" {
				return true, fmt.Errorf("dropped: %s", d)
			}
			return false, nil
		})
		if err != nil {
			return 0, fmt.Errorf("cannot get an event for %s accepted: %w", s.Domain, err)
		}
	}
	return len(sites), nil
}

// retry calls try until it succeeds, fails for good (again false), or 30 s
// pass.
func retry(ctx context.Context, try func() (again bool, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	wait := 20 * time.Millisecond
	for {
		again, err := try()
		if err == nil {
			return nil
		}
		if !again {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", context.Cause(ctx), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
