package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

// A full disk must not crash the node: Pebble treats a failed WAL write
// as fatal, and a node that restarts on the still-full disk crashes again.
// The disk guard keeps a reserve instead. It watches the free space of the
// data folder, and below --min-free-disk it puts the node in storage-full
// mode: every write the node would start (link and site writes, owners,
// forwarded commands on the leader, segment batches on the aggregator) is
// refused with 503 storage-full before it reaches Raft or Pebble, so the
// reserve is left for applying what is already committed; redirects keep
// being served from the store; readiness fails on the writing roles (voter,
// aggregator). When space comes back past the reserve and a margin, the
// mode ends by itself.

const diskCheckInterval = 500 * time.Millisecond

type diskGuard struct {
	dir     string
	minFree uint64
	full    atomic.Bool
	free    atomic.Uint64 // bytes available to the node at the last check
	onFull  func(full bool, free uint64)
}

func newDiskGuard(dir string, minFree uint64, onChange func(full bool, free uint64)) *diskGuard {
	g := &diskGuard{dir: dir, minFree: minFree, onFull: onChange}
	g.check()
	return g
}

// check reads the free space and moves in or out of storage-full mode,
// with a margin of a quarter of the reserve so the mode does not flap.
func (g *diskGuard) check() {
	var st syscall.Statfs_t
	if err := syscall.Statfs(g.dir, &st); err != nil {
		return // keep the last state; a data folder that cannot be statted fails elsewhere
	}
	free := st.Bavail * uint64(st.Bsize)
	g.free.Store(free)
	was := g.full.Load()
	now := was
	switch {
	case free < g.minFree:
		now = true
	case free >= g.minFree+g.minFree/4:
		now = false
	}
	if now != was {
		g.full.Store(now)
		if g.onFull != nil {
			g.onFull(now, free)
		}
	}
}

func (g *diskGuard) run(ctx context.Context) {
	t := time.NewTicker(diskCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.check()
		}
	}
}

// writable refuses a new write while the disk is full.
func (g *diskGuard) writable() error {
	if g == nil || !g.full.Load() {
		return nil
	}
	return fmt.Errorf("%w: %d MiB free in the data folder, below --min-free-disk (%d MiB)", store.ErrStorageFull, g.free.Load()>>20, g.minFree>>20)
}

// noteErr moves into storage-full mode at once when a write failed with
// ENOSPC, without waiting for the next check.
func (g *diskGuard) noteErr(err error) {
	if g != nil && store.IsStorageFull(err) && !g.full.Swap(true) && g.onFull != nil {
		g.onFull(true, g.free.Load())
	}
}

// openDiskGuard starts watching the data folder.
func (n *Node) openDiskGuard(ctx context.Context) {
	full := n.metrics.GetOrCreateCounter("waymark_storage_full_episodes_total")
	n.disk = newDiskGuard(n.cfg.DataDir, uint64(n.cfg.MinFreeDisk), func(isFull bool, free uint64) {
		if isFull {
			full.Inc()
			n.log.Error("disk nearly full: refusing writes until space is freed; redirects keep working",
				"free_mib", free>>20, "min_free_disk_mib", n.cfg.MinFreeDisk>>20, "dir", n.cfg.DataDir)
			return
		}
		n.log.Info("disk space back: accepting writes again", "free_mib", free>>20)
	})
	if n.disk.full.Load() {
		n.log.Error("starting on a nearly full disk: writes are refused until space is freed",
			"free_mib", n.disk.free.Load()>>20, "min_free_disk_mib", n.cfg.MinFreeDisk>>20, "dir", n.cfg.DataDir)
	}
	n.metrics.GetOrCreateGauge("waymark_data_dir_free_bytes", func() float64 { return float64(n.disk.free.Load()) })
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		n.disk.run(ctx)
	}()
}

// diskCheck is the health line of the guard. It is a readiness check on
// the roles that write (voters take the cluster's writes, aggregators
// store events); an edge only applies what is committed and keeps serving
// redirects, so there it warns.
func (n *Node) diskCheck() HealthCheck {
	c := HealthCheck{Name: "disk", State: checkPass, Unit: "bytes", Value: float64(n.disk.free.Load()), Limit: float64(n.cfg.MinFreeDisk),
		Readiness: n.cfg.HasRole(RoleVoter) || n.cfg.HasRole(RoleAggregator), Detail: "free space in the data folder"}
	if err := n.disk.writable(); err != nil {
		c.State, c.Detail = checkFail, err.Error()+"; writes are refused with 503 until space is freed"
		if !c.Readiness {
			c.State = checkWarn
		}
	}
	return c
}

// guardedWriter refuses the edge's writes while the disk is full.
type guardedWriter struct {
	edge.Writer
	g *diskGuard
}

func (w guardedWriter) CreateLink(ctx context.Context, l *store.Link, idem *store.IdempotencyWrite) (uint64, *store.Idempotency, error) {
	if err := w.g.writable(); err != nil {
		return 0, nil, err
	}
	i, rec, err := w.Writer.CreateLink(ctx, l, idem)
	w.g.noteErr(err)
	return i, rec, err
}

func (w guardedWriter) UpdateLink(ctx context.Context, p *store.LinkPatch) (store.Link, error) {
	if err := w.g.writable(); err != nil {
		return store.Link{}, err
	}
	l, err := w.Writer.UpdateLink(ctx, p)
	w.g.noteErr(err)
	return l, err
}

func (w guardedWriter) CreateSite(ctx context.Context, s *store.Site) (uint64, error) {
	if err := w.g.writable(); err != nil {
		return 0, err
	}
	i, err := w.Writer.CreateSite(ctx, s)
	w.g.noteErr(err)
	return i, err
}

func (w guardedWriter) UpdateSite(ctx context.Context, p *store.SitePatch) (store.Site, uint64, error) {
	if err := w.g.writable(); err != nil {
		return store.Site{}, 0, err
	}
	s, i, err := w.Writer.UpdateSite(ctx, p)
	w.g.noteErr(err)
	return s, i, err
}

func (w guardedWriter) CreateLinks(ctx context.Context, items []store.BulkItem) ([]store.BulkResult, uint64, error) {
	if err := w.g.writable(); err != nil {
		return nil, 0, err
	}
	rs, i, err := w.Writer.CreateLinks(ctx, items)
	w.g.noteErr(err)
	return rs, i, err
}

func (w guardedWriter) NewCode(ctx context.Context) (string, error) {
	if err := w.g.writable(); err != nil {
		return "", err
	}
	code, err := w.Writer.NewCode(ctx)
	w.g.noteErr(err)
	return code, err
}

// refuseWhenFull wraps a public route that stores what it receives.
func (n *Node) refuseWhenFull(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if err := n.disk.writable(); err != nil {
			problem.WriteRetry(ctx, problem.StorageFull, err.Error(), 5)
			return
		}
		h(ctx)
	}
}
