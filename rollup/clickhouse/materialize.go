package clickhouse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/waymark/waymark/rollup/query"
)

// Materializing closed hours into site rows (siterows.go; DESIGN.md,
// "Site rows"). A unit (site, UTC hour U) is ready when now >= U + 1 h +
// the visit gap + Lateness and every visit that started in it has been
// idle for the gap + Lateness: no event arriving in time can change it
// any more. A later one (a late segment) marks the units it may change
// dirty (markLate), and the loop materializes them again. Any aggregator
// may materialize any unit: the work is idempotent, and the highest
// version wins.

// DefaultLateness is how long after a visit gap the rows of an hour wait
// for late segments (BackendConfig.Lateness).
const DefaultLateness = 5 * time.Minute

// versionMargin is taken off the clock a run's version comes from (when
// its pass read the markers), so that a dirty mark written after that
// read by another aggregator whose clock is behind by up to half of it
// still wins.
const versionMargin = 10 * time.Second

// maxRunHours is how many units one load reads at most: a run stays in
// one UTC day, read from its midnight.
const maxRunHours = 24

// unitClean is the state of a clean site unit (0: dirty). Its rows are
// the visits that closed in it (migration 6; 1 was the state of rows
// keyed by the hour a visit started).
const unitClean = 2

// unitState is a unit's marker.
type unitState struct {
	version uint64
	clean   bool
}

// siteStarts lists every site with site events and the hour of its
// oldest.
func (c *Client) siteStarts(ctx context.Context) (map[string]int64, error) {
	res, err := c.Query(ctx, "SELECT site, toUInt32(min(time)) FROM events WHERE site != '' AND code = '' AND "+kindSite+" GROUP BY site")
	if err != nil {
		return nil, fmt.Errorf("cannot list sites: %w", err)
	}
	out := make(map[string]int64, len(res.Data))
	for _, raw := range res.Data {
		row := rawRow(raw)
		s, err1 := row[0].str()
		sec, err2 := row[1].int()
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("cannot list sites: %w", err)
		}
		out[s] = sec / 3600
	}
	return out, nil
}

// readyBefore is the first hour (since the epoch) that is not ready yet.
func (b *Backend) readyBefore() int64 {
	return hourOf(b.cfg.Now().Add(-b.cfg.Lateness).UnixMilli() - visitGapMS)
}

// MaterializeOnce materializes every ready unit of every site that is
// not clean, oldest first, and every ready link hour (linkrows.go), and
// returns how many units and hours it wrote.
func (b *Backend) MaterializeOnce(ctx context.Context) (int, error) {
	return b.materialize(ctx, 0, 0, false)
}

// Rematerialize materializes again every ready unit of every site, and
// every ready link hour, in the hours [from, to), clean or not (waymark
// rollup rebuild), and returns how many it wrote.
func (b *Backend) Rematerialize(ctx context.Context, from, to time.Time) (buckets int, err error) {
	return b.materialize(ctx, hourOf(from.UnixMilli()), hourOf(to.UnixMilli()+msPerHour-1), true)
}

// MaterializeLoop runs MaterializeOnce every interval until ctx ends
// (the node starts it beside RetentionLoop); errors go to onErr.
func (b *Backend) MaterializeLoop(ctx context.Context, interval time.Duration, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := b.MaterializeOnce(ctx); err != nil && onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (b *Backend) materialize(ctx context.Context, from, to int64, force bool) (int, error) {
	if err := b.enter(); err != nil {
		return 0, err
	}
	defer b.leave()
	starts, err := b.c.siteStarts(ctx)
	if err != nil {
		b.c.m.materializeFailed.Inc()
		return 0, err
	}
	sites := make([]string, 0, len(starts))
	for s := range starts {
		sites = append(sites, s)
	}
	slices.Sort(sites)
	// From each site's oldest held event, not from the retention cut: a
	// question treats the hours before a site's first clean unit as
	// empty, and a day partly past the cut is held until it all is.
	ready := b.readyBefore()
	done, due := 0, 0
	var errs []error
	for _, site := range sites {
		n, todo, err := b.materializeSite(ctx, site, starts[site], ready, from, to, force)
		if err == nil {
			_, err = b.writeSiteDays(ctx, site) // sitedays.go
		}
		done += n
		due += todo - n
		if err != nil {
			b.c.m.materializeFailed.Inc()
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	if ctx.Err() == nil {
		n, err := b.materializeLinks(ctx, from, to, force)
		done += n
		if err != nil {
			b.c.m.materializeFailed.Inc()
			errs = append(errs, err)
		}
	}
	if !force && ctx.Err() == nil {
		// The materializer's queue: ready site units this pass found and
		// left (a visit still open, or an error); 0 once it caught up.
		b.c.m.unitsPending.Store(int64(due))
		b.c.m.passes.Inc()
	}
	return done, errors.Join(errs...)
}

// materializeSite materializes the site's units in [first, ready) that
// are not clean (with force, every one in [from, to)), in runs of
// consecutive hours.
func (b *Backend) materializeSite(ctx context.Context, site string, first, ready, from, to int64, force bool) (done, due int, err error) {
	// Every run of this pass takes its version from before the markers
	// are read, not from its own start: a run starts from the visits the
	// run before it carried over midnight, and those may be stale by a
	// late event marked since (its hour and every unit after it); the
	// mark must then beat this pass's clean markers, so the next pass
	// writes those units again from the new carried state. A version
	// from a run's own start beat every mark older than the margin: in a
	// 30-day backfill the first pass's later days stayed clean from
	// carried visits without the events that arrived during it (the
	// querybench site at -scale 0.5 lost 10,186 pageviews of its first
	// day). TestLateEventDuringAPassIsNotLost.
	read := time.Now()
	units, hours, err := b.c.siteUnitsToReady(ctx, site, ready*msPerHour)
	if err != nil {
		return 0, 0, err
	}
	siteFirst := first
	if len(hours) > 0 && hours[0] < first {
		first = hours[0] // dirty marks before the oldest event: cleaned, empty
	}
	var todo []int64
	for h := first; h < ready; h++ {
		st, ok := units[h]
		switch {
		case force:
			if h >= from && h < to {
				todo = append(todo, h)
			}
		case !ok || !st.clean:
			todo = append(todo, h)
		}
	}
	due = len(todo)
	if !force && settling(units, todo, time.Now(), b.cfg.MarkSettle) {
		b.c.m.settleWaits.Inc()
		return 0, due, nil
	}
	for len(todo) > 0 {
		n := 1
		for n < len(todo) && n < maxRunHours && todo[n] == todo[n-1]+1 && todo[n]%24 != 0 {
			n++
		}
		// The run's version beats the dirty marks it saw before loading:
		// the events that made them were stored before they were written.
		var floor uint64
		for _, h := range todo[:n] {
			floor = max(floor, units[h].version)
		}
		// The visits open at the run's midnight: written by the run of the
		// hour before it (this pass's, if it was not clean), or none
		// before the site's first event.
		day := floorDiv(todo[0], 24) * 24
		var seedVersion uint64
		if day > siteFirst {
			st := units[day-1]
			if !st.clean {
				return done, due, fmt.Errorf("cannot materialize site %q from %s: %w", site, time.UnixMilli(todo[0]*msPerHour).UTC(), errStateMissing)
			}
			seedVersion = st.version
		}
		version, err := b.materializeRun(ctx, site, todo[0], todo[0]+int64(n), max(uint64(read.Add(-b.versionMargin).UnixNano()), floor+1), seedVersion)
		if err != nil {
			return done, due, err
		}
		if b.afterRun != nil {
			b.afterRun(site, todo[0], todo[0]+int64(n))
		}
		done += n
		for _, h := range todo[:n] {
			units[h] = unitState{version, true}
		}
		todo = todo[n:]
	}
	return done, due, nil
}

// materializeRun writes the units [u0, u1) of site under version, all in
// one UTC day: the visits that closed in each, read from the day's
// midnight with the visits carried into it (seedVersion's, carried.go),
// and, when u1 is a midnight, the visits still open there. It returns
// the version.
func (b *Backend) materializeRun(ctx context.Context, site string, u0, u1 int64, version, seedVersion uint64) (uint64, error) {
	day := floorDiv(u0, 24) * 24
	fail := func(err error) (uint64, error) {
		return 0, fmt.Errorf("cannot materialize site %q from %s: %w", site, time.UnixMilli(u0*msPerHour).UTC(), err)
	}
	seed, err := b.c.loadCarried(ctx, site, day, seedVersion)
	if err != nil {
		return fail(err)
	}
	evs, err := b.c.loadSiteEvents(ctx, site, day*msPerHour, u1*msPerHour, b.cfg.MaxEvents, allCols)
	if errors.Is(err, errTooManyEvents) {
		err = fmt.Errorf("%w: %v", query.ErrUnsupportedQuery, err)
	}
	if err != nil {
		return fail(err)
	}
	d := sessionizeFrom(seed, evs)
	byVisit := d.eventsByVisit()
	rows := make([]unitRows, u1-u0)
	for vi := range d.visits {
		// A visit closes in the hour an event could last join it: every
		// event of it is before the run's end, and nothing later changes it.
		u := hourOf(d.visits[vi].alive + visitGapMS)
		if u < u0 || u >= u1 {
			continue
		}
		if rows[u-u0] == nil {
			rows[u-u0] = make(unitRows)
		}
		d.addVisit(rows[u-u0], int32(vi), byVisit[vi])
	}
	bots, err := b.botsByHour(ctx, site, u0, u1)
	if err != nil {
		return 0, err
	}
	for h, n := range bots {
		if rows[h-u0] == nil {
			rows[h-u0] = make(unitRows)
		}
		rows[h-u0].get(rowKey{"", "", h, h}).c[cBots] += n
	}
	var body []byte
	for i, u := range rows {
		for k, r := range u {
			if body, err = appendSiteRow(body, site, u0+int64(i), version, k, r); err != nil {
				return fail(err)
			}
		}
	}
	if len(body) > 0 {
		if err := b.c.Insert(ctx, "INSERT INTO site_rows FORMAT RowBinary", bytes.NewReader(body), nil); err != nil {
			return 0, fmt.Errorf("cannot store the rows of site %q: %w", site, err)
		}
	}
	if u1%24 == 0 {
		open := d.openAt(u1 * msPerHour)
		if len(open) > 0 {
			body := appendCarriedRows(nil, site, u1, version, open)
			if err := b.c.Insert(ctx, "INSERT INTO site_open_visits FORMAT RowBinary", bytes.NewReader(body), nil); err != nil {
				return 0, fmt.Errorf("cannot store the open visits of site %q: %w", site, err)
			}
		}
		b.c.m.visitsCarried.Add(len(open))
	}
	// Markers follow rows and carried visits: a run cut short is never read.
	if err := b.c.insertUnits(ctx, site, u0, u1, version, unitClean); err != nil {
		return 0, err
	}
	b.c.m.unitsMaterialized.Add(int(u1 - u0))
	return version, nil
}

// botsByHour counts the site's bot events per hour in [h0, h1).
func (b *Backend) botsByHour(ctx context.Context, site string, h0, h1 int64) (map[int64]int64, error) {
	res, err := b.c.Query(ctx, "SELECT intDiv(toUInt32(time), 3600) AS h, count() FROM events FINAL WHERE site = "+String(site)+
		" AND code = '' AND "+kindSite+" AND "+isBot+" AND "+timeIn(h0*msPerHour, h1*msPerHour)+" GROUP BY h")
	if err != nil {
		return nil, fmt.Errorf("cannot count bot events: %w", err)
	}
	out := make(map[int64]int64, len(res.Data))
	for _, raw := range res.Data {
		row := rawRow(raw)
		h, err1 := row[0].int()
		n, err2 := row[1].int()
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("cannot count bot events: %w", err)
		}
		out[h] = n
	}
	return out, nil
}

// insertUnits writes the markers of the site's units [h0, h1).
func (c *Client) insertUnits(ctx context.Context, site string, h0, h1 int64, version uint64, state uint8) error {
	if h1 <= h0 {
		return nil
	}
	var sb strings.Builder
	sb.WriteString("INSERT INTO site_units (site, unit, version, state) VALUES ")
	for h := h0; h < h1; h++ {
		if h > h0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "(%s, toDateTime(%d), %d, %d)", String(site), h*3600, version, state)
	}
	if err := c.Exec(ctx, sb.String()); err != nil {
		return fmt.Errorf("cannot mark the units of site %q: %w", site, err)
	}
	return nil
}

// lateSpan is the oldest and newest late event of one site in a segment
// (ms).
type lateSpan struct{ first, last int64 }
