package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// waitMaterialized waits until a ClickHouse-backed node's materializer
// has written the loaded hours as rows (rollup/clickhouse DESIGN.md,
// "Site rows"): a pass that began after the load ended (the second pass
// counted from now) and left nothing pending. Timing before that would
// measure the raw path the rows replace.
func waitMaterialized(ctx context.Context, s *server, timeout time.Duration, out io.Writer) (time.Duration, error) {
	const passes, pending = "waymark_clickhouse_materialize_passes_total", "waymark_clickhouse_site_units_pending"
	t0 := time.Now()
	m, err := harness.ScrapeMetrics(ctx, s.node.API.HTTP, s.node.BaseURL)
	if err != nil {
		return 0, err
	}
	want := m.Sum(passes) + 2
	last := time.Now()
	for {
		m, err := harness.ScrapeMetrics(ctx, s.node.API.HTTP, s.node.BaseURL)
		if err != nil {
			return 0, err
		}
		if m.Sum(passes) >= want && m.Sum(pending) == 0 {
			return time.Since(t0), nil
		}
		if time.Since(t0) > timeout {
			return 0, fmt.Errorf("%s: hours not materialized after %v (%.0f passes, %.0f units pending)", s.name, timeout, m.Sum(passes), m.Sum(pending))
		}
		if time.Since(last) >= 30*time.Second {
			fmt.Fprintf(out, "%s: materializing closed hours (%.0f site units written, %.0f pending after the last pass)\n",
				s.name, m.Sum("waymark_clickhouse_site_units_materialized_total"), m.Sum(pending))
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
