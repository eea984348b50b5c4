package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// NodeListeningMsg is the message the node logs with its bound public
// address.
const NodeListeningMsg = "http listening"

// NodeConfig describes a `waymark node --dev` child.
type NodeConfig struct {
	Binary       string        // path to the waymark binary
	DataDir      string        // fresh directory, owned by the caller
	ExtraArgs    []string      // appended after the standard flags
	Env          []string      // added to the node's environment
	Echo         io.Writer     // optional copy of the node's log
	StartTimeout time.Duration // for the address, /readyz and the API key; zero means 60 s
	CPUs         string        // taskset CPU list to pin the node to, or empty
	Nice         int           // niceness to start it at (ChildConfig.Nice), or 0
	Name         string        // label of its log lines and errors; empty means "node"
}

// Node is a running single dev node.
type Node struct {
	*Child
	Binary   string
	DataDir  string
	Env      []string // added to the environment of CLI commands too
	HTTPAddr string   // bound public address, host:port
	BaseURL  string   // "http://" + HTTPAddr
	APIKey   string   // owner key the node wrote to DataDir/dev-api-key
}

// StartDevNode starts `waymark node --dev` on loopback ports chosen by the
// kernel, waits until it logs its address, answers /readyz with 200 and has
// written its API key. On error the child is already stopped.
func StartDevNode(ctx context.Context, cfg NodeConfig) (*Node, error) {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	args := []string{"node", "--dev",
		"--data-dir", cfg.DataDir,
		"--http-addr", "127.0.0.1:0",
		"--admin-addr", "127.0.0.1:0",
	}
	if cfg.Name == "" {
		cfg.Name = "node"
	}
	child, err := StartChild(ChildConfig{
		Name: cfg.Name,
		Path: cfg.Binary,
		Args: append(args, cfg.ExtraArgs...),
		Env:  cfg.Env,
		Echo: cfg.Echo,
		CPUs: cfg.CPUs,
		Nice: cfg.Nice,
		// Leave the node time to flush Pebble and close Raft cleanly.
		StopGrace: 10 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	n := &Node{Child: child, Binary: cfg.Binary, DataDir: cfg.DataDir, Env: cfg.Env}
	if err := n.waitStarted(ctx, cfg); err != nil {
		child.Stop()
		return nil, err
	}
	return n, nil
}

func (n *Node) waitStarted(ctx context.Context, cfg NodeConfig) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	// A child that dies early should fail the wait at once, not at timeout.
	ctx, cancelExit := context.WithCancelCause(ctx)
	defer cancelExit(nil)
	go func() {
		select {
		case <-n.Exited():
			cancelExit(fmt.Errorf("node exited (%v)%s", n.ExitErr(), n.tailNote()))
		case <-ctx.Done():
		}
	}()

	addr, err := n.WaitForAddr(ctx, NodeListeningMsg)
	if err != nil {
		return err
	}
	n.HTTPAddr = addr
	n.BaseURL = "http://" + addr
	if err := WaitHTTPOK(ctx, &http.Client{Timeout: 5 * time.Second}, n.BaseURL+"/readyz"); err != nil {
		return fmt.Errorf("cannot see node ready: %w", err)
	}
	key, err := WaitFileContent(ctx, filepath.Join(cfg.DataDir, "dev-api-key"))
	if err != nil {
		return fmt.Errorf("cannot get the dev API key: %w", err)
	}
	n.APIKey = key
	return nil
}

// CreateOwners makes n more owners with `waymark owners create --data-dir
// DIR NAME` and returns their API keys. The node limits writes per API key,
// so a bulk load spreads its creates over several keys.
func (n *Node) CreateOwners(ctx context.Context, prefix string, count int) ([]string, error) {
	keys := make([]string, 0, count)
	for i := range count {
		name := fmt.Sprintf("%s-%d", prefix, i)
		cmd := exec.CommandContext(ctx, n.Binary, "owners", "create", "--data-dir", n.DataDir, name)
		cmd.Env = append(os.Environ(), n.Env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("cannot create owner %s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
		}
		key := strings.TrimSpace(string(out))
		if key == "" || strings.ContainsAny(key, " \n") {
			return nil, fmt.Errorf("cannot create owner %s: want one API key on stdout, got %q", name, out)
		}
		keys = append(keys, key)
	}
	return keys, nil
}
