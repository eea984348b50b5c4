package clickhouse

import "time"

// Waiting for a backfill's marks to settle. During a backfill every
// shipped batch is late and marks its sites' units dirty from its oldest
// event on, so a unit written between two batches is dirtied again by the
// next: in aggbench's 30-day load the materializer wrote about 200,000
// site rows that way, both aggregators alike, on ClickHouse's CPU while
// it was taking the events. With BackendConfig.MarkSettle, a site (or the
// link hours) whose newest mark is younger than it is left for a later
// pass, unless its oldest waiting mark is older than maxSettleWaits of
// it: a steady trickle of late events delays its rows by that much at
// most. Questions meanwhile read the dirty hours' raw events, as for any
// unit not written yet.

// DefaultMarkSettle is the settle time a node gives its Backend.
const DefaultMarkSettle = 20 * time.Second

// maxSettleWaits bounds the wait: marks older than this many settle
// times are written however new the newest is.
const maxSettleWaits = 6

// settling reports whether the dirty units among todo are still being
// marked: the newest mark (a dirty unit's version is at least its mark's,
// the mark's clock in ns) is younger than settle and the oldest younger
// than maxSettleWaits settle times. Units never written (version 0) do
// not wait.
func settling(units map[int64]unitState, todo []int64, now time.Time, settle time.Duration) bool {
	if settle <= 0 {
		return false
	}
	var newest, oldest uint64
	for _, h := range todo {
		st := units[h]
		if st.clean || st.version == 0 {
			continue
		}
		newest = max(newest, st.version)
		if oldest == 0 || st.version < oldest {
			oldest = st.version
		}
	}
	if newest == 0 {
		return false
	}
	ns := uint64(now.UnixNano())
	return ns < newest+uint64(settle) && ns < oldest+maxSettleWaits*uint64(settle)
}
