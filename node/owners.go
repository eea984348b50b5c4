package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/waymark/waymark/store"
)

// apiKeyPrefix makes Waymark keys recognisable to secret scanners.
const apiKeyPrefix = "wm_"

// CreateOwner registers an owner through the Raft log and returns its API
// key. Only the key's hash is stored; the key is shown once.
func (n *Node) CreateOwner(ctx context.Context, name string) (store.Owner, string, error) {
	if name == "" || len(name) > 200 {
		return store.Owner{}, "", fmt.Errorf("cannot create owner: name must be 1 to 200 bytes")
	}
	o := store.Owner{ID: randomHex(8), Name: name, CreatedAt: time.Now().UnixMilli()}
	key := apiKeyPrefix + randomHex(24)
	if _, err := n.raft.CreateOwner(ctx, &o, store.HashAPIKey([]byte(key))); err != nil {
		return store.Owner{}, "", fmt.Errorf("cannot create owner %q: %w", name, err)
	}
	return o, key, nil
}

// devSetup makes a --dev node usable at once: it waits for the single-node
// cluster to be ready and writes an owner API key to DATA_DIR/dev-api-key.
func (n *Node) devSetup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := n.raft.WaitReady(ctx); err != nil {
		return fmt.Errorf("cannot bring up the dev cluster: %w", err)
	}
	if err := n.claimDevRegion(ctx); err != nil {
		return err
	}
	path := filepath.Join(n.cfg.DataDir, DevAPIKeyFile)
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
		n.log.Info("dev API key", "path", path)
		return nil
	}
	_, key, err := n.CreateOwner(ctx, "dev")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, []byte(key+"\n"), 0o600); err != nil {
		return err
	}
	n.log.Info("created dev owner", "api_key", key, "path", path)
	fmt.Fprintf(os.Stderr, "\n  Dev API key: %s\n  (saved in %s)\n\n", key, path)
	return nil
}
