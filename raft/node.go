package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/waymark/waymark/store"
)

// Node is this process's member of the raft cluster and the only way to
// write to the replicated store.
type Node struct {
	cfg     Config
	st      *store.Store
	log     *slog.Logger
	m       *nodeMetrics
	fsm     *fsm
	raft    *hraft.Raft
	trans   *pipelineTransport
	bolt    *raftboltdb.BoltStore
	logs    hraft.LogStore // the cached log store raft reads; Ready looks up entry types in it
	snaps   hraft.SnapshotStore
	started time.Time // when Open was called; stands in for "last contact" until a leader is heard

	blocks   *blockPool
	applied  *appliedWatch // the store's applied index, signalled by the FSM
	perm     atomic.Pointer[store.Permuter]
	caughtUp atomic.Bool // applied the commit index once since start
	securing atomic.Bool // a SetSecret loop is running
	// steppingDown is set while a halted leader hands its leadership away.
	steppingDown atomic.Bool
	raftUp       atomic.Bool // n.raft is set
	sweeping     atomic.Bool // the idempotency expiry loop is running
	purging      atomic.Bool // the deleted-link purge loop is running (purge.go)
	// mayInitSecret is set on a node that bootstraps (Config.Bootstrap or
	// BootstrapCluster): only such a node, as leader, may originate the
	// cluster permutation key. A node that was added to a cluster gets it
	// from the log.
	mayInitSecret atomic.Bool
	// claimingRegion is set while a node that formed the cluster claims
	// its own region (regions.go); Ready waits for it.
	claimingRegion atomic.Bool

	ctx       context.Context
	cancel    context.CancelFunc
	goMu      sync.Mutex // guards closed and wg.Add against Close
	closed    bool
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open starts raft on cfg.Dir over st. The store must stay open until
// after Close.
func Open(cfg Config, st *store.Store) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	n := &Node{cfg: cfg, st: st, started: start, log: cfg.Logger.With("component", "raft", "node", cfg.NodeID)}
	n.mayInitSecret.Store(cfg.Bootstrap)
	n.m = newNodeMetrics(cfg.Metrics)
	n.fsm = newFSM(st, Config{
		Logger: n.log, OnChange: cfg.OnChange, OnChanging: cfg.OnChanging, OnSite: cfg.OnSite, OnRestore: n.onRestore(cfg.OnRestore),
		OnOwnerSuspended: cfg.OnOwnerSuspended, OnKeyRevoked: cfg.OnKeyRevoked,
	}, n.m)
	n.fsm.onHalt = func() {
		// The FSM may halt while NewRaft replays the log, before n.raft
		// is set; a node is never leader then, and leadershipChanged
		// steps down later if it wins an election.
		if n.raftUp.Load() {
			n.stepDownHalted()
		}
	}
	n.fsm.onClusterID = n.recordClusterID
	applied, err := st.AppliedIndex()
	if err != nil {
		return nil, err
	}
	n.applied = newAppliedWatch(applied)
	n.fsm.applied = n.applied
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.blocks = newBlockPool(n.ctx, cfg.BlockSize, n.allocBlock, n.goSafe, n.log)
	if err := n.start(); err != nil {
		n.cancel()
		n.closeResources()
		return nil, err
	}
	n.log.Info("raft started", "raft_addr", n.Addr(), "region", cfg.Region, "dir", cfg.Dir, "duration", time.Since(start))
	return n, nil
}

// onRestore wraps the user's hook: a restored store may hold a different
// secret state and counters, so the cached permuter and the ID blocks
// taken from the old counters are dropped too.
func (n *Node) onRestore(user func()) func() {
	return func() {
		n.perm.Store(nil)
		n.blocks.drop()
		if applied, err := n.st.AppliedIndex(); err == nil {
			n.applied.advance(applied)
		}
		user()
	}
}

func (n *Node) start() error {
	cfg := n.cfg
	hlog := newHCLogger(n.log, "raft")
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("cannot create raft dir: %w", err)
	}
	boltOpts := *bbolt.DefaultOptions
	boltOpts.Timeout = time.Second // fail, not hang, when another process holds the file
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.Dir, "raft.db"), BoltOptions: &boltOpts})
	if err != nil {
		return fmt.Errorf("cannot open raft log %q: %w", cfg.Dir, err)
	}
	n.bolt = bolt
	if err := checkClusterID(bolt, n.st); err != nil {
		return err
	}
	snaps, err := hraft.NewFileSnapshotStoreWithLogger(cfg.Dir, cfg.SnapshotRetain, hlog.Named("snapshot"))
	if err != nil {
		return fmt.Errorf("cannot open raft snapshots: %w", err)
	}
	n.snaps = snaps
	var advertise net.Addr
	if cfg.AdvertiseAddr != "" {
		if advertise, err = net.ResolveTCPAddr("tcp", cfg.AdvertiseAddr); err != nil {
			return fmt.Errorf("cannot resolve raft advertise address %q: %w", cfg.AdvertiseAddr, err)
		}
	}
	if cfg.TLS != nil {
		stream, err := newTLSStreamLayer(cfg.BindAddr, advertise, cfg.TLS, cfg.TLSInbound)
		if err != nil {
			return fmt.Errorf("cannot listen for raft on %q: %w", cfg.BindAddr, err)
		}
		n.trans = newPipelineTransport(hraft.NewNetworkTransportWithLogger(stream, 3, transportTimeout, hlog.Named("transport")),
			transportTimeout, n.m.pipelinesUnstuck.Inc)
	} else {
		tcp, err := hraft.NewTCPTransportWithLogger(cfg.BindAddr, advertise, 3, transportTimeout, hlog.Named("transport"))
		if err != nil {
			return fmt.Errorf("cannot listen for raft on %q: %w", cfg.BindAddr, err)
		}
		n.trans = newPipelineTransport(tcp, transportTimeout, n.m.pipelinesUnstuck.Inc)
	}

	rc := n.raftConfig(hlog)
	applied, err := n.st.AppliedIndex()
	if err != nil {
		return err
	}
	behind, snapIndex, err := storeBehindSnapshot(applied, snaps, bolt)
	if err != nil {
		return err
	}
	if behind {
		// Pebble lost entries the log no longer has: let raft load the
		// snapshot into the store, then replay the log after it.
		rc.NoSnapshotRestoreOnStart = false
		n.log.Warn("store is behind the newest raft snapshot; restoring it", "store_applied", applied, "snapshot_index", snapIndex)
	}

	existing, err := hraft.HasExistingState(bolt, bolt, snaps)
	if err != nil {
		return fmt.Errorf("cannot inspect raft state: %w", err)
	}
	if !existing && cfg.Bootstrap {
		if err := foreignStore(applied); err != nil {
			return err
		}
		boot := hraft.Configuration{Servers: []hraft.Server{{Suffrage: hraft.Voter, ID: rc.LocalID, Address: n.trans.LocalAddr()}}}
		if err := hraft.BootstrapCluster(rc, bolt, bolt, snaps, n.trans, boot); err != nil {
			return fmt.Errorf("cannot bootstrap raft: %w", err)
		}
		n.log.Info("bootstrapped single-voter raft cluster")
		n.claimingRegion.Store(true) // started below, once raft runs
	}

	// The leader re-reads recent entries once per follower; a small cache
	// in front of bbolt saves those reads (a profile showed ~14% of the
	// leader's CPU there under bulk creates).
	guarded, running := n.logStore(bolt)
	logs, err := hraft.NewLogCache(logCacheEntries, guarded)
	if err != nil {
		return fmt.Errorf("cannot create raft log cache: %w", err)
	}
	n.logs = logs
	n.raft, err = hraft.NewRaft(rc, n.fsm, logs, bolt, snaps, n.trans)
	if err != nil {
		return fmt.Errorf("cannot start raft: %w", err)
	}
	n.raftUp.Store(true)
	running(n.raft)
	n.goSafe(n.watchLeadership)
	n.goSafe(n.observeLoop)
	if n.claimingRegion.Swap(false) {
		n.claimOwnRegionInBackground()
	}
	return nil
}

// foreignStore refuses to bootstrap a new cluster over a store that holds
// another cluster's entries: the new cluster's indices would be skipped as
// already applied.
func foreignStore(applied uint64) error {
	if applied > 0 {
		return fmt.Errorf("cannot bootstrap raft: the store already holds entries up to index %d of another cluster; start with an empty store or the matching raft dir", applied)
	}
	return nil
}

// boltClusterID is the raft stable-store key that remembers which cluster
// this raft dir belongs to, once the FSM has seen the store hold it.
var boltClusterID = []byte("waymark_cluster_id")

// checkClusterID refuses to start raft over a store of another cluster
// than the raft dir's. Without it a store whose applied index is past the
// log's first entries would skip them as already held: the entry naming
// the cluster may be compacted away, so the FSM could not notice.
func checkClusterID(bolt *raftboltdb.BoltStore, st *store.Store) error {
	logID, err := bolt.Get(boltClusterID)
	if errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read the raft dir's cluster id: %w", err)
	}
	storeID, found, err := st.ClusterID()
	if err != nil || !found {
		return err // a store without an id is empty or older than ids; the FSM checks as it applies
	}
	if storeID != string(logID) {
		return fmt.Errorf("cannot start raft: the store holds cluster %q, the raft dir cluster %q: %w; start with the store of this raft dir, or an empty store", storeID, logID, store.ErrOtherCluster)
	}
	return nil
}

// recordClusterID remembers the cluster id beside the raft log.
func (n *Node) recordClusterID(id string) {
	if old, err := n.bolt.Get(boltClusterID); err == nil && string(old) == id {
		return
	}
	if err := n.bolt.Set(boltClusterID, []byte(id)); err != nil {
		n.log.Warn("cannot record cluster id in the raft dir", "err", err)
	}
}

// logCacheEntries is how many recent log entries stay in memory for
// replication to followers.
const logCacheEntries = 4096

func (n *Node) raftConfig(hlog hclog.Logger) *hraft.Config {
	cfg := n.cfg
	rc := hraft.DefaultConfig()
	rc.LocalID = hraft.ServerID(cfg.NodeID)
	rc.Logger = hlog
	// Followers learn that an entry committed with the leader's next
	// message; an idle leader sends it after CommitTimeout. 10ms instead of
	// 50ms brings idle replication lag and takedowns down to ~20ms.
	rc.CommitTimeout = 10 * time.Millisecond
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	// Pebble already holds the state; raft only replays the log after the
	// store's applied index (the FSM skips the rest).
	rc.NoSnapshotRestoreOnStart = true
	// Let concurrent applies queue up and go out as one disk write.
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
		rc.LeaderLeaseTimeout = min(rc.LeaderLeaseTimeout, cfg.HeartbeatTimeout)
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	return rc
}

// goSafe runs fn on a goroutine that Close waits for; after Close it
// reports false and runs nothing.
func (n *Node) goSafe(fn func()) bool {
	n.goMu.Lock()
	defer n.goMu.Unlock()
	if n.closed {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn()
	}()
	return true
}

// transportTimeout bounds each raft RPC's I/O.
const transportTimeout = 10 * time.Second

// Close stops raft and releases the transport and the raft log. It does
// not close the store.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.cancel()
		var errs []error
		if n.raft != nil {
			f := n.raft.Shutdown()
			done := make(chan struct{})
			go func() {
				// Shutdown waits for the replication goroutines; one stuck
				// in an append pipeline (pipeline.go) is freed by closing it.
				t := time.NewTicker(100 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-done:
						return
					case <-t.C:
						n.trans.closePipelines()
					}
				}
			}()
			err := f.Error()
			close(done)
			if err != nil {
				errs = append(errs, fmt.Errorf("cannot shut down raft: %w", err))
			}
		}
		n.goMu.Lock()
		n.closed = true
		n.goMu.Unlock()
		n.wg.Wait()
		errs = append(errs, n.closeResources())
		n.closeErr = errors.Join(errs...)
		n.log.Info("raft stopped")
	})
	return n.closeErr
}

func (n *Node) closeResources() error {
	var errs []error
	if n.trans != nil {
		if err := n.trans.Close(); err != nil {
			errs = append(errs, fmt.Errorf("cannot close raft transport: %w", err))
		}
	}
	if n.bolt != nil {
		if err := n.bolt.Close(); err != nil {
			errs = append(errs, fmt.Errorf("cannot close raft log: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Addr is the advertised raft address.
func (n *Node) Addr() string { return string(n.trans.LocalAddr()) }

// Raft exposes the raft instance for operator commands.
func (n *Node) Raft() *hraft.Raft { return n.raft }

// IsLeader reports whether this node is the raft leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == hraft.Leader }

// observeLoop keeps the gauges current.
func (n *Node) observeLoop() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		n.m.observe(n.raft, n.lastContactOrStart())
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
	}
}
