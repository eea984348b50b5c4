package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// byMonth are the tables partitioned by month (toYYYYMM), not by day.
var byMonth = map[string]bool{"site_rows": true, "site_days": true, "link_rows": true, "link_day_rows": true, "link_days": true}

func (b *Backend) applyRetention(ctx context.Context) ([]uint32, error) {
	// The oldest day kept is the one holding now - Retention.
	cut := b.cfg.Now().Add(-b.cfg.Retention).UTC()
	cutDay := uint32(cut.Year()*10000 + int(cut.Month())*100 + cut.Day())
	// A dirty-from mark before the cut still dirties the units after it:
	// folded into one at the cut before any unit goes.
	midnight := time.Date(cut.Year(), cut.Month(), cut.Day(), 0, 0, 0, 0, time.UTC)
	if err := b.foldDirty(ctx, midnight.Unix()/3600); err != nil {
		return nil, err
	}
	var dropped []uint32
	for _, table := range []string{"events", "drop_tallies", "site_rows", "site_units", "site_open_visits", "site_days", "link_rows", "link_units", "link_day_rows", "link_days"} {
		days, err := b.partitions(ctx, table)
		if err != nil {
			return dropped, err
		}
		for _, d := range days {
			if d >= cutDay || byMonth[table] && d >= cutDay/100 {
				continue // the rows (and day markers): by month, dropped once all of it is past
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

// foldDirty replaces the dirty marks before the hour cut (the first
// hour kept) by one mark per key at cut, then deletes them. A site's mark
// dirties every unit from its hour on, so on the units held (cut and
// later) one open mark at cut with the highest version of the site's has
// the same effect: a unit clean under a version below a dropped mark stays
// dirty, and the materializer's floor still beats it. The links' marks
// that end after cut fold into one from cut to the latest end (it may
// cover hours that no one of them did: they are only written again); the
// others have no hour left. The fold is written before the delete, which
// ClickHouse applies in the background (a mutation; ALTER TABLE ...
// DELETE is in 18.16 and current releases): a run cut short, or one that
// finds the delete not done yet, folds again onto the same key, the higher
// version winning. Nothing is written when no mark is older than the cut,
// so an hourly loop issues one delete a day.
func (b *Backend) foldDirty(ctx context.Context, cut int64) error {
	before := "toDateTime(" + strconv.FormatInt(cut*3600, 10) + ")"
	res, err := b.c.Query(ctx, "SELECT site, open, maxIf(version, keep), maxIf(until, keep), max(keep) FROM (SELECT site, toUInt8(until_unit = toDateTime(0)) AS open, version, toUInt32(until_unit) AS until, "+
		"toUInt8(open OR until_unit > "+before+") AS keep FROM site_dirty WHERE from_unit < "+before+") GROUP BY site, open ORDER BY site, open")
	if err != nil {
		return fmt.Errorf("cannot read the dirty marks before the retention cut: %w", err)
	}
	if len(res.Data) == 0 {
		return nil
	}
	var sb strings.Builder
	folded := 0
	for _, raw := range res.Data {
		row := rawRow(raw)
		key, err1 := row[0].str()
		v, err2 := row[2].uint()
		until, err3 := row[3].int()
		keep, err4 := row[4].int()
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return fmt.Errorf("cannot read the dirty marks before the retention cut: %w", err)
		}
		if keep == 0 {
			continue
		}
		if folded == 0 {
			sb.WriteString("INSERT INTO site_dirty (site, from_unit, until_unit, version) VALUES ")
		} else {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "(%s, %s, toDateTime(%d), %d)", String(key), before, until, v)
		folded++
	}
	if folded > 0 {
		if err := b.c.Exec(ctx, sb.String()); err != nil {
			return fmt.Errorf("cannot fold %d dirty marks at the retention cut: %w", folded, err)
		}
	}
	if err := b.c.Exec(ctx, "ALTER TABLE site_dirty DELETE WHERE from_unit < "+before); err != nil {
		return fmt.Errorf("cannot delete the dirty marks before the retention cut: %w", err)
	}
	b.c.m.dirtyFolded.Add(folded)
	return nil
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
