package node

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Leave takes this node out of the cluster gracefully: hand over leadership
// if it has it, announce the departure through gossip so the leader removes
// it from Raft, wait for that, and then ask the process to stop.
func (n *Node) Leave(ctx context.Context) error {
	servers, err := n.raft.Servers()
	if err != nil {
		return fmt.Errorf("cannot leave: %w", err)
	}
	voters := 0
	for _, s := range servers {
		if s.Voter {
			voters++
		}
	}
	if n.raft.IsLeader() {
		if voters <= 1 {
			return errors.New("cannot leave: this node is the only voter; stop it instead")
		}
		if err := n.raft.TransferLeadership(""); err != nil {
			return fmt.Errorf("cannot leave: cannot hand over leadership: %w", err)
		}
		n.log.Info("handed over leadership before leaving")
	}
	// Announce the departure first, so the leader's reconciler cannot
	// re-add this node between its removal and its silence.
	if err := n.gossip.Leave(5 * time.Second); err != nil {
		return err
	}
	// Then ask the leader directly rather than trusting the announcement
	// to reach it: gossip is a hint, Raft is the authority.
	for {
		err := n.changeMembership(ctx, MembershipRequest{Op: "remove-peer", ID: n.cfg.Name})
		if err == nil || errors.Is(err, errUnknownPeer) {
			break
		}
		n.log.Warn("leave: leader has not removed this node yet", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot leave: the leader did not remove this node from Raft in time: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	n.log.Info("left the cluster")
	select {
	case n.exit <- struct{}{}:
	default:
	}
	return nil
}
