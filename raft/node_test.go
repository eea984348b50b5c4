package raft

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/waymark/waymark/store"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestNodeWrites(t *testing.T) {
	tn := newTestNode(t, nil)
	n, st, ctx := tn.n, tn.st, testCtx(t)

	if !n.IsLeader() {
		t.Fatalf("single bootstrapped node is not leader: %+v", n.Stats())
	}
	if ok, detail := n.Ready(); !ok {
		t.Fatalf("ready: got false (%s); want true", detail)
	}
	key := store.HashAPIKey([]byte("api-key"))
	if _, err := n.CreateOwner(ctx, &store.Owner{ID: "o1", Name: "Ada", CreatedAt: 1}, key); err != nil {
		t.Fatalf("create owner: %v", err)
	}
	if o, found, err := st.OwnerByKey(key); err != nil || !found || o.Name != "Ada" {
		t.Errorf("owner by key: got %+v %v %v; want Ada", o, found, err)
	}

	site := &store.Site{ID: "s1", Domain: "example.com", Timezone: "UTC", Owner: "o1"}
	if _, err := n.CreateSite(ctx, site); err != nil {
		t.Fatalf("create site: %v", err)
	}
	if got, found, _ := st.Site("s1"); !found || !reflect.DeepEqual(got, *site) {
		t.Errorf("site: got %+v found %v; want %+v", got, found, *site)
	}
	if len(tn.ev.sites) != 1 || !reflect.DeepEqual(tn.ev.sites[0], *site) {
		t.Errorf("OnSite: got %+v; want [%+v]", tn.ev.sites, *site)
	}
	if _, err := n.CreateSite(ctx, &store.Site{ID: "s2", Domain: "example.com"}); !errors.Is(err, store.ErrDomainTaken) {
		t.Errorf("second site for a domain: got %v; want ErrDomainTaken", err)
	}

	l := &store.Link{Code: "abc1234", URL: "https://example.com/a", Owner: "o1", CreatedAt: 2}
	idx, existing, err := n.CreateLink(ctx, l, nil)
	if err != nil || existing != nil {
		t.Fatalf("create link: got %v existing %v", err, existing)
	}
	if tn.ev.changeCount("abc1234") != 1 {
		t.Errorf("OnChange before CreateLink returned: got %d calls; want 1", tn.ev.changeCount("abc1234"))
	}
	if got := mustGetLink(t, st, "abc1234"); got.Index != idx || got.Redirect != 302 || got.URL != l.URL {
		t.Errorf("stored link: got %+v; want index %d redirect 302", got, idx)
	}
	if l.Index != idx {
		t.Errorf("l.Index: got %d; want %d", l.Index, idx)
	}
	if _, _, err := n.CreateLink(ctx, &store.Link{Code: "abc1234", URL: "https://x", Owner: "o2"}, nil); !errors.Is(err, store.ErrCodeTaken) {
		t.Errorf("create on a taken code: got %v; want ErrCodeTaken", err)
	}

	idem := &store.IdempotencyWrite{Owner: "o1", Key: "retry-1", Record: store.Idempotency{RequestHash: [32]byte{9}, Status: 201, Response: []byte("{}"), CreatedAt: 3}}
	if _, existing, err := n.CreateLink(ctx, testLink("idem001"), idem); err != nil || existing != nil {
		t.Fatalf("idempotent create: got %v existing %v", err, existing)
	}
	_, existing, err = n.CreateLink(ctx, testLink("idem002"), idem)
	if err != nil || existing == nil || existing.RequestHash != idem.Record.RequestHash || existing.Status != 201 {
		t.Fatalf("retried idempotent create: got existing %+v err %v; want the first record", existing, err)
	}
	var tmp store.Link
	if found, _ := st.GetLink([]byte("idem002"), &tmp); found {
		t.Errorf("retried idempotent create made a second link")
	}

	up, err := n.UpdateLink(ctx, &store.LinkPatch{Code: "abc1234", Owner: "o1", UpdatedAt: 4, SetURL: true, URL: "https://example.com/b"})
	if err != nil || up.URL != "https://example.com/b" || up.Index <= idx {
		t.Fatalf("update link: got %+v %v", up, err)
	}
	if tn.ev.changeCount("abc1234") != 2 {
		t.Errorf("OnChange before UpdateLink returned: got %d calls; want 2", tn.ev.changeCount("abc1234"))
	}
	if got := mustGetLink(t, st, "abc1234"); got.URL != "https://example.com/b" {
		t.Errorf("stored URL after update: got %q", got.URL)
	}
	if _, err := n.UpdateLink(ctx, &store.LinkPatch{Code: "abc1234", Owner: "o2", SetStatus: true, Status: store.StatusDisabled}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update by another owner: got %v; want ErrNotFound", err)
	}
	if _, err := n.UpdateLink(ctx, &store.LinkPatch{Code: "missing", SetStatus: true}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a missing link: got %v; want ErrNotFound", err)
	}
	perm := &store.Link{Code: "perm301", URL: "https://example.com/p", Owner: "o1", Redirect: 301}
	if _, _, err := n.CreateLink(ctx, perm, nil); err != nil {
		t.Fatalf("create permanent link: %v", err)
	}
	if _, err := n.UpdateLink(ctx, &store.LinkPatch{Code: "perm301", Owner: "o1", SetURL: true, URL: "https://elsewhere"}); !errors.Is(err, store.ErrPermanentRedirect) {
		t.Errorf("new URL for a 301 link: got %v; want ErrPermanentRedirect", err)
	}
	if _, err := n.UpdateLink(ctx, &store.LinkPatch{Code: "perm301", SetStatus: true, Status: store.StatusLegalBlock}); err != nil {
		t.Errorf("operator takedown of a 301 link: %v", err)
	}

	s := n.Stats()
	if s.State != "Leader" || s.LeaderID != "n1" || s.LeaderAddr != n.Addr() || s.StoreAppliedIndex == 0 || s.CommitIndex < s.StoreAppliedIndex || !s.Ready {
		t.Errorf("stats: got %+v", s)
	}
}

func TestNodeNewCodeUniqueAcrossBlocks(t *testing.T) {
	tn := newTestNode(t, func(c *Config) { c.BlockSize = 16 })
	n, ctx := tn.n, testCtx(t)
	const workers, perWorker = 8, 125
	codes := make(chan string, workers*perWorker)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWorker {
				code, err := n.NewCode(ctx)
				if err != nil {
					errs <- err
					return
				}
				codes <- code
			}
		}()
	}
	wg.Wait()
	close(codes)
	close(errs)
	for err := range errs {
		t.Fatalf("new code: %v", err)
	}
	slot, found, err := tn.st.RegionSlot("us")
	if err != nil || !found {
		t.Fatalf("region slot: %v %v", found, err)
	}
	perm, err := n.Permuter()
	if err != nil {
		t.Fatalf("permuter: %v", err)
	}
	seen := map[string]bool{}
	for code := range codes {
		if len(code) != store.CodeLen {
			t.Errorf("code %q: got length %d; want %d", code, len(code), store.CodeLen)
		}
		if seen[code] {
			t.Errorf("code %q handed out twice", code)
		}
		seen[code] = true
		id, err := perm.IDOf([]byte(code))
		if err != nil {
			t.Fatalf("IDOf(%q): %v", code, err)
		}
		if got := store.RegionOf(id); got != slot {
			t.Errorf("code %q: got region slot %d; want %d", code, got, slot)
		}
	}
	if len(seen) != workers*perWorker {
		t.Errorf("got %d unique codes; want %d", len(seen), workers*perWorker)
	}
}

func TestNodeRestartReplaysNothing(t *testing.T) {
	tn := newTestNode(t, nil)
	ctx := testCtx(t)
	codes := []string{"aaaaaaa", "bbbbbbb", "ccccccc", "ddddddd"}
	for _, c := range codes {
		if _, _, err := tn.n.CreateLink(ctx, testLink(c), nil); err != nil {
			t.Fatalf("create %s: %v", c, err)
		}
	}
	if _, err := tn.n.UpdateLink(ctx, &store.LinkPatch{Code: "aaaaaaa", SetStatus: true, Status: store.StatusBlocked}); err != nil {
		t.Fatalf("update: %v", err)
	}
	applied := appliedIndex(t, tn.st)
	before := dump(t, tn.st)

	tn.restart()
	// The replay runs once the restarted node has elected itself and
	// committed; poll for it rather than assume it already happened.
	deadline := time.Now().Add(10 * time.Second)
	for tn.n.m.fsmSkipped.Get() < applied-2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}

	if got := appliedIndex(t, tn.st); got != applied {
		t.Errorf("applied index after restart: got %d; want %d", got, applied)
	}
	if got := tn.ev.totalChanges(); got != 0 {
		t.Errorf("OnChange calls after restart: got %d; want 0 (nothing re-applied)", got)
	}
	// Every entry but the leader's no-op and the secret's barrier reaches
	// the FSM again on start, and every one must be skipped.
	if got := tn.n.m.fsmSkipped.Get(); got < applied-2 {
		t.Errorf("replayed entries skipped: got %d; want at least %d (raft replays the log on start)", got, applied-2)
	}
	if got := dump(t, tn.st); string(got) != string(before) {
		t.Errorf("store changed across restart")
	}
	if got := mustGetLink(t, tn.st, "aaaaaaa"); got.Status != store.StatusBlocked {
		t.Errorf("status after restart: got %v; want blocked", got.Status)
	}
	if _, _, err := tn.n.CreateLink(ctx, testLink("eeeeeee"), nil); err != nil {
		t.Fatalf("create after restart: %v", err)
	}
	if _, _, err := tn.n.CreateLink(ctx, testLink("aaaaaaa"), nil); !errors.Is(err, store.ErrCodeTaken) {
		t.Errorf("reuse of a code after restart: got %v; want ErrCodeTaken", err)
	}
}

func TestNodeUserSnapshotThenRestart(t *testing.T) {
	tn := newTestNode(t, func(c *Config) { c.TrailingLogs = 1 })
	ctx := testCtx(t)
	for _, c := range []string{"aaaaaaa", "bbbbbbb"} {
		if _, _, err := tn.n.CreateLink(ctx, testLink(c), nil); err != nil {
			t.Fatalf("create %s: %v", c, err)
		}
	}
	if err := tn.n.Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if _, _, err := tn.n.CreateLink(ctx, testLink("ccccccc"), nil); err != nil {
		t.Fatalf("create after snapshot: %v", err)
	}
	applied := appliedIndex(t, tn.st)

	tn.restart()

	for _, c := range []string{"aaaaaaa", "bbbbbbb", "ccccccc"} {
		mustGetLink(t, tn.st, c)
	}
	if got := appliedIndex(t, tn.st); got != applied {
		t.Errorf("applied index: got %d; want %d", got, applied)
	}
	if tn.ev.restoreCount() != 0 || tn.ev.totalChanges() != 0 {
		t.Errorf("after restart with an up-to-date store: got %d restores, %d changes; want 0, 0", tn.ev.restoreCount(), tn.ev.totalChanges())
	}
	if s := tn.n.Stats(); s.LastSnapshotIndex == 0 {
		t.Errorf("stats: got no snapshot index: %+v", s)
	}
}

func TestNodeStoreBehindSnapshotRestores(t *testing.T) {
	tn := newTestNode(t, func(c *Config) { c.TrailingLogs = 1 })
	ctx := testCtx(t)
	for _, c := range []string{"aaaaaaa", "bbbbbbb"} {
		if _, _, err := tn.n.CreateLink(ctx, testLink(c), nil); err != nil {
			t.Fatalf("create %s: %v", c, err)
		}
	}
	if err := tn.n.Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if _, _, err := tn.n.CreateLink(ctx, testLink("ccccccc"), nil); err != nil {
		t.Fatalf("create after snapshot: %v", err)
	}
	applied := appliedIndex(t, tn.st)
	secret, _, _ := tn.st.Secret()

	// Lose the store: close everything, wipe Pebble, start again.
	if err := tn.n.Close(); err != nil {
		t.Fatalf("close raft: %v", err)
	}
	tn.n = nil
	if err := tn.st.Close(); err != nil {
		t.Fatalf("close store: %v", err)
	}
	storeDir := filepath.Join(tn.dir, "store")
	if err := os.RemoveAll(storeDir); err != nil {
		t.Fatal(err)
	}
	tn.st = openStore(t, storeDir)
	tn.ev = newEvents()
	tn.ev.hook(&tn.cfg)
	tn.open()

	for _, c := range []string{"aaaaaaa", "bbbbbbb", "ccccccc"} {
		mustGetLink(t, tn.st, c)
	}
	if got := appliedIndex(t, tn.st); got != applied {
		t.Errorf("applied index: got %d; want %d", got, applied)
	}
	if tn.ev.restoreCount() != 1 {
		t.Errorf("restores: got %d; want 1", tn.ev.restoreCount())
	}
	if got, _, _ := tn.st.Secret(); string(got) != string(secret) {
		t.Errorf("secret changed across restore")
	}
	if tn.ev.changeCount("ccccccc") != 1 {
		t.Errorf("entry after the snapshot: got %d OnChange calls; want 1 (replayed once)", tn.ev.changeCount("ccccccc"))
	}
}

func TestNodeRegionsGetDisjointBlocks(t *testing.T) {
	tn := newTestNode(t, func(c *Config) { c.BlockSize = 1000 })
	ctx := testCtx(t)
	us, err := tn.n.allocBlock(ctx)
	if err != nil {
		t.Fatalf("alloc us: %v", err)
	}
	if _, err := tn.n.apply(ctx, appendAllocBlock(nil, "eu", 1000)); !errors.Is(err, store.ErrRegionUnclaimed) {
		t.Fatalf("alloc in unclaimed eu: got %v; want ErrRegionUnclaimed", err)
	}
	if _, claimed, err := tn.n.ClaimRegion(ctx, "eu"); err != nil || !claimed {
		t.Fatalf("claim eu: got claimed %v, %v; want a new claim", claimed, err)
	}
	res, err := tn.n.apply(ctx, appendAllocBlock(nil, "eu", 1000))
	if err != nil {
		t.Fatalf("alloc eu: %v", err)
	}
	eu := res.Block
	if us.Len() != 1000 || eu.Len() != 1000 {
		t.Errorf("block sizes: got %d and %d; want 1000", us.Len(), eu.Len())
	}
	if store.RegionOf(us.Start) == store.RegionOf(eu.Start) {
		t.Errorf("us block %+v and eu block %+v share slot %d", us, eu, store.RegionOf(us.Start))
	}
	if store.RegionOf(us.End-1) != store.RegionOf(us.Start) || store.RegionOf(eu.End-1) != store.RegionOf(eu.Start) {
		t.Errorf("a block crosses its region's range: us %+v eu %+v", us, eu)
	}
	again, err := tn.n.allocBlock(ctx)
	if err != nil || again.Start != us.End {
		t.Errorf("second us block: got %+v %v; want to start at %d", again, err, us.End)
	}
}

func TestNodeWithoutLeaderRefusesWrites(t *testing.T) {
	tn := newTestNode(t, func(c *Config) { c.Bootstrap = false })
	ctx := testCtx(t)
	if _, _, err := tn.n.CreateLink(ctx, testLink("aaaaaaa"), nil); !errors.Is(err, store.ErrNoLeader) {
		t.Errorf("create without a cluster: got %v; want ErrNoLeader", err)
	}
	if _, err := tn.n.NewCode(ctx); !errors.Is(err, store.ErrNoLeader) {
		t.Errorf("new code without a secret: got %v; want ErrNoLeader", err)
	}
	if ok, detail := tn.n.Ready(); ok {
		t.Errorf("ready without a leader: got true (%s)", detail)
	}
}

func TestNodeAppliesUnknownCommandsSafely(t *testing.T) {
	tn := newTestNode(t, nil)
	f := tn.n.Raft().Apply([]byte{222, 1, flagSkippable}, time.Second)
	if err := f.Error(); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if res := result(t, f.Response()); !res.Skipped {
		t.Errorf("skippable unknown command: got %+v; want skipped", res)
	}
	if ok, detail := tn.n.Ready(); !ok {
		t.Errorf("ready after an unknown command: got false (%s)", detail)
	}
}

func TestApplyErrorMapping(t *testing.T) {
	cases := []struct {
		err  error
		want error
	}{
		{hraft.ErrNotLeader, store.ErrNoLeader},
		{hraft.ErrEnqueueTimeout, store.ErrNoLeader},
		{hraft.ErrLeadershipLost, store.ErrUnknownOutcome},
		{hraft.ErrAbortedByRestore, store.ErrUnknownOutcome},
		{hraft.ErrRaftShutdown, store.ErrUnknownOutcome},
		{errors.New("disk on fire"), store.ErrUnknownOutcome},
	}
	for _, tc := range cases {
		got := applyError(tc.err)
		if !errors.Is(got, tc.want) || !errors.Is(got, tc.err) {
			t.Errorf("applyError(%v): got %v; want it to wrap %v and the cause", tc.err, got, tc.want)
		}
	}
}

func TestNodeRejectsBadConfig(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "store"))
	defer st.Close()
	for _, cfg := range []Config{
		{Region: "us", Dir: t.TempDir(), BindAddr: "127.0.0.1:0"},
		{NodeID: "n", Dir: t.TempDir(), BindAddr: "127.0.0.1:0"},
		{NodeID: "n", Region: "us", Dir: t.TempDir(), BindAddr: "127.0.0.1:0", Secret: []byte("short")},
	} {
		if n, err := Open(cfg, st); err == nil {
			n.Close()
			t.Errorf("Open(%+v): got nil error; want one", cfg)
		}
	}
}

func TestNodeRefusesBootstrapOverForeignStore(t *testing.T) {
	tn := newTestNode(t, nil)
	if _, _, err := tn.n.CreateLink(testCtx(t), testLink("aaaaaaa"), nil); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := tn.n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	tn.n = nil
	cfg := tn.cfg
	cfg.Dir = filepath.Join(tn.dir, "other-raft") // raft state lost, store kept
	if n, err := Open(cfg, tn.st); err == nil {
		n.Close()
		t.Fatalf("bootstrap over a store with applied entries: got nil error; want one")
	}
}
