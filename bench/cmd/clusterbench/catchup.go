package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// Catch-up constants.
const (
	// keptCodes is about how many bulk-loaded codes are kept to check on
	// the new edge.
	keptCodes = 256
	// restoredMsg is what the FSM logs after a snapshot replaced the store.
	restoredMsg = "store restored from raft snapshot"
)

// measureCatchup tops the store up to -links links through the leader,
// waits for the leader's raft snapshot, then starts a new edge that joins
// by gossip and times it until its replica covers everything the leader
// had applied and a sample of loaded codes resolves on it.
func (b *bench) measureCatchup(ctx context.Context) error {
	res := &CatchupResult{}
	b.rep.Catchup = res
	codes, err := b.bulkLoad(ctx, res)
	if err != nil {
		return err
	}
	if err := b.waitSnapshot(ctx, res); err != nil {
		return err
	}
	return b.startNewEdge(ctx, res, codes)
}

func (b *bench) bulkLoad(ctx context.Context, res *CatchupResult) ([]string, error) {
	need := b.cfg.Links - b.created
	if need <= 0 {
		fmt.Fprintf(b.out, "  %d links already made by the earlier phases; no bulk load\n", b.created)
		res.Links = b.created
		return nil, nil
	}
	fmt.Fprintf(b.out, "  loading %d links through the leader (%d conns, at most %v)\n", need, b.cfg.Conns, b.cfg.LoadMax)
	load, err := harness.RunCreates(ctx, harness.CreateLoadConfig{
		Addr: b.leader.HTTPAddr, APIKeys: b.keys, Conns: b.cfg.Conns,
		Count: need, Duration: b.cfg.LoadMax, RunID: "bulk",
		KeepEvery: max(1, need/keptCodes),
		Progress:  b.out,
	})
	if load != nil {
		b.created += int(load.Created + load.Unmeasured)
	}
	if err != nil {
		return nil, err
	}
	res.Loaded = int(load.Created)
	res.LoadElapsed = load.Elapsed
	res.LoadPerSecond = load.PerSecond()
	res.LoadErrors = load.Errors()
	res.Links = b.created
	res.Capped = int(load.Created) < need
	fmt.Fprintf(b.out, "  loaded %d links in %v (%.0f/s, %d errors); about %d links in the store\n",
		load.Created, load.Elapsed.Round(time.Millisecond), res.LoadPerSecond, res.LoadErrors, b.created)
	if res.Capped {
		fmt.Fprintf(b.out, "  -load-max %v reached before %d links: the catch-up runs with %d\n", b.cfg.LoadMax, b.cfg.Links, b.created)
	}
	return load.Codes, nil
}

// waitSnapshot waits for the leader's newest raft snapshot to be complete
// on disk. hashicorp/raft decides to snapshot only on a timer (every 5 to
// 10 minutes by default), so right after a fast load there is often none.
func (b *bench) waitSnapshot(ctx context.Context, res *CatchupResult) error {
	start := time.Now()
	deadline := start.Add(b.cfg.SnapshotWait)
	dir := filepath.Join(b.leader.DataDir, "raft", "snapshots")
	announced := false
	for {
		if idx, ok := newestSnapshot(dir); ok {
			res.SnapshotIndex = idx
			res.SnapshotWait = time.Since(start)
			fmt.Fprintf(b.out, "  leader snapshot at index %d (waited %v)\n", idx, res.SnapshotWait.Round(time.Second))
			return nil
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(b.out, "  no leader snapshot after %v: the new edge catches up from the log alone\n", b.cfg.SnapshotWait)
			res.SnapshotWait = time.Since(start)
			return nil
		}
		if err := b.cluster.CheckAlive(); err != nil {
			return err
		}
		if !announced {
			fmt.Fprintf(b.out, "  waiting up to %v for the leader's raft snapshot (raft checks every 5 to 10 min)\n", b.cfg.SnapshotWait)
			announced = true
		}
		pause(ctx, time.Second)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// newestSnapshot returns the index of the newest complete snapshot in a
// hashicorp/raft file snapshot store (folders with meta.json; ".tmp" ones
// are still being written).
func newestSnapshot(dir string) (uint64, bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var best uint64
	found := false
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name(), "meta.json"))
		if err != nil {
			continue
		}
		var meta struct{ Index uint64 }
		if json.Unmarshal(raw, &meta) != nil {
			continue
		}
		best, found = max(best, meta.Index), true
	}
	return best, found
}

// startNewEdge starts the new edge and follows it to caught up.
func (b *bench) startNewEdge(ctx context.Context, res *CatchupResult, codes []string) error {
	leaderRep, err := b.cluster.Replica(ctx, b.leader)
	if err != nil {
		return err
	}
	leaderSt, err := b.cluster.Status(ctx, b.leader)
	if err != nil {
		return err
	}
	res.TargetApplied, res.TargetCommit = leaderRep.AppliedIndex, leaderSt.CommitIndex
	fmt.Fprintf(b.out, "  starting edge %s: the leader has applied index %d, commit index %d\n", newEdge.Name, res.TargetApplied, res.TargetCommit)

	n, err := b.cluster.StartNode(ctx, newEdge)
	if err != nil {
		return err
	}
	started := n.StartedAt
	res.Listening = time.Since(started)

	// The restore line, if any, is noted by a watcher beside the polling.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var mu sync.Mutex
	restoreSeen := make(chan struct{})
	go func() {
		defer close(restoreSeen)
		line, err := n.WaitForLine(watchCtx, "snapshot restore", func(line string) (string, bool) {
			return line, strings.Contains(line, restoredMsg)
		})
		if err != nil {
			return
		}
		var rec struct {
			AppliedIndex uint64 `json:"applied_index"`
		}
		json.Unmarshal([]byte(line), &rec)
		mu.Lock()
		res.FromSnapshot, res.Restored, res.RestoredIndex = true, time.Since(started), rec.AppliedIndex
		mu.Unlock()
	}()

	waitCtx, cancel := context.WithTimeout(ctx, b.cfg.CatchupTimeout)
	defer cancel()
	if err := b.waitCaughtUp(waitCtx, n, res); err != nil {
		return err
	}
	res.Applied = time.Since(started)
	if err := b.checkCodes(waitCtx, n, codes); err != nil {
		return err
	}
	res.Resolved = time.Since(started)
	res.SampleCodes = len(codes)
	stopWatch()
	<-restoreSeen
	mu.Lock()
	defer mu.Unlock()
	how := "from the raft log alone (no snapshot install)"
	if res.FromSnapshot {
		how = fmt.Sprintf("snapshot restored at %v (index %d), then the log", res.Restored.Round(time.Millisecond), res.RestoredIndex)
	}
	fmt.Fprintf(b.out, "  %s caught up in %v: listening at %v, %s, applied index %d at %v, %d sample codes resolved at %v\n",
		n.Name, res.Resolved.Round(time.Millisecond), res.Listening.Round(time.Millisecond), how,
		res.TargetApplied, res.Applied.Round(time.Millisecond), len(codes), res.Resolved.Round(time.Millisecond))
	return nil
}

// waitCaughtUp polls the new edge until its replica holds everything the
// leader had applied and raft's applied index reached the leader's commit
// index, printing progress every 10 s.
func (b *bench) waitCaughtUp(ctx context.Context, n *harness.ClusterNode, res *CatchupResult) error {
	lastPrint := time.Now()
	var last string
	for {
		rep, errRep := b.cluster.Replica(ctx, n)
		st, errSt := b.cluster.Status(ctx, n)
		if errRep == nil && errSt == nil {
			if rep.AppliedIndex >= res.TargetApplied && st.AppliedIndex >= res.TargetCommit {
				return nil
			}
			last = fmt.Sprintf("replica at %d of %d, raft applied %d of %d", rep.AppliedIndex, res.TargetApplied, st.AppliedIndex, res.TargetCommit)
		} else {
			last = fmt.Sprintf("not answering yet (%v)", firstErr(errRep, errSt))
		}
		if time.Since(lastPrint) >= 10*time.Second {
			fmt.Fprintf(b.out, "    %s after %v: %s\n", n.Name, time.Since(n.StartedAt).Round(time.Second), last)
			lastPrint = time.Now()
		}
		if err := b.cluster.CheckAlive(); err != nil {
			return err
		}
		pause(ctx, 20*time.Millisecond)
		if ctx.Err() != nil {
			return fmt.Errorf("%s did not catch up (%s): %w", n.Name, last, ctx.Err())
		}
	}
}

// checkCodes fetches each kept code once on the new edge; its replica
// already covers them, so they resolve from its local store.
func (b *bench) checkCodes(ctx context.Context, n *harness.ClusterNode, codes []string) error {
	api := newAPIClient()
	defer api.close()
	for _, code := range codes {
		status, loc, err := api.redirect(ctx, n.BaseURL, code)
		if err != nil {
			return err
		}
		if status != http.StatusFound || !strings.HasPrefix(loc, "https://example.com/c/bulk/") {
			return fmt.Errorf("GET /%s on %s: got %d Location %q; want 302 to a bulk-loaded destination", code, n.Name, status, loc)
		}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
