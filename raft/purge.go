package raft

import (
	"context"
	"time"
)

// DefaultPurgeAfter is how long a deleted link keeps its destination: 30
// days, then the leader purges it (the code stays reserved for ever).
const DefaultPurgeAfter = 720 * time.Hour

// One sweep scans at most purgeScansPerSweep pages of purgeScanPage links
// (128 Ki links), so a leader with a huge table spreads the scan over
// many sweeps, each a short read of its own replica.
const (
	purgeScanPage      = 16384
	purgeScansPerSweep = 8
)

// sweepDeletedLinks runs on the leader while it leads: every
// Config.PurgeSweep it scans the next pages of its link table for links
// deleted more than Config.PurgeAfter ago and appends purge entries that
// name them, at most maxPurgePerEntry codes each. The cutoff travels in
// the entry and every replica checks each code against it, so all of them
// purge the same links whatever their own clocks say. The scan goes on
// where it stopped, and starts over at the end of the table.
func (n *Node) sweepDeletedLinks() {
	defer n.purging.Store(false)
	cursor := ""
	for n.ctx.Err() == nil && n.IsLeader() {
		cursor = n.purgeOnce(cursor)
		select {
		case <-n.ctx.Done():
		case <-time.After(n.cfg.PurgeSweep):
		}
	}
}

// purgeOnce is one sweep from cursor; it returns where the next one
// starts.
func (n *Node) purgeOnce(cursor string) string {
	now := time.Now()
	cutoff := now.Add(-n.cfg.PurgeAfter).UnixMilli()
	for range purgeScansPerSweep {
		if !n.IsLeader() {
			return cursor
		}
		due, next, err := n.st.DeletedLinksDue(cursor, cutoff, purgeScanPage, maxPurgePerEntry)
		if err != nil {
			n.log.Warn("cannot look for deleted links to purge; retrying at the next sweep", "err", err)
			return cursor
		}
		if len(due) > 0 {
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
			_, err = n.applyLocal(ctx, appendPurgeDeletedLinks(nil, cutoff, now.UnixMilli(), due))
			cancel()
			if err != nil {
				n.log.Warn("cannot purge deleted links; retrying at the next sweep", "links", len(due), "err", err)
				return cursor
			}
			n.m.purgeEntries.Inc()
		}
		cursor = next
		if cursor == "" {
			return "" // end of the table: the next sweep starts over
		}
	}
	return cursor
}
