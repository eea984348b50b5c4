package harness

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// ClickHouseDatabase is the database the benchmarks' ClickHouse-backed
// nodes keep their analytics in (the node's default).
const ClickHouseDatabase = "waymark"

// ClickHouseStoreArgs are the node flags that keep its aggregator's
// analytics in ch, database db (README, "When one aggregator is not
// enough"); the node creates and migrates the schema at start and is not
// ready until it has.
func ClickHouseStoreArgs(ch *ClickHouse, db string) []string {
	return []string{"--analytics-store", "clickhouse", "--clickhouse-url", ch.URL(), "--clickhouse-database", db}
}

// CountClickHouseEvents is how many events ClickHouse-backed aggregators
// hold in db, each once: count() of the node schema's raw events table
// (rollup/clickhouse/schema.go) read FINAL, which collapses a retried
// segment's second copy as every stats query does.
func CountClickHouseEvents(ctx context.Context, ch *ClickHouse, db string) (uint64, error) {
	got, err := ch.Query(ctx, "SELECT count() FROM "+db+".events FINAL")
	if err != nil {
		return 0, fmt.Errorf("cannot count the events in clickhouse: %w", err)
	}
	var n uint64
	if _, err := fmt.Sscan(strings.TrimSpace(got), &n); err != nil {
		return 0, fmt.Errorf("cannot read the count %q: %w", got, err)
	}
	return n, nil
}

// WaitClickHouseEvents polls CountClickHouseEvents until it is want, and
// returns when it first saw it. More than want, or still fewer at the
// timeout, is an error carrying the last count.
func WaitClickHouseEvents(ctx context.Context, ch *ClickHouse, db string, want uint64, timeout time.Duration) (time.Time, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		n, err := CountClickHouseEvents(ctx, ch, db)
		switch {
		case err == nil && n == want:
			return time.Now(), n, nil
		case err == nil && n > want:
			return time.Time{}, n, fmt.Errorf("clickhouse holds %d events; want %d (counted twice?)", n, want)
		case ctx.Err() != nil:
			return time.Time{}, n, fmt.Errorf("clickhouse holds %d events after %v; want %d (last error: %v)", n, timeout, want, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
