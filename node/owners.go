package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/waymark/waymark/store"
)

// apiKeyPrefix makes Waymark keys recognisable to secret scanners.
const apiKeyPrefix = "wm_"

// maxOwnerName bounds an owner's display name, in bytes.
const maxOwnerName = 200

// errInvalidOwnerName is a name refused before anything is written.
var errInvalidOwnerName = errors.New("invalid owner name")

// checkOwnerName accepts 1 to maxOwnerName bytes of UTF-8 text without
// control characters; surrounding space is not part of a name.
func checkOwnerName(name string) error {
	switch {
	case name == "" || len(name) > maxOwnerName:
		return fmt.Errorf("%w: must be 1 to %d bytes after trimming spaces, got %d", errInvalidOwnerName, maxOwnerName, len(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: must be UTF-8 text", errInvalidOwnerName)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: must not contain control characters", errInvalidOwnerName)
	}
	return nil
}

// CreateOwner registers an owner through the Raft log and returns its API
// key. Only the key's hash is stored; the key is shown once.
func (n *Node) CreateOwner(ctx context.Context, name string) (store.Owner, string, error) {
	name = strings.TrimSpace(name)
	if err := checkOwnerName(name); err != nil {
		return store.Owner{}, "", fmt.Errorf("cannot create owner: %w", err)
	}
	if err := n.disk.writable(); err != nil {
		return store.Owner{}, "", fmt.Errorf("cannot create owner: %w", err)
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
