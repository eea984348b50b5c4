package plausible

import (
	"errors"
	"fmt"
	"time"
)

// Scan window. Plausible counts a visit in a range when it was active in
// it (start <= last, last event >= first) and started at most 7 days before
// first (stats/sql/where_builder.ex). Rebuilding such a visit exactly needs
// its events from its start to its end, which can lie outside the range.
//
// Evaluate first scans the range widened by initialMargin on both sides,
// then widens further, doubling, only while some visitor's run of events
// (pauses of at most 30 minutes) touches both the range and a scan edge,
// reading in those extra scans only the events of such visitors:
//   - backwards until no run reaching the range starts within 30 minutes
//     of the scan start, or the scan starts 7 days and 30 minutes before
//     the range: a visit still running then started more than 7 days
//     before the range, which Plausible leaves out (it is marked
//     truncated and left out of visit metrics; its events still count);
//   - forwards until no such run ends within 30 minutes of the scan end,
//     or the scan ends 30 minutes after Query.Now.
const (
	initialMargin = time.Hour
	backLimit     = 7*24*time.Hour + sessionGap*time.Second
)

// scan loads the events of q's window into a grouped, sessionized dataset.
func scan(q *Query, src EventSource, cfg Config) (*dataset, error) {
	d := newDataset()
	first, last := q.From.Unix(), q.To.Unix()-1
	fromMs := (first - int64(initialMargin/time.Second)) * 1000
	toMs := (last + 1 + int64(initialMargin/time.Second)) * 1000
	limitBack := (first - int64(backLimit/time.Second)) * 1000
	limitFwd := (q.Now.Unix() + sessionGap) * 1000
	if fromMs < limitBack {
		fromMs = limitBack
	}
	read := func(from, to int64) error {
		if from >= to {
			return nil
		}
		err := src.ScanSite(q.site.ID, from, to, func(e *Event) error {
			if d.seen >= cfg.MaxEvents {
				return &ScanLimitError{Limit: cfg.MaxEvents}
			}
			d.add(e)
			return nil
		})
		var limit *ScanLimitError
		switch {
		case errors.As(err, &limit):
			return limit // its message is the answer's
		case err != nil:
			return fmt.Errorf("cannot scan events of site %q: %w", q.site.ID, err)
		}
		return nil
	}
	if err := read(fromMs, toMs); err != nil {
		return nil, err
	}
	margin := int64(initialMargin / time.Millisecond)
	for {
		d.group()
		back, fwd := d.edgeRuns(first, last, fromMs, toMs)
		if fromMs <= limitBack {
			back = nil
		}
		if toMs >= limitFwd {
			fwd = nil
		}
		if len(back) == 0 && len(fwd) == 0 {
			break
		}
		margin *= 2
		if len(back) > 0 {
			newFrom := max(fromMs-margin, limitBack)
			d.keep = back
			if err := read(newFrom, fromMs); err != nil {
				return nil, err
			}
			fromMs = newFrom
		}
		if len(fwd) > 0 {
			newTo := min(toMs+margin, max(limitFwd, toMs))
			d.keep = fwd
			if err := read(toMs, newTo); err != nil {
				return nil, err
			}
			toMs = newTo
		}
		d.keep = nil
	}
	d.sessionize()
	d.markTruncated(fromMs)
	return d, nil
}

// edgeRuns finds the visitors whose run of events touching [first, last]
// (seconds) may continue past the scanned window [fromMs, toMs).
func (d *dataset) edgeRuns(first, last, fromMs, toMs int64) (back, fwd map[uint64]bool) {
	fromSec, toSec := floorDiv(fromMs, 1000), floorDiv(toMs, 1000)
	for vi := range d.visitors {
		v := &d.visitors[vi]
		if v.rowStart == v.rowEnd {
			continue
		}
		rows := d.rows[v.rowStart:v.rowEnd]
		// The first run: does it start near the window start and reach
		// the range?
		if rows[0].sec() < fromSec+sessionGap {
			reaches := false
			prev := rows[0].sec()
			for i := range rows {
				s := rows[i].sec()
				if s-prev > sessionGap {
					break
				}
				prev = s
				if s >= first {
					reaches = true
					break
				}
			}
			if reaches {
				if back == nil {
					back = map[uint64]bool{}
				}
				back[v.hash] = true
			}
		}
		// The last run: does it end near the window end, having started
		// no later than the range end?
		if rows[len(rows)-1].sec() >= toSec-sessionGap {
			start := rows[len(rows)-1].sec()
			for i := len(rows) - 2; i >= 0; i-- {
				s := rows[i].sec()
				if start-s > sessionGap {
					break
				}
				start = s
			}
			if start <= last {
				if fwd == nil {
					fwd = map[uint64]bool{}
				}
				fwd[v.hash] = true
			}
		}
	}
	return back, fwd
}

// markTruncated flags a visitor's first visit when the run of events
// leading to it reaches back to within 30 minutes of the window start: it
// may have begun earlier.
func (d *dataset) markTruncated(fromMs int64) {
	fromSec := floorDiv(fromMs, 1000)
	for vi := range d.visitors {
		v := &d.visitors[vi]
		if v.sessStart == v.sessEnd || d.rows[v.rowStart].sec() >= fromSec+sessionGap {
			continue
		}
		s := &d.sessions[v.sessStart]
		prev := d.rows[v.rowStart].sec()
		connected := true
		for ri := v.rowStart; ri < s.rowStart; ri++ {
			sec := d.rows[ri].sec()
			if sec-prev > sessionGap {
				connected = false
				break
			}
			prev = sec
		}
		if connected && d.rows[s.rowStart].sec()-prev <= sessionGap {
			s.truncated = true
		}
	}
}
