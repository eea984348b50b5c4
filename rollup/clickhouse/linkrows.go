package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Link rows (migrations 5 and 7; DESIGN.md, "Link rows"): a link's
// clicks are counted by their own time, with no visits, so a closed hour
// is simply its clicks grouped, for every link at once, each group's
// visitors encoded as a visitor set (linkwrite.go, linkset.go). An hour
// is ready when now >= its end + Lateness. A question reads the rows of
// the clean hours from its start up to the first hour that is not (its
// horizon), from the cache of decoded rows or ClickHouse, and the raw
// clicks after it, and merges the visitor sets in process (linkread.go).

// linkDimTuples is the ARRAY JOIN that writes each click under the whole
// link ("") and under every breakdown dimension.
func linkDimTuples() string {
	dims := make([]string, 0, len(linkColumns))
	for d := range linkColumns {
		dims = append(dims, d)
	}
	slices.Sort(dims)
	var sb strings.Builder
	sb.WriteString("[('', '')")
	for _, d := range dims {
		sb.WriteString(", (" + String(d) + ", " + linkColumns[d] + ")")
	}
	sb.WriteString("]")
	return sb.String()
}

// maxLinkRowHours bounds the hours a question reads from link rows (its
// buckets are mapped hour by hour in SQL).
const maxLinkRowHours = 24 * 100

// insertLinkUnits writes the markers of the link hours [h0, h1).
func (c *Client) insertLinkUnits(ctx context.Context, h0, h1 int64, version uint64, state uint8) error {
	if h1 <= h0 {
		return nil
	}
	var sb strings.Builder
	sb.WriteString("INSERT INTO link_units (hour, version, state) VALUES ")
	for h := h0; h < h1; h++ {
		if h > h0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "(toDateTime(%d), %d, %d)", h*3600, version, state)
	}
	if err := c.Exec(ctx, sb.String()); err != nil {
		return fmt.Errorf("cannot mark the link hours: %w", err)
	}
	return nil
}

// materializeLinks writes the rows of every ready link hour not clean
// (with force, every one in [from, to)), from the oldest click's hour, in
// runs of up to a week.
func (b *Backend) materializeLinks(ctx context.Context, from, to int64, force bool) (int, error) {
	res, err := b.c.Query(ctx, "SELECT count(), toUInt32(min(time)) FROM events WHERE "+linkWhereAny)
	if err != nil {
		return 0, fmt.Errorf("cannot find the oldest click: %w", err)
	}
	ready := hourOf(b.cfg.Now().Add(-b.cfg.Lateness).UnixMilli())
	first := ready
	if len(res.Data) == 1 {
		row := rawRow(res.Data[0])
		n, err1 := row[0].int()
		sec, err2 := row[1].int()
		if err := errors.Join(err1, err2); err != nil {
			return 0, fmt.Errorf("cannot find the oldest click: %w", err)
		}
		if n > 0 {
			first = sec / 3600
		}
	}
	units, hours, err := b.c.linkUnits(ctx, ready*msPerHour, false)
	if err != nil {
		return 0, err
	}
	if len(hours) > 0 {
		first = min(first, hours[0])
	}
	var todo []int64
	for h := first; h < ready; h++ {
		st, ok := units[h]
		if force && h >= from && h < to || !force && (!ok || !st.clean) {
			todo = append(todo, h)
		}
	}
	if !force && settling(units, todo, time.Now(), b.cfg.MarkSettle) {
		b.c.m.settleWaits.Inc()
		return 0, nil
	}
	done := 0
	for len(todo) > 0 {
		n := 1
		for n < len(todo) && n < 24 && todo[n] == todo[n-1]+1 {
			n++
		}
		var floor uint64
		for _, h := range todo[:n] {
			floor = max(floor, units[h].version)
		}
		version := max(uint64(time.Now().Add(-versionMargin).UnixNano()), floor+1)
		h0, h1 := todo[0], todo[0]+int64(n)
		if err := b.writeLinkRows(ctx, h0, h1, version); err != nil {
			return done, fmt.Errorf("cannot store the link rows from %s: %w", time.UnixMilli(h0*msPerHour).UTC(), err)
		}
		if err := b.c.insertLinkUnits(ctx, h0, h1, version, 1); err != nil {
			return done, err
		}
		for h := h0; h < h1; h++ {
			units[h] = unitState{version, true}
		}
		b.c.m.linkHoursMaterialized.Add(n)
		done += n
		todo = todo[n:]
	}
	if _, err := b.materializeLinkDays(ctx, units, first, ready); err != nil {
		return done, err
	}
	return done, nil
}

// linkPlan is a link question's horizon, the clean hours before it and
// the whole days among them whose day rows merged exactly those hours.
type linkPlan struct {
	h        int64            // ms: clicks at or after it come from raw events
	start    int64            // the first clean hour (hours since the epoch)
	versions []uint64         // of the hours start, start+1, ... before h
	days     map[int64]uint64 // day (since the epoch) -> its rows' version
}

// linkPlan finds the first hour from lo (ms, a whole hour) that is not
// clean; hours before the first marker have no clicks when it is clean.
// The hour markers and the day markers are read at once. nil: no row
// helps.
func (b *Backend) linkPlan(ctx context.Context, lo, hi int64) (*linkPlan, error) {
	if b.cfg.NoRows || hi-lo > maxLinkRowHours*msPerHour {
		return nil, nil
	}
	var markers map[int64][]linkDayMarker
	var merr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		markers, merr = b.c.linkDayMarkers(ctx, floorDiv(hourOf(lo), hoursPerDay), floorDiv(hourOf(hi-1), hoursPerDay)+1)
	}()
	units, hours, err := b.c.linkUnits(ctx, hi, true)
	<-done
	if err != nil || len(hours) == 0 {
		return nil, err
	}
	h := hourOf(lo)
	if h < hours[0] {
		if !units[hours[0]].clean {
			return nil, nil
		}
		h = hours[0]
	}
	start := h
	var vs []uint64
	for end := hourOf(hi - 1); h <= end; h++ {
		st, ok := units[h]
		if !ok || !st.clean {
			break
		}
		vs = append(vs, st.version)
	}
	if h == start {
		return nil, nil
	}
	p := &linkPlan{h: h * msPerHour, start: start, versions: vs}
	if merr != nil {
		// Without the day markers the hour rows answer alone.
		b.c.m.linkDayMarkersFailed.Inc()
		slog.Warn("cannot read the link day markers; answering from hour rows", "err", merr)
		return p, nil
	}
	for d := floorDiv(hourOf(lo)+hoursPerDay-1, hoursPerDay); (d+1)*hoursPerDay <= h; d++ {
		if dvs, ok := dayHourVersions(units, hours[0], d); ok {
			if v, ok := matchingDayMarker(markers[d], dvs); ok {
				if p.days == nil {
					p.days = map[int64]uint64{}
				}
				p.days[d] = v
			}
		}
	}
	return p, nil
}
