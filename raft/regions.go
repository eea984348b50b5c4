package raft

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/waymark/waymark/store"
)

// Region slots are claimed explicitly, through the log: by an operator
// (`waymark regions add NAME`, ClaimRegion), and by the voters that form a
// cluster, each for its own region (Config.Bootstrap, BootstrapCluster on
// a node without raft state). A node of any other region generates no
// codes until its region is claimed: a typo in --region must not take one
// of the 64 slots for good.

// ClaimRegion gives region a slot of the ID space, through the log, and
// returns it; claimed is false when the region had one already (then
// nothing is written).
func (n *Node) ClaimRegion(ctx context.Context, region string) (slot int, claimed bool, err error) {
	if err := store.CheckRegionName(region); err != nil {
		return 0, false, fmt.Errorf("cannot claim region: %w", err)
	}
	if slot, found, err := n.st.RegionSlot(region); err != nil || found {
		return slot, false, err
	}
	res, err := n.apply(ctx, appendClaimRegion(nil, region))
	if err != nil {
		return 0, false, fmt.Errorf("cannot claim region %q: %w", region, err)
	}
	// A forwarded claim is applied here already; a local one too.
	n.waitApplied(ctx, res.Index)
	slot, found, err := n.st.RegionSlot(region)
	if err != nil {
		return 0, false, err
	}
	if !found {
		return 0, false, fmt.Errorf("cannot read the slot of region %q: the claim at index %d is not applied here yet", region, res.Index)
	}
	return slot, true, nil
}

// RegionClaimed reports whether this node's own region has a slot, as far
// as its replica has applied.
func (n *Node) RegionClaimed() (bool, error) {
	_, found, err := n.st.RegionSlot(n.cfg.Region)
	return found, err
}

// claimOwnRegionInBackground claims this node's region once the node can
// write; Ready reports false until it has. Called only when this node is
// forming the cluster.
func (n *Node) claimOwnRegionInBackground() {
	if !n.claimingRegion.CompareAndSwap(false, true) {
		return
	}
	if !n.goSafe(n.claimOwnRegion) {
		n.claimingRegion.Store(false)
	}
}

func (n *Node) claimOwnRegion() {
	defer n.claimingRegion.Store(false)
	warned := false
	for n.ctx.Err() == nil {
		if found, err := n.RegionClaimed(); err == nil && found {
			return
		}
		if _, err := n.Permuter(); err == nil { // a leader is known and the cluster is formed
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
			_, claimed, err := n.ClaimRegion(ctx, n.cfg.Region)
			cancel()
			switch {
			case err == nil:
				if claimed {
					n.log.Info("claimed this node's region for the new cluster", "region", n.cfg.Region)
				}
				return
			case errors.Is(err, store.ErrRegionSpaceFull):
				n.log.Error("cannot claim this node's region: every region slot is taken", "region", n.cfg.Region, "err", err)
				return
			case !warned && !errors.Is(err, store.ErrNoLeader):
				n.log.Warn("cannot claim this node's region yet; retrying", "region", n.cfg.Region, "err", err)
				warned = true
			}
		}
		select {
		case <-n.ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
