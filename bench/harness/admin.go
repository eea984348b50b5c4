package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// AdminClient reads a node's operator API.
type AdminClient struct {
	BaseURL string // "http://" + admin address
	Token   string // operator token
	client  *http.Client
}

// NewDevAdminClient reads the admin address and operator token that a
// node wrote into its data dir.
func NewDevAdminClient(dataDir string) (*AdminClient, error) {
	addr, err := os.ReadFile(filepath.Join(dataDir, "admin-addr"))
	if err != nil {
		return nil, fmt.Errorf("cannot find the admin address: %w", err)
	}
	token, err := os.ReadFile(filepath.Join(dataDir, "operator-token"))
	if err != nil {
		return nil, fmt.Errorf("cannot read the operator token: %w", err)
	}
	return &AdminClient{
		BaseURL: "http://" + strings.TrimSpace(string(addr)), Token: strings.TrimSpace(string(token)),
		client: &http.Client{Timeout: 30 * time.Second},
	}, nil
}

// EventsCount returns the aggregator's raw event count (GET
// /v1/events/count); site or link narrow it, empty means every event.
func (a *AdminClient) EventsCount(ctx context.Context, site, link string) (uint64, error) {
	q := url.Values{}
	if site != "" {
		q.Set("site", site)
	}
	if link != "" {
		q.Set("link", link)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.BaseURL+"/v1/events/count?"+q.Encode(), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot count events: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var out struct {
		Count *uint64 `json:"count"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.Count == nil {
		return 0, fmt.Errorf("cannot count events: status %d: %s", resp.StatusCode, truncate(b, 300))
	}
	return *out.Count, nil
}

// Metrics is one scrape of a node's /metrics: each sample's name with its
// labels, as printed (`waymark_ingest_dropped_total{reason="queue_full"}`),
// to its value.
type Metrics map[string]float64

// Sum adds up every sample of name, whatever its labels.
func (m Metrics) Sum(name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

// ScrapeMetrics reads baseURL/metrics (Prometheus text format).
func ScrapeMetrics(ctx context.Context, client *http.Client, baseURL string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot read metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("cannot read metrics: status %d", resp.StatusCode)
	}
	m := Metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		// The value follows the last space; label values may hold spaces.
		i := strings.LastIndexByte(line, ' ')
		if i <= 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read metrics: %w", err)
	}
	return m, nil
}
