package raft

import (
	"errors"
	"reflect"
	"testing"

	"github.com/waymark/waymark/store"
)

// An operator takedown sent through a follower commits with its history
// record in the same entry on every replica, evicts the code from every
// replica's cache (OnChange), and neither an owner's edit nor the
// click-limit hook's conditional edit (both forwarded to the leader, their
// refusals carried back as sentinels) can undo it.
func TestTakedownAuditOnEveryReplica(t *testing.T) {
	c := newCluster(t, nil)
	voters, _, follower := c.threeVoters()
	code := createThrough(t, follower, "https://example.com/audited")
	c.waitLinks(code)
	ctx := testCtx(t)
	n := follower.node()

	blocked, err := n.UpdateLink(ctx, &store.LinkPatch{Code: code, UpdatedAt: 2_000, SetStatus: true, Status: store.StatusBlocked,
		OnlyFrom: store.MaskOf(store.StatusActive), Reason: "phishing, ticket 7"})
	if err != nil || blocked.Status != store.StatusBlocked {
		t.Fatalf("block through %s: %+v, %v", follower.id, blocked, err)
	}
	if _, err := n.UpdateLink(ctx, &store.LinkPatch{Code: code, Owner: "o1", UpdatedAt: 3_000, SetStatus: true, Status: store.StatusDisabled}); !errors.Is(err, store.ErrLinkLocked) {
		t.Errorf("owner delete of a blocked link: %v; want ErrLinkLocked", err)
	}
	if _, err := n.UpdateLink(ctx, &store.LinkPatch{Code: code, Actor: store.ActorSystem, UpdatedAt: 4_000, SetStatus: true, Status: store.StatusLimited,
		OnlyFrom: store.MaskOf(store.StatusActive)}); !errors.Is(err, store.ErrStatusChanged) {
		t.Errorf("click limit over a block: %v; want ErrStatusChanged", err)
	}
	c.waitCaughtUp()

	want := []store.HistoryEntry{
		{Code: code, At: 1700000000000, Actor: "o1", Action: "create", Changes: []store.FieldChange{
			{Field: "url", New: "https://example.com/audited"}, {Field: "status", New: "active"}, {Field: "redirect", New: "302"}}},
		{Code: code, Index: blocked.Index, At: 2_000, Actor: "operator", Action: "block", Reason: "phishing, ticket 7", Changes: []store.FieldChange{
			{Field: "status", Old: "active", New: "blocked"}}},
	}
	for _, m := range voters {
		if got := mustGetLink(t, m.store(), code); got.Status != store.StatusBlocked || got.Index != blocked.Index {
			t.Errorf("%s: link %+v; want blocked at index %d", m.id, got, blocked.Index)
		}
		got, err := m.store().LinkHistory(code, 0)
		if err != nil || len(got) != 2 {
			t.Fatalf("%s: history %+v, %v; want 2 records", m.id, got, err)
		}
		want[0].Index = got[0].Index // the create's index is the cluster's
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: history\n got %+v\nwant %+v", m.id, got, want)
		}
		// Create and block evict; the refused edits change nothing.
		if n := m.ev.changeCount(code); n != 2 {
			t.Errorf("%s: %d cache evictions of %s; want 2 (create, block)", m.id, n, code)
		}
	}
	if want[0].Index == 0 || want[0].Index >= blocked.Index {
		t.Errorf("create recorded at index %d; want between 0 and the block's %d", want[0].Index, blocked.Index)
	}
}
