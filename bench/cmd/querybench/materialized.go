package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// errMaterializerStuck: passes go on and write nothing while units stay
// pending.
var errMaterializerStuck = errors.New("the materializer is stuck")

// waitMaterialized waits until a ClickHouse-backed node's materializer
// has written the loaded hours as rows (rollup/clickhouse DESIGN.md,
// "Site rows"): a pass that began after the load ended (the second pass
// counted from now) and left nothing pending. Timing before that would
// measure the raw path the rows replace.
func waitMaterialized(ctx context.Context, s *server, timeout time.Duration, out io.Writer) (time.Duration, error) {
	const (
		passes  = "waymark_clickhouse_materialize_passes_total"
		pending = "waymark_clickhouse_site_units_pending"
		written = "waymark_clickhouse_site_units_materialized_total"
	)
	t0 := time.Now()
	m, err := harness.ScrapeMetrics(ctx, s.node.API.HTTP, s.node.BaseURL)
	if err != nil {
		return 0, err
	}
	want := m.Sum(passes) + 2
	last := time.Now()
	stuckSince, stuckAt := 0.0, -1.0 // passes since the written count last moved
	for {
		m, err := harness.ScrapeMetrics(ctx, s.node.API.HTTP, s.node.BaseURL)
		if err != nil {
			return 0, err
		}
		if m.Sum(passes) >= want && m.Sum(pending) == 0 {
			return time.Since(t0), nil
		}
		// Passes that write nothing while units stay pending: the
		// materializer cannot finish them (a visit it cannot load whole,
		// for one); the questions then read raw events past the rows, and
		// the report says so.
		if w := m.Sum(written); w != stuckAt {
			stuckAt, stuckSince = w, m.Sum(passes)
		} else if m.Sum(passes)-stuckSince >= 3 && m.Sum(pending) > 0 {
			return time.Since(t0), fmt.Errorf("%w: %.0f site units pending after %.0f passes that wrote none", errMaterializerStuck, m.Sum(pending), m.Sum(passes)-stuckSince)
		}
		if time.Since(t0) > timeout {
			return 0, fmt.Errorf("%s: hours not materialized after %v (%.0f passes, %.0f units pending)", s.name, timeout, m.Sum(passes), m.Sum(pending))
		}
		if time.Since(last) >= 30*time.Second {
			fmt.Fprintf(out, "%s: materializing closed hours (%.0f site units written, %.0f pending after the last pass)\n",
				s.name, m.Sum(written), m.Sum(pending))
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
