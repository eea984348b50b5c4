package clickhouse

import (
	"context"
	"fmt"
	"strings"

	"github.com/waymark/waymark/ingest"
)

// Operator reads of the raw events (`waymark events count` and `events
// tail` on a ClickHouse aggregator): the same filters and answers as the
// embedded store's Count and Tail (package rollup, query.go).

// EventFilter selects raw events as rollup.Filter does. The zero value
// selects every event, bots included.
type EventFilter struct {
	Code     string // only events with this link code (clicks)
	SiteID   string // only events of this site
	BotsOnly bool   // only bot-flagged events
}

func (f EventFilter) where() string {
	conds := []string{"1"}
	if f.Code != "" {
		conds = append(conds, "code = "+String(f.Code))
	}
	if f.SiteID != "" {
		conds = append(conds, "site = "+String(f.SiteID))
	}
	if f.BotsOnly {
		conds = append(conds, isBot)
	}
	return strings.Join(conds, " AND ")
}

// CountEvents returns how many raw events ClickHouse holds that match f,
// each counted once (FROM events FINAL: a record a retried insert stored
// twice is one event).
func (b *Backend) CountEvents(f EventFilter) (uint64, error) {
	if err := b.enter(); err != nil {
		return 0, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	res, err := b.c.Query(ctx, "SELECT count() FROM events FINAL WHERE "+f.where())
	if err != nil {
		return 0, fmt.Errorf("cannot count events: %w", err)
	}
	if len(res.Data) != 1 || len(res.Data[0]) != 1 {
		return 0, nil
	}
	return rawValue(res.Data[0][0]).uint()
}

// tailWindow is the first span TailEvents reads back from the newest
// matching event; it doubles until n events are in it or it reaches the
// oldest. Day partitions outside the window are not read.
const tailWindow = 3600 // seconds

// tailCols are the columns TailEvents reads, in RowBinary order.
const tailCols = "time, ms, kind, flags, id, code, site, name, node, path, referrer, country, device, browser"

// TailEvents returns the newest n events that match f (by event time,
// then id, as the embedded Tail), oldest first. Only the fields `events
// tail` shows are set: time, kind, flags, id, code, site, name, node,
// path, referrer, country, device and browser.
func (b *Backend) TailEvents(n int, f EventFilter) ([]ingest.Event, error) {
	if n <= 0 {
		return nil, nil
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	ctx, cancel := b.ctx()
	defer cancel()
	where := f.where()
	// min and max need no FINAL: a copy of a record has its time.
	res, err := b.c.Query(ctx, "SELECT count(), toUInt32(min(time)), toUInt32(max(time)) FROM events WHERE "+where)
	if err != nil {
		return nil, fmt.Errorf("cannot tail events: %w", err)
	}
	if len(res.Data) != 1 || len(res.Data[0]) != 3 {
		return nil, nil
	}
	row := rawRow(res.Data[0])
	rows, err1 := row[0].uint()
	oldest, err2 := row[1].uint()
	newest, err3 := row[2].uint()
	if err := firstErr([]error{err1, err2, err3}); err != nil {
		return nil, fmt.Errorf("cannot tail events: %w", err)
	}
	if rows == 0 {
		return nil, nil
	}
	for span := uint64(tailWindow); ; span *= 2 {
		lo := oldest
		if newest > span && newest-span > oldest {
			lo = newest - span
		}
		evs, err := b.tailFrom(ctx, where, lo, n)
		if err != nil {
			return nil, err
		}
		if len(evs) >= n || lo == oldest {
			return evs, nil
		}
	}
}

// tailFrom reads the newest n matching events at or after lo (Unix
// seconds) and returns them oldest first.
func (b *Backend) tailFrom(ctx context.Context, where string, lo uint64, n int) ([]ingest.Event, error) {
	raw, err := b.c.QueryRowBinary(ctx, fmt.Sprintf("SELECT %s FROM events FINAL WHERE %s AND time >= toDateTime(%d) ORDER BY time DESC, ms DESC, id DESC LIMIT %d",
		tailCols, where, lo, n))
	if err != nil {
		return nil, fmt.Errorf("cannot tail events: %w", err)
	}
	r := rbReader{b: raw}
	var out []ingest.Event
	for len(r.b) > 0 && r.err == nil {
		var ev ingest.Event
		ev.Time = int64(r.u32())*1000 + int64(r.u16())
		ev.Kind = ingest.Kind(r.u8())
		ev.Flags = r.u8()
		copy(ev.ID[:], r.need(16))
		for _, p := range [...]*string{&ev.Code, &ev.SiteID, &ev.Name, &ev.Node, &ev.Path, &ev.ReferrerHost,
			&ev.Country, &ev.Device, &ev.Browser} {
			*p = r.str()
		}
		if r.err == nil {
			out = append(out, ev)
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("cannot tail events: %w", r.err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}
