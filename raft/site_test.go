package raft

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/waymark/waymark/store"
)

func goal(id, event, path string) *store.Goal {
	g := &store.Goal{ID: id, EventName: event, PagePath: path}
	if err := store.NormalizeGoal(g); err != nil {
		panic("BUG: test goal: " + err.Error())
	}
	return g
}

// Refusals that depend on what the site holds are the command's answer,
// not a store failure: the rest of the batch commits and the FSM goes on.
func TestFSMSiteRefusalsDoNotHalt(t *testing.T) {
	f, st, ev := newTestFSM(t)
	cmds := [][]byte{
		appendCreateSite(nil, &store.Site{ID: "s1", Domain: "a.example", Timezone: "UTC", Owner: "o1"}),
		appendUpdateSite(nil, &store.SitePatch{SiteID: "s1", Owner: "o1", AddGoal: goal("g1", "Signup", "")}),
		appendUpdateSite(nil, &store.SitePatch{SiteID: "nope", Owner: "o1", SetIgnoreDNT: true}),
		appendUpdateSite(nil, &store.SitePatch{SiteID: "s1", Owner: "o2", SetIgnoreDNT: true}),
		appendUpdateSite(nil, &store.SitePatch{SiteID: "s1", Owner: "o1", AddGoal: goal("g2", "Signup", "")}),
		appendUpdateSite(nil, &store.SitePatch{SiteID: "s1", Owner: "o1", DeleteGoal: "g9"}),
	}
	for i := range store.MaxGoals - 1 {
		cmds = append(cmds, appendUpdateSite(nil, &store.SitePatch{SiteID: "s1", AddGoal: goal(fmt.Sprintf("p%d", i), "", fmt.Sprintf("/p/%d", i))}))
	}
	cmds = append(cmds,
		appendUpdateSite(nil, &store.SitePatch{SiteID: "s1", AddGoal: goal("over", "", "/over")}),
		appendUpdateSite(nil, &store.SitePatch{SiteID: "s1", Owner: "o1", SetIgnoreDNT: true, IgnoreDNT: true}),
	)
	resps := f.ApplyBatch(logsOf(1, cmds...))
	wantErr := map[int]error{2: store.ErrNotFound, 3: store.ErrNotFound, 4: store.ErrGoalExists, 5: store.ErrNotFound, len(cmds) - 2: store.ErrTooManyGoals}
	for i := range resps {
		res := result(t, resps[i])
		if want := wantErr[i]; want != nil {
			if !errors.Is(res.Err, want) || res.Site != nil {
				t.Errorf("entry %d: got %v, site %v; want %v and no site", i+1, res.Err, res.Site, want)
			}
			continue
		}
		if res.Err != nil {
			t.Fatalf("entry %d: %v", i+1, res.Err)
		}
	}
	if err := f.haltErr(); err != nil {
		t.Fatalf("FSM halted on refused site edits: %v", err)
	}
	got, found, err := st.Site("s1")
	if err != nil || !found || !got.IgnoreDNT || len(got.Goals) != store.MaxGoals || got.Goals[0].ID != "g1" {
		t.Fatalf("site after the batch: %+v, %v, %v; want DNT ignored and %d goals", got, found, err, store.MaxGoals)
	}
	if last := result(t, resps[len(resps)-1]).Site; last == nil || !reflect.DeepEqual(*last, got) {
		t.Errorf("answer of the last edit: got %+v; want the stored site", last)
	}
	// OnSite saw the creation and every accepted edit, the last one with
	// the final record.
	if n := len(ev.sites); n != 1+1+(store.MaxGoals-1)+1 || !reflect.DeepEqual(ev.sites[n-1], got) {
		t.Errorf("OnSite: %d calls, last %+v; want %d, ending with the stored site", n, ev.sites[n-1], store.MaxGoals+2)
	}
}

// TestClusterSiteEdits runs site edits through real raft: one voter and
// two non-voter edges that forward their writes to it.
func TestClusterSiteEdits(t *testing.T) {
	c := newCluster(t, nil)
	v1 := c.add("v1", "us")
	c.bootstrap(v1)
	e1, e2 := c.add("e1", "eu"), c.add("e2", "ap")
	for _, e := range []*member{e1, e2} {
		c.onLeader("add "+e.id, func(n *Node) error { return n.AddNonvoter(e.id, e.node().Addr()) })
	}
	c.leader()
	ctx := testCtx(t)
	c.onLeader("create site", func(n *Node) error {
		_, err := n.CreateSite(ctx, &store.Site{ID: "s1", Domain: "a.example", Timezone: "UTC", Owner: "o1", CreatedAt: 1})
		return err
	})

	// A goal added through e1 (forwarded to v1) is on every replica, and
	// e1's answer is the stored site.
	waitSite(t, c, "s1", func(s store.Site) bool { return true })
	signup := goal("g1", "Signup", "")
	site, index, err := e1.node().UpdateSite(ctx, &store.SitePatch{SiteID: "s1", Owner: "o1", AddGoal: signup})
	if err != nil || index == 0 || len(site.Goals) != 1 || site.Goals[0] != *signup {
		t.Fatalf("add goal through e1: got %+v, %d, %v", site, index, err)
	}
	waitSite(t, c, "s1", func(s store.Site) bool { return reflect.DeepEqual(s, site) })

	// A settings edit through the other edge replicates too.
	site, _, err = e2.node().UpdateSite(ctx, &store.SitePatch{SiteID: "s1", Owner: "o1", SetIgnoreDNT: true, IgnoreDNT: true, SetTimezone: true, Timezone: "Europe/Paris"})
	if err != nil || !site.IgnoreDNT || site.Timezone != "Europe/Paris" || len(site.Goals) != 1 {
		t.Fatalf("settings through e2: got %+v, %v", site, err)
	}
	waitSite(t, c, "s1", func(s store.Site) bool { return reflect.DeepEqual(s, site) })

	// Refusals keep their identity through forwarding and change nothing
	// anywhere.
	c.waitCaughtUp()
	before := map[string][]byte{}
	for _, m := range c.live() {
		before[m.id] = siteRecord(t, m.store(), "s1")
	}
	for name, tc := range map[string]struct {
		p    store.SitePatch
		want error
	}{
		"another owner's site": {store.SitePatch{SiteID: "s1", Owner: "o2", SetIgnoreDNT: true}, store.ErrNotFound},
		"unknown site":         {store.SitePatch{SiteID: "s9", Owner: "o1", SetIgnoreDNT: true}, store.ErrNotFound},
		"duplicate event goal": {store.SitePatch{SiteID: "s1", Owner: "o1", AddGoal: goal("g2", "Signup", "")}, store.ErrGoalExists},
		"unknown goal":         {store.SitePatch{SiteID: "s1", Owner: "o1", DeleteGoal: "zz"}, store.ErrNotFound},
		"invalid goal":         {store.SitePatch{SiteID: "s1", Owner: "o1", AddGoal: &store.Goal{ID: "g3", EventName: "engagement", DisplayName: "e"}}, store.ErrInvalidSiteEdit},
	} {
		if _, _, err := e2.node().UpdateSite(ctx, &tc.p); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v; want %v", name, err, tc.want)
		}
	}
	c.waitCaughtUp()
	for _, m := range c.live() {
		if got := siteRecord(t, m.store(), "s1"); !bytes.Equal(got, before[m.id]) {
			t.Errorf("%s: site record changed by refused edits", m.id)
		}
		if ok, detail := m.node().Ready(); !ok {
			t.Errorf("%s not ready after refused edits: %s", m.id, detail)
		}
	}

	// Deleting through e1 replicates.
	site, _, err = e1.node().UpdateSite(ctx, &store.SitePatch{SiteID: "s1", Owner: "o1", DeleteGoal: "g1"})
	if err != nil || site.Goals != nil || !site.IgnoreDNT {
		t.Fatalf("delete goal through e1: got %+v, %v", site, err)
	}
	waitSite(t, c, "s1", func(s store.Site) bool { return reflect.DeepEqual(s, site) })
}

// waitSite waits until every live store's copy of site id satisfies ok.
func waitSite(t *testing.T, c *cluster, id string, ok func(store.Site) bool) {
	t.Helper()
	for _, m := range c.live() {
		st := m.store()
		waitFor(t, m.id+" to apply the site edit", func() (bool, string) {
			s, found, err := st.Site(id)
			if err != nil || !found {
				return false, fmt.Sprintf("%s: found %v err %v", m.id, found, err)
			}
			return ok(s), fmt.Sprintf("%s holds %+v", m.id, s)
		})
	}
}

func siteRecord(t *testing.T, st *store.Store, id string) []byte {
	t.Helper()
	s, found, err := st.Site(id)
	if err != nil || !found {
		t.Fatalf("site %s: %v %v", id, found, err)
	}
	return store.AppendSite(nil, &s)
}
