package raft

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/waymark/waymark/store"
)

// TestCreateLinksBulk sends one bulk call through a follower of three
// voters (so the entry and its answer are forwarded) with items that
// apply, clash and repeat an external id, then repeats the call: the
// second answers every item from the external ids and makes nothing.
func TestCreateLinksBulk(t *testing.T) {
	c := newCluster(t, fastTimeouts)
	voters, _, follower := c.threeVoters()
	ctx := context.Background()
	n := follower.node()
	gen, err := n.NewCode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	item := func(code, ext string) store.BulkItem {
		return store.BulkItem{Link: *testLink(code), ExternalID: ext}
	}
	items := []store.BulkItem{
		item("bulk-a", "src:a"),
		item("bulk-a", ""),      // the same code again: refused alone
		item(gen, "src:gen"),    // a generated code
		item("bulk-c", "src:a"), // src:a's link already, from item 0 of this entry
		item("bulk-d", ""),
	}
	items[4].Link.NoForwardQuery = true
	rs, index, err := n.CreateLinks(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(items) || index == 0 {
		t.Fatalf("got %d results, index %d; want %d results", len(rs), index, len(items))
	}
	want := []struct {
		code     string
		existing bool
		taken    bool
	}{{"bulk-a", false, false}, {"", false, true}, {gen, false, false}, {"bulk-a", true, false}, {"bulk-d", false, false}}
	for i, w := range want {
		r := rs[i]
		if w.taken {
			if !errors.Is(r.Err, store.ErrCodeTaken) {
				t.Fatalf("item %d: got %+v; want ErrCodeTaken", i, r)
			}
			continue
		}
		if r.Err != nil || r.Link.Code != w.code || r.Existing != w.existing || r.Link.Index != index {
			t.Fatalf("item %d: got %+v (index %d); want code %s existing %v at index %d", i, r, r.Link.Index, w.code, w.existing, index)
		}
	}
	if !rs[4].Link.NoForwardQuery || rs[0].Link.NoForwardQuery {
		t.Fatalf("no_forward_query: got %v and %v; want true only for bulk-d", rs[4].Link.NoForwardQuery, rs[0].Link.NoForwardQuery)
	}
	c.waitLinks("bulk-a", gen, "bulk-d")
	c.waitCaughtUp()
	for _, v := range voters {
		st := v.store()
		for ext, code := range map[string]string{"src:a": "bulk-a", "src:gen": gen} {
			got, found, err := st.ExternalID("o1", ext)
			if err != nil || !found || got != code {
				t.Fatalf("%s: external id %s: got %q %v %v; want %s", v.id, ext, got, found, err, code)
			}
		}
		if _, found, _ := st.ExternalID("o2", "src:a"); found {
			t.Fatalf("%s: external ids leak across owners", v.id)
		}
		var l store.Link
		if found, _ := st.GetLink([]byte("bulk-c"), &l); found {
			t.Fatalf("%s: bulk-c was made although its external id named bulk-a", v.id)
		}
	}

	// The same call again: both external ids answer their links, the
	// items without one are refused as taken.
	again, _, err := n.CreateLinks(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		switch i {
		case 0, 2, 3:
			if !r.Existing || r.Err != nil || r.Link.Code != want[i].code {
				t.Fatalf("rerun item %d: got %+v; want existing %s", i, r, want[i].code)
			}
		default:
			if !errors.Is(r.Err, store.ErrCodeTaken) {
				t.Fatalf("rerun item %d: got %+v; want ErrCodeTaken", i, r)
			}
		}
	}
}

// TestCreateLinksBulkSplits checks that items whose encoding passes
// maxBulkEntryBytes go to the log in several entries, in order.
func TestCreateLinksBulkSplits(t *testing.T) {
	tn := newTestNode(t, nil)
	long := "https://example.com/" + strings.Repeat("p", 2000)
	var items []store.BulkItem
	for i := range 300 { // ~600 KB: three entries
		l := *testLink(fmt.Sprintf("split-%03d", i))
		l.URL = long
		items = append(items, store.BulkItem{Link: l})
	}
	rs, _, err := tn.n.CreateLinks(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[uint64]bool{}
	for i, r := range rs {
		if r.Err != nil || r.Link.Code != items[i].Link.Code {
			t.Fatalf("item %d: %+v", i, r)
		}
		entries[r.Link.Index] = true
	}
	if len(entries) != 3 {
		t.Fatalf("300 items of 2 KB went in %d entries; want 3 (%d KB each at most)", len(entries), maxBulkEntryBytes>>10)
	}
}

// TestDecodeCreateLinksBulkRefuses checks the decoder's bounds.
func TestDecodeCreateLinksBulkRefuses(t *testing.T) {
	one := appendCommand(nil, &createLinksBulkCmd{Items: []store.BulkItem{{Link: *testLink("a")}}})
	cases := map[string][]byte{
		"no items":       {byte(cmdCreateLinksBulk), 1, 0, 0},
		"too many items": appendUvarint([]byte{byte(cmdCreateLinksBulk), 1, 0}, MaxBulkItems+1),
		"unknown flag":   append(one[:len(one)-1:len(one)-1], 0x80),
		"trailing":       append(one[:len(one):len(one)], 0),
		"domain flag in version 1": asVersion(appendCommand(nil, &createLinksBulkCmd{Items: []store.BulkItem{
			{Link: store.Link{Code: "go.acme.com/a", URL: "u", Redirect: 302}}}}), 1),
		"tags flag in version 1": asVersion(appendCommand(nil, &createLinksBulkCmd{Items: []store.BulkItem{
			{Link: store.Link{Code: "a", URL: "u", Redirect: 302, Tags: "sms"}}}}), 1),
		"non-canonical domain": appendCommand(nil, &createLinksBulkCmd{Items: []store.BulkItem{
			{Link: store.Link{Code: "Go.Acme.com/a", URL: "u", Redirect: 302}}}}),
		"tags out of order": appendCommand(nil, &createLinksBulkCmd{Items: []store.BulkItem{
			{Link: store.Link{Code: "a", URL: "u", Redirect: 302, Tags: "sms,aa"}}}}),
		"long external": appendCommand(nil, &createLinksBulkCmd{Items: []store.BulkItem{
			{Link: *testLink("a"), ExternalID: strings.Repeat("x", store.MaxExternalIDLen+1)}}}),
	}
	for name, b := range cases {
		if _, _, err := decodeCommand(b); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s: got %v; want ErrCorrupt", name, err)
		}
	}
}

// BenchmarkBulkCreate measures acknowledged bulk creates on three voters
// over real TCP raft (bolt fsync included): one op is one call of
// MaxBulkItems links with generated codes and external ids, sent to the
// leader, or through a follower that forwards it.
func BenchmarkBulkCreate(b *testing.B) {
	c := newCluster(b, nil)
	_, leader, follower := c.threeVoters()
	for _, via := range []*member{leader, follower} {
		name := "leader"
		if via == follower {
			name = "follower"
		}
		b.Run("via="+name, func(b *testing.B) {
			n, ctx := via.node(), context.Background()
			items := make([]store.BulkItem, MaxBulkItems)
			b.ReportAllocs()
			b.ResetTimer()
			for op := range b.N {
				for i := range items {
					code, err := n.NewCode(ctx)
					if err != nil {
						b.Fatal(err)
					}
					items[i] = store.BulkItem{ExternalID: fmt.Sprintf("bench:%s:%d:%d", name, op, i), Link: store.Link{
						Code: code, URL: "https://example.com/landing?utm_source=bench", Owner: "o1",
						CreatedAt: 1700000000000, UpdatedAt: 1700000000000, Status: store.StatusActive,
					}}
				}
				rs, _, err := n.CreateLinks(ctx, items)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range rs {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			b.ReportMetric(float64(b.N*MaxBulkItems)/b.Elapsed().Seconds(), "links/s")
		})
	}
}
