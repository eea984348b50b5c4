package raft

import (
	"context"
	"time"

	"github.com/waymark/waymark/store"
)

// DefaultIdempotencySweep is how often the leader expires idempotency
// records older than store.IdempotencyTTL.
const DefaultIdempotencySweep = time.Hour

// maxExpireEntriesPerSweep bounds one sweep (about 4 M records); the next
// sweep goes on where it stopped.
const maxExpireEntriesPerSweep = 1024

// sweepIdempotency runs on the leader while it leads: at once, then every
// Config.IdempotencySweep, it appends expiry entries whose cutoff is its
// own clock minus the TTL, until its store holds no record that old. The
// cutoff travels in the entry, so every replica deletes the same records
// whatever its own clock says.
func (n *Node) sweepIdempotency() {
	defer n.sweeping.Store(false)
	for n.ctx.Err() == nil && n.IsLeader() {
		n.expireIdempotencyOnce()
		select {
		case <-n.ctx.Done():
		case <-time.After(n.cfg.IdempotencySweep):
		}
	}
}

func (n *Node) expireIdempotencyOnce() {
	cutoff := time.Now().UnixMilli() - store.IdempotencyTTL
	for i := 0; i < maxExpireEntriesPerSweep && n.IsLeader(); i++ {
		due, err := n.st.IdempotencyExpiring(cutoff)
		if err != nil {
			n.log.Warn("cannot look for expired idempotency records", "err", err)
			return
		}
		if !due {
			return
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
		_, err = n.applyLocal(ctx, appendExpireIdempotency(nil, cutoff, maxExpirePerEntry))
		cancel()
		if err != nil {
			n.log.Warn("cannot expire idempotency records; retrying at the next sweep", "err", err)
			return
		}
		n.m.idempotencyExpiries.Inc()
	}
}
