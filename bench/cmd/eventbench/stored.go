package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// settleQuiet is how long the stored count must stay put, with every
// written event shipped, before the check takes it as final.
const settleQuiet = 2 * time.Second

// acceptedTally adds up, per site, the events the node accepted (202
// without a drop header) over the whole benchmark, warm-ups included.
type acceptedTally struct {
	sites      []site
	bySite     []uint64
	unanswered uint64
}

func newAcceptedTally(sites []site, probed int) *acceptedTally {
	t := &acceptedTally{sites: sites, bySite: make([]uint64, len(sites))}
	if probed == len(sites) {
		for i := range t.bySite {
			t.bySite[i] = 1
		}
	}
	return t
}

func (t *acceptedTally) add(res *harness.EventLoadResult) {
	for i, n := range res.AcceptedByDomain {
		t.bySite[i] += n
	}
	t.unanswered += res.Unanswered
}

func (t *acceptedTally) total() uint64 {
	var n uint64
	for _, v := range t.bySite {
		n += v
	}
	return n
}

// StoredCheck is the exactly-once check: what the node accepted against
// what its raw event store holds once shipping has settled.
type StoredCheck struct {
	Accepted      uint64   `json:"accepted"`     // 202 without a drop header, probes and warm-ups included
	Stored        uint64   `json:"stored"`       // the aggregator's raw event count
	CLICount      string   `json:"cli_count"`    // `waymark events count` for the first site, as printed
	Written       float64  `json:"written"`      // waymark_ingest_written_events_total
	Shipped       float64  `json:"shipped"`      // waymark_ingest_shipped_events_total
	ShipRetries   float64  `json:"ship_retries"` // waymark_ingest_ship_retries_total
	Unanswered    uint64   `json:"unanswered"`   // requests without an answer: stored or not, nobody knows
	SettleSeconds float64  `json:"settle_seconds"`
	SiteMismatch  []string `json:"site_mismatch,omitempty"`
	ExactlyOnce   bool     `json:"exactly_once"`
}

// checkStored polls the node until every written event is shipped and the
// stored count has stopped moving, then compares it with what was accepted,
// in total and per site.
func checkStored(ctx context.Context, cfg config, node *harness.Node, dataDir string, acc *acceptedTally) (*StoredCheck, error) {
	admin, err := harness.NewDevAdminClient(dataDir)
	if err != nil {
		return nil, err
	}
	check := &StoredCheck{Accepted: acc.total(), Unanswered: acc.unanswered}
	start := time.Now()
	deadline := start.Add(cfg.SettleTimeout)
	lastCount, lastChange := uint64(0), start
	for {
		count, err := admin.EventsCount(ctx, "", "")
		if err != nil {
			return nil, err
		}
		m, err := nodeMetrics(ctx, node.BaseURL)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		if count != lastCount {
			lastCount, lastChange = count, now
		}
		check.Stored, check.Written, check.Shipped = count, m["waymark_ingest_written_events_total"], m["waymark_ingest_shipped_events_total"]
		check.ShipRetries = m["waymark_ingest_ship_retries_total"]
		allShipped := check.Written == check.Shipped && m["waymark_ingest_queue_length"] == 0
		if allShipped && now.Sub(lastChange) >= settleQuiet {
			check.SettleSeconds = lastChange.Sub(start).Seconds()
			break
		}
		if now.After(deadline) {
			return nil, fmt.Errorf("cannot see shipping settle in %v: stored %d (last change %v ago), written %.0f, shipped %.0f, ship retries %.0f, accepted %d",
				cfg.SettleTimeout, count, now.Sub(lastChange).Round(time.Millisecond), check.Written, check.Shipped, check.ShipRetries, check.Accepted)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cannot wait for shipping: %w", context.Cause(ctx))
		case <-time.After(250 * time.Millisecond):
		}
	}
	for i, s := range acc.sites {
		n, err := admin.EventsCount(ctx, s.ID, "")
		if err != nil {
			return nil, err
		}
		if n != acc.bySite[i] {
			check.SiteMismatch = append(check.SiteMismatch, fmt.Sprintf("%s: stored %d, accepted %d", s.Domain, n, acc.bySite[i]))
		}
	}
	check.CLICount, err = cliCount(ctx, node, dataDir, acc.sites[0].ID)
	if err != nil {
		return nil, err
	}
	check.ExactlyOnce = check.Unanswered == 0 && check.Stored == check.Accepted && len(check.SiteMismatch) == 0
	return check, nil
}

func (c *StoredCheck) print(w io.Writer) {
	verdict := "exactly once: OK"
	switch {
	case c.Unanswered > 0:
		verdict = fmt.Sprintf("exactly once: UNKNOWN (%d requests got no answer)", c.Unanswered)
	case !c.ExactlyOnce:
		verdict = "exactly once: FAILED"
	}
	fmt.Fprintf(w, "raw store: %d events stored, %d accepted (written %.0f, shipped %.0f, ship retries %.0f; settled %.1f s after the last run); %s\n",
		c.Stored, c.Accepted, c.Written, c.Shipped, c.ShipRetries, c.SettleSeconds, verdict)
	fmt.Fprintf(w, "waymark events count --site <first site>: %s\n", c.CLICount)
	for _, m := range c.SiteMismatch {
		fmt.Fprintf(w, "  site mismatch: %s\n", m)
	}
}

// nodeMetrics reads the node's /metrics.
func nodeMetrics(ctx context.Context, baseURL string) (harness.Metrics, error) {
	return harness.ScrapeMetrics(ctx, apiClient, baseURL)
}

// cliCount runs `waymark events count --site ID --data-dir DIR`, the
// operator's own view of the same figure.
func cliCount(ctx context.Context, node *harness.Node, dataDir, siteID string) (string, error) {
	cmd := exec.CommandContext(ctx, node.Binary, "events", "count", "--site", siteID, "--data-dir", dataDir)
	cmd.Env = append(os.Environ(), node.Env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("cannot run waymark events count: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
