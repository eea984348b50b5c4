package raft

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/waymark/waymark/store"
)

// Defaults for Config. DESIGN.md explains the snapshot and log numbers.
const (
	DefaultApplyTimeout      = 5 * time.Second
	DefaultBlockSize         = 4096
	DefaultSnapshotInterval  = 5 * time.Minute
	DefaultSnapshotThreshold = 65536
	DefaultTrailingLogs      = 262144
	DefaultSnapshotRetain    = 2
)

// Config is everything Open needs besides the store.
type Config struct {
	NodeID        string // raft server ID
	Region        string // region name; owns a slot of the ID space
	Dir           string // raft.db (log and stable store) and snapshots/
	BindAddr      string // TCP transport; may be "127.0.0.1:0"
	AdvertiseAddr string // optional; defaults to the bound address
	// TLS, when set, carries the transport over TLS with this config on
	// both sides: it must hold this node's certificate, the cluster CA as
	// ClientCAs and RootCAs, ClientAuth RequireAndVerifyClientCert and the
	// ServerName peers' certificates carry. Nil is plain TCP (tests).
	TLS *tls.Config
	// TLSInbound, when set, also checks the verified certificate of every
	// peer that connects to this node (not of those it dials): the node
	// admits only voters.
	TLSInbound func(leaf *x509.Certificate) error
	// Bootstrap makes this node a single-voter cluster when Dir holds no
	// raft state yet.
	Bootstrap bool
	// Secret is the permutation key (store.KeySize bytes) the first leader
	// applies; nil means 16 random bytes. The first applied key wins.
	Secret []byte

	ApplyTimeout time.Duration // deadline for every apply; default 5s
	BlockSize    uint64        // IDs per counter block; default 4096
	// IdempotencySweep is how often the leader expires idempotency
	// records past their TTL; default DefaultIdempotencySweep.
	IdempotencySweep time.Duration

	SnapshotInterval  time.Duration // how often raft checks whether to snapshot; default 5m
	SnapshotThreshold uint64        // new entries that trigger a snapshot; default 65536
	TrailingLogs      uint64        // entries kept behind a snapshot; default 262144
	SnapshotRetain    int           // snapshot files kept; default 2

	// HeartbeatTimeout and ElectionTimeout tune failure detection. Zero
	// keeps raft's defaults (1s); tests use less so a node elects itself
	// quickly.
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration

	// LogGuard, when set, is asked before a follower stores new log
	// entries; an error (the disk is nearly full) refuses them, and the
	// leader retries later (logguard.go).
	LogGuard func() error

	Logger  *slog.Logger // nil means slog.Default()
	Metrics *metrics.Set // nil means a private set

	// OnChange is called with every link code a batch created or edited,
	// after the batch is committed and before the writes are acknowledged.
	// It runs on raft's FSM goroutine and must be quick.
	OnChange func(code string)
	// OnChanging is called with the same codes before the batch commits:
	// a synced commit is visible to readers before its fsync returns, so
	// caches must stop serving and filling those codes from then until
	// OnChange (called whether or not the commit succeeded).
	OnChanging func(code string)
	// OnSite is called for every site a batch created or edited (settings,
	// goals), like OnChange; an edited site comes with its new record.
	OnSite func(store.Site)
	// OnOwnerSuspended is called with every owner a batch suspended
	// (before the batch commits, like OnChanging) or unsuspended (after
	// it committed), so the node's in-memory set of suspended owners is
	// right before the write is acknowledged. It runs on raft's FSM
	// goroutine and must be quick. A restore reloads the set (OnRestore).
	OnOwnerSuspended func(owner string, suspended bool)
	// OnKeyRevoked is called with the hash of every API key a batch
	// revoked, before the batch commits and again after, so a cache of
	// keys can neither serve it nor refill it from a read racing the
	// commit. It runs on raft's FSM goroutine and must be quick.
	OnKeyRevoked func(store.KeyHash)
	// OnRestore is called after the whole store was replaced by a
	// snapshot: every cached link or site may be stale.
	OnRestore func()

	// PurgeAfter is how long a deleted link keeps its destination before
	// the leader purges it through the log; default DefaultPurgeAfter,
	// negative never purges. PurgeSweep is how often the leader looks;
	// default PurgeAfter/10, within 200ms and 1m.
	PurgeAfter time.Duration
	PurgeSweep time.Duration

	// Forward sends an encoded command to the leader and returns the
	// leader's answer, the bytes its ApplyForwarded produced. On a node
	// that is not the leader every write goes through it; nil keeps the
	// single-node behaviour (writes fail with store.ErrNoLeader). Its error
	// must wrap store.ErrNoLeader when the request certainly never reached
	// the leader (no address, connection refused), store.ErrRefused or
	// store.ErrClusterKeyMismatch when the leader turned it away before its
	// log, and store.ErrUnknownOutcome once it may have; any other error is
	// treated as an unknown outcome. It must pass LeaderTimeout(ctx) on to
	// the leader, which must answer within it.
	Forward func(ctx context.Context, leaderID, leaderRaftAddr string, cmd []byte) ([]byte, error)
	// OnLeader is called with true when this node becomes the leader and
	// with false when it stops being the leader (including at Close). Calls
	// come one at a time, in order, from a goroutine of their own, so raft
	// never waits for them; a slow hook only delays the next call.
	OnLeader func(isLeader bool)
}

// withDefaults validates c and fills in every unset field.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.NodeID == "":
		return c, errors.New("cannot configure raft: NodeID is empty")
	case c.Region == "":
		return c, errors.New("cannot configure raft: Region is empty")
	case c.Dir == "":
		return c, errors.New("cannot configure raft: Dir is empty")
	case c.BindAddr == "":
		return c, errors.New("cannot configure raft: BindAddr is empty")
	case c.Secret != nil && len(c.Secret) != store.KeySize:
		return c, fmt.Errorf("cannot configure raft: Secret is %d bytes; want %d", len(c.Secret), store.KeySize)
	}
	if c.ApplyTimeout <= 0 {
		c.ApplyTimeout = DefaultApplyTimeout
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.IdempotencySweep <= 0 {
		c.IdempotencySweep = DefaultIdempotencySweep
	}
	if c.SnapshotInterval <= 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	if c.SnapshotRetain <= 0 {
		c.SnapshotRetain = DefaultSnapshotRetain
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewSet()
	}
	if c.OnChanging == nil {
		c.OnChanging = func(string) {}
	}
	if c.OnChange == nil {
		c.OnChange = func(string) {}
	}
	if c.OnSite == nil {
		c.OnSite = func(store.Site) {}
	}
	if c.OnRestore == nil {
		c.OnRestore = func() {}
	}
	if c.OnOwnerSuspended == nil {
		c.OnOwnerSuspended = func(string, bool) {}
	}
	if c.PurgeAfter == 0 {
		c.PurgeAfter = DefaultPurgeAfter
	}
	if c.PurgeSweep <= 0 {
		c.PurgeSweep = min(max(c.PurgeAfter/10, 200*time.Millisecond), time.Minute)
	}
	if c.OnLeader == nil {
		c.OnLeader = func(bool) {}
	}
	return c, nil
}
