package raft

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

func regionNames(t *testing.T, st *store.Store) string {
	t.Helper()
	rs, err := st.Regions()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(rs)
}

// A node whose --region has no slot generates no codes and claims none,
// however often it is asked, and appends nothing to the log for it; once
// the region is claimed explicitly, it does.
func TestRegionsAreClaimedExplicitly(t *testing.T) {
	c := newCluster(t, nil)
	v1 := c.add("v1", "us")
	c.bootstrap(v1) // a founding voter claims its own region
	e1 := c.add("e1", "euu")
	c.onLeader("add e1", func(n *Node) error { return n.AddNonvoter("e1", e1.node().Addr()) })
	c.waitCaughtUp()
	if got, want := regionNames(t, v1.store()), "[{us 0 0}]"; got != want {
		t.Fatalf("regions after bootstrap: got %s; want %s", got, want)
	}

	ctx := testCtx(t)
	last := v1.node().Raft().LastIndex()
	for i := 0; i < 3; i++ {
		if code, err := e1.node().NewCode(ctx); !errors.Is(err, store.ErrRegionUnclaimed) {
			t.Fatalf("code in unclaimed region euu: got %q, %v; want ErrRegionUnclaimed", code, err)
		}
	}
	if got := v1.node().Raft().LastIndex(); got != last {
		t.Errorf("log grew from %d to %d for codes in an unclaimed region; want nothing appended", last, got)
	}
	if got, want := regionNames(t, v1.store()), "[{us 0 0}]"; got != want {
		t.Fatalf("regions after the refused codes: got %s; want %s", got, want)
	}

	// The operator claims it (through the edge: forwarded to the leader).
	slot, claimed, err := e1.node().ClaimRegion(ctx, "euu")
	if err != nil || !claimed || slot != 1 {
		t.Fatalf("claim euu: got slot %d claimed %v, %v; want slot 1, newly claimed", slot, claimed, err)
	}
	if slot, claimed, err := v1.node().ClaimRegion(ctx, "euu"); err != nil || claimed || slot != 1 {
		t.Errorf("claim euu again: got slot %d claimed %v, %v; want slot 1, not claimed again", slot, claimed, err)
	}
	if _, _, err := v1.node().ClaimRegion(ctx, "bad name"); err == nil {
		t.Errorf("claim of a name with a space: got nil error")
	}
	code := createThrough(t, e1, "https://example.com/euu")
	c.waitLinks(code)
	var l store.Link
	if _, err := v1.store().GetLink([]byte(code), &l); err != nil {
		t.Fatal(err)
	}
	if got := regionNames(t, v1.store()); got != fmt.Sprintf("[{euu 1 %d} {us 0 0}]", DefaultBlockSize) {
		t.Errorf("regions after a create in euu: got %s; want euu in slot 1 with one block", got)
	}
}

// Idempotency records expire 24 h after their creation, through the log:
// the leader's sweep picks the cutoff, and every replica deletes the same
// records and keeps the same young ones.
func TestIdempotencyRecordsExpireThroughLog(t *testing.T) {
	c := newCluster(t, func(cfg *Config) { cfg.IdempotencySweep = 50 * time.Millisecond })
	v1 := c.add("v1", "us")
	c.bootstrap(v1)
	e1 := c.add("e1", "us")
	c.onLeader("add e1", func(n *Node) error { return n.AddNonvoter("e1", e1.node().Addr()) })
	c.waitCaughtUp()

	now := time.Now().UnixMilli()
	ages := map[string]int64{ // Idempotency-Key -> age in ms
		"old-1": 25 * 3600 * 1000, "old-2": 48 * 3600 * 1000, "old-3": store.IdempotencyTTL + 60*1000,
		"young-1": 3600 * 1000, "young-2": store.IdempotencyTTL - 10*60*1000,
	}
	ctx := testCtx(t)
	i := 0
	for key, age := range ages {
		i++
		idem := &store.IdempotencyWrite{Owner: "o1", Key: key, Record: store.Idempotency{Status: 201, Response: []byte(key), CreatedAt: now - age}}
		code := fmt.Sprintf("idem%03d", i)
		if _, _, err := e1.node().CreateLink(ctx, testLink(code), idem); err != nil {
			t.Fatalf("create %s: %v", code, err)
		}
	}
	for _, m := range c.live() {
		waitFor(t, m.id+" to drop exactly the records past 24 h", func() (bool, string) {
			for key, age := range ages {
				_, found, err := m.store().Idempotency("o1", key)
				if err != nil {
					return false, err.Error()
				}
				if want := age < store.IdempotencyTTL; found != want {
					return false, fmt.Sprintf("%s: record %s found %v; want %v", m.id, key, found, want)
				}
			}
			return true, ""
		})
	}
	c.waitCaughtUp()
	if a, b := dump(t, v1.store()), dump(t, e1.store()); string(a) != string(b) {
		t.Errorf("replicas differ after the expiry")
	}
	if n := v1.node().m.idempotencyExpiries.Get(); n == 0 {
		t.Errorf("expiry entries appended by the leader: got 0")
	}
	if n := e1.node().m.idempotencyExpiries.Get(); n != 0 {
		t.Errorf("expiry entries appended by the non-voter: got %d; want 0 (only the leader sweeps)", n)
	}
	// A young record still answers a retry.
	_, existing, err := e1.node().CreateLink(context.Background(), testLink("idem999"), &store.IdempotencyWrite{Owner: "o1", Key: "young-1", Record: store.Idempotency{CreatedAt: now}})
	if err != nil || existing == nil || string(existing.Response) != "young-1" {
		t.Errorf("retry with a young key: got %+v, %v; want the first answer", existing, err)
	}
}
