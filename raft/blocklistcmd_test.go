package raft

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/waymark/waymark/store"
)

// TestBlocklistUpdateRefusesBadEntries: a value that is not canonical, an
// unknown kind or op, or a count out of range decodes as corrupt, so every
// replica refuses it alike and nothing reaches a store.
func TestBlocklistUpdateRefusesBadEntries(t *testing.T) {
	add := func(v string, k store.BlockKind) store.BlockChange {
		return store.BlockChange{Entry: store.BlockEntry{Value: v, Kind: k}}
	}
	for name, changes := range map[string][]store.BlockChange{
		"upper case":     {add("Evil.Example", store.BlockKindBlock)},
		"unmasked cidr":  {add("10.0.0.1/8", store.BlockKindBlock)},
		"mapped address": {add("::ffff:10.0.0.1", store.BlockKindBlock)},
		"unknown kind":   {add("evil.example", 7)},
		"bad remove":     {{Remove: true, Entry: store.BlockEntry{Value: "EVIL.example"}}},
		"empty":          {},
	} {
		data := appendBlocklistUpdate(nil, changes)
		if _, _, err := decodeCommand(data); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s: decode: %v; want ErrCorrupt", name, err)
		}
	}
	too := make([]store.BlockChange, MaxBlocklistChanges+1)
	for i := range too {
		too[i] = add("evil.example", store.BlockKindBlock)
	}
	if _, _, err := decodeCommand(appendBlocklistUpdate(nil, too)); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("%d changes: decode: %v; want ErrCorrupt", len(too), err)
	}
	bad := appendBlocklistUpdate(nil, []store.BlockChange{add("evil.example", store.BlockKindBlock)})
	bad[headerLen+1] = 3 // op
	if _, _, err := decodeCommand(bad); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("unknown op: decode: %v; want ErrCorrupt", err)
	}
}

// TestBlocklistReplicates applies updates through a real three-voter
// cluster, one of them through a follower (forwarded), and checks every
// replica's in-memory snapshot, then that a snapshot restore carries it.
func TestBlocklistReplicates(t *testing.T) {
	c := newCluster(t, nil)
	_, leader, follower := c.threeVoters()
	block := func(v string) store.BlockChange {
		return store.BlockChange{Entry: store.BlockEntry{Value: v, Kind: store.BlockKindBlock, Reason: "t", AddedAt: 1}}
	}
	ctx := t.Context()
	if _, err := leader.node().UpdateBlocklist(ctx, []store.BlockChange{block("evil.example"), block("10.0.0.0/8")}); err != nil {
		t.Fatal(err)
	}
	if _, err := follower.node().UpdateBlocklist(ctx, []store.BlockChange{block("worse.example"), {Remove: true, Entry: store.BlockEntry{Value: "10.0.0.0/8"}}}); err != nil {
		t.Fatal(err)
	}
	// The forwarding node waits for its own apply before it returns.
	if bl := follower.store().Blocklist(); !bl.BlocksName("worse.example") {
		t.Error("the forwarding follower does not hold its own update on return")
	}
	for _, m := range c.live() {
		waitFor(t, m.id+" to apply the blocklist", func() (bool, string) {
			bl := m.store().Blocklist()
			h, _ := store.ParseHost("[::ffff:10.0.0.1]")
			ok := bl.Len() == 2 && bl.BlocksName("www.evil.example") && bl.BlocksName("worse.example") && !bl.Blocks(h)
			return ok, fmt.Sprintf("len %d", bl.Len())
		})
	}
	if _, err := leader.node().UpdateBlocklist(ctx, nil); err == nil {
		t.Error("an empty update was accepted")
	}
}

// TestBlocklistUpdateWorstCaseFitsForwarding: the largest entry a writer
// can make (2000 changes of the longest name and reason, with the widest
// time) stays under the 1 MiB a forwarded command may take.
func TestBlocklistUpdateWorstCaseFitsForwarding(t *testing.T) {
	label := strings.Repeat("a", 63)
	name := label + "." + label + "." + label + "." + strings.Repeat("b", 61) // 253 bytes
	if v, err := store.ParseBlockEntry(name); err != nil || v != name || len(name) != 253 {
		t.Fatalf("test name: %q %v (%d bytes)", v, err, len(name))
	}
	changes := make([]store.BlockChange, MaxBlocklistChanges)
	for i := range changes {
		changes[i] = store.BlockChange{Entry: store.BlockEntry{Value: name, Kind: store.BlockKindShortener,
			Reason: strings.Repeat("r", store.MaxBlockReasonLen), AddedAt: math.MinInt64}}
	}
	data := appendBlocklistUpdate(nil, changes)
	if len(data) >= 1<<20 {
		t.Fatalf("worst-case entry is %d bytes; the forwarding limit is %d", len(data), 1<<20)
	}
	if _, _, err := decodeCommand(data); err != nil {
		t.Fatal(err)
	}
	t.Logf("worst case: %d bytes", len(data))
}
