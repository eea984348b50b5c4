package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/waymark/waymark/raft"
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
	if err := n.gossip.Leave(5 * time.Second); err != nil {
		return err
	}
	for {
		servers, err := n.raft.Servers()
		if err == nil && !containsServer(servers, n.cfg.Name) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot leave: the leader did not remove this node from Raft in time: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	n.log.Info("left the cluster")
	select {
	case n.exit <- struct{}{}:
	default:
	}
	return nil
}

func containsServer(servers []raft.Server, id string) bool {
	for _, s := range servers {
		if s.ID == id {
			return true
		}
	}
	return false
}
