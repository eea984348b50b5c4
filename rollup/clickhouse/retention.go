package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// ApplyRetention drops the raw days whose every event is older than
// Retention: whole day partitions of events and drop_tallies (18.16 has no
// TTL; ALTER TABLE ... DROP PARTITION is the same on both). Before a day
// of events goes, each link's non-bot clicks of it are written to
// retired_clicks, so all-time clicks outlive it. It returns the days
// dropped (YYYYMMDD). A run cut short is run again harmlessly: the
// retired rows of a day collapse onto themselves and dropping a partition
// that is gone is a no-op.
func (b *Backend) ApplyRetention(ctx context.Context) ([]uint32, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	days, err := b.applyRetention(ctx)
	b.c.m.daysDropped.Add(len(days))
	if err != nil {
		b.c.m.retentionFailed.Inc()
	}
	return days, err
}

func (b *Backend) applyRetention(ctx context.Context) ([]uint32, error) {
	// The oldest day kept is the one holding now - Retention.
	cut := b.cfg.Now().Add(-b.cfg.Retention).UTC()
	cutDay := uint32(cut.Year()*10000 + int(cut.Month())*100 + cut.Day())
	var dropped []uint32
	for _, table := range []string{"events", "drop_tallies", "site_rows", "site_units", "site_open_visits", "link_rows", "link_units", "link_day_rows", "link_days"} {
		days, err := b.partitions(ctx, table)
		if err != nil {
			return dropped, err
		}
		for _, d := range days {
			if d >= cutDay || (table == "site_rows" || table == "link_rows" || table == "link_day_rows" || table == "link_days") && d >= cutDay/100 {
				continue // the rows (and link day markers): by month, dropped once all of it is past
			}
			if table == "events" {
				ins := fmt.Sprintf("INSERT INTO retired_clicks (code, day, clicks) SELECT code, %d, count() FROM events FINAL WHERE toYYYYMMDD(time) = %d AND %s AND %s GROUP BY code",
					d, d, linkWhereAny, notBot)
				if err := b.c.Exec(ctx, ins); err != nil {
					return dropped, fmt.Errorf("cannot keep the clicks of day %d: %w", d, err)
				}
			}
			if err := b.c.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DROP PARTITION %d", table, d)); err != nil {
				return dropped, fmt.Errorf("cannot drop day %d of %s: %w", d, table, err)
			}
			if table == "events" {
				dropped = append(dropped, d)
			}
		}
	}
	return dropped, nil
}

// linkWhereAny selects every click.
const linkWhereAny = "site = '' AND " + kindClick

// partitions lists a day-partitioned table's days held.
func (b *Backend) partitions(ctx context.Context, table string) ([]uint32, error) {
	res, err := b.c.Query(ctx, "SELECT DISTINCT partition FROM system.parts WHERE database = "+String(b.c.Database())+
		" AND table = "+String(table)+" AND active")
	if err != nil {
		return nil, fmt.Errorf("cannot list the partitions of %s: %w", table, err)
	}
	var out []uint32
	for _, raw := range res.Data {
		s, err := rawValue(raw[0]).str()
		if err != nil {
			return nil, err
		}
		d, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("partition %q of %s is not a day", s, table)
		}
		out = append(out, uint32(d))
	}
	slices.Sort(out)
	return out, nil
}

// RetentionLoop runs ApplyRetention every interval until ctx ends,
// logging nothing itself: errors go to onErr.
func (b *Backend) RetentionLoop(ctx context.Context, interval time.Duration, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := b.ApplyRetention(ctx); err != nil && onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
