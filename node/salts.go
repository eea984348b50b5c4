package node

import (
	"context"
	"path/filepath"
	"time"

	"github.com/waymark/waymark/ingest"
)

// SaltFile holds today's and yesterday's visitor-hash salts (mode 0600).
const SaltFile = "visitor-salts"

// saltWait bounds how long a node that has peers but no salt for today
// (a restart with the salt file lost, a new node mid-day) waits for the
// cluster's salt before hashing its first event. Events wait in the queue
// meanwhile; redirects do not wait at all.
const saltWait = 10 * time.Second

// openSalts loads the salt file and, when the node has peers to learn
// today's salt from and no salt of its own for today, holds event hashing
// until gossip brings the cluster's (or saltWait runs out: then it makes a
// fresh salt, which the cluster's older one replaces at the next gossip
// exchange; visitors hashed in between count as new ones).
func (n *Node) openSalts() error {
	var err error
	n.salts, err = ingest.OpenLocalSalts(ingest.SaltOptions{
		Path:   filepath.Join(n.cfg.DataDir, SaltFile),
		Now:    time.Now,
		Logger: n.log.With("component", "salts"),
	})
	if err != nil {
		return err
	}
	if len(n.cfg.Join) > 0 && n.salts.HoldForPeers(saltWait) {
		n.log.Info("no salt for today on disk; waiting for the cluster's before hashing events", "max_wait", saltWait)
	}
	return nil
}

// pruneSaltsAtMidnight drops the salt that just turned older than
// yesterday at each UTC midnight, so an idle node does not keep it on
// disk until its next event.
func (n *Node) pruneSaltsAtMidnight(ctx context.Context) {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		for {
			now := time.Now().UTC()
			next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
			t := time.NewTimer(next.Sub(now))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
				n.salts.Prune()
			}
		}
	}()
}
