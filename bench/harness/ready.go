package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// pollInterval is how often the wait helpers look again.
const pollInterval = 50 * time.Millisecond

// WaitHTTPOK polls url with GET until it answers 200 or ctx ends.
func WaitHTTPOK(ctx context.Context, client *http.Client, url string) error {
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("cannot build request for %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot get 200 from %s (last: %s): %w", url, last, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
}

// WaitFileContent polls path until it exists with non-blank content and
// returns that content without surrounding whitespace.
func WaitFileContent(ctx context.Context, path string) (string, error) {
	for {
		b, err := os.ReadFile(path)
		if s := strings.TrimSpace(string(b)); err == nil && s != "" {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("cannot read %s: %w", path, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
}

// ReadKeyFile reads API keys, one per line; blank lines are skipped.
func ReadKeyFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	keys := strings.Fields(string(b))
	if len(keys) == 0 {
		return nil, fmt.Errorf("cannot use %s: no key in it", path)
	}
	return keys, nil
}
