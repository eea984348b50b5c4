package harness

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// AggregatorNode is a `waymark node --dev` (every role) started with a
// cluster key the harness wrote, so it knows the node's ship token.
type AggregatorNode struct {
	*Node
	Token string // the internal token: segments posted with it are accepted
	// Peer calls the node as another node would (mutual TLS), at PeerURL:
	// what a SegmentShipper needs.
	Peer    *http.Client
	PeerURL string
	Admin   *AdminClient // the operator API
	API     *APIClient   // the public API as the dev owner
}

// StartAggregatorNode writes a cluster key next to cfg.DataDir (as
// DataDir + ".cluster-key"), starts the node with it (and with
// NodeWriteRateArgs, so one key creates sites and links quickly) and
// waits until it is ready. On error nothing is left running.
func StartAggregatorNode(ctx context.Context, cfg NodeConfig) (*AggregatorNode, error) {
	keyFile := cfg.DataDir + ".cluster-key"
	token, err := WriteClusterKey(ctx, cfg.Binary, keyFile)
	if err != nil {
		return nil, err
	}
	cfg.ExtraArgs = append(append([]string{"--cluster-key-file", keyFile}, NodeWriteRateArgs...), cfg.ExtraArgs...)
	n, err := StartDevNode(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot start the node: %w", err)
	}
	admin, err := NewDevAdminClient(cfg.DataDir)
	if err != nil {
		n.Stop()
		return nil, err
	}
	peer, err := PeerClient(cfg.DataDir, 10*time.Minute)
	if err != nil {
		n.Stop()
		return nil, err
	}
	return &AggregatorNode{Node: n, Token: token, Peer: peer, PeerURL: PeerURL(n.BaseURL), Admin: admin, API: NewAPIClient(n.BaseURL, n.APIKey)}, nil
}
