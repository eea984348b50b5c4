package raft

import (
	"errors"
	"fmt"
	"testing"

	"github.com/waymark/waymark/store"
)

// TestDomainUpdateThroughFollower: a follower forwards domain_update and a
// create on the domain; every replica holds the domain, the approved set
// and the "domain/code" link, and the FSM refuses creates the domain does
// not allow with the sentinels the edge maps to 403.
func TestDomainUpdateThroughFollower(t *testing.T) {
	c := newCluster(t, nil)
	_, leader, follower := c.threeVoters()
	ctx := t.Context()
	d, _, err := follower.node().UpdateDomain(ctx, &store.DomainChange{Op: store.DomainRegister, Name: "go.acme.com", Owner: "o1", At: 5})
	if err != nil || d.Status != store.DomainPending || d.Owner != "o1" {
		t.Fatalf("register through the follower: %+v %v", d, err)
	}
	link := store.Link{Code: "go.acme.com/launch", URL: "https://acme.example/", Owner: "o1", CreatedAt: 6, Redirect: 302}
	if _, _, err := follower.node().CreateLink(ctx, &link, nil); !errors.Is(err, store.ErrDomainNotApproved) {
		t.Fatalf("create on the pending domain: %v; want ErrDomainNotApproved", err)
	}
	if _, _, err := follower.node().UpdateDomain(ctx, &store.DomainChange{Op: store.DomainRegister, Name: "go.acme.com", Owner: "o2", At: 6}); !errors.Is(err, store.ErrDomainTaken) {
		t.Fatalf("another owner registers it: %v; want ErrDomainTaken", err)
	}
	if d, _, err = leader.node().UpdateDomain(ctx, &store.DomainChange{Op: store.DomainApprove, Name: "go.acme.com", At: 7}); err != nil || d.ApprovedAt != 7 {
		t.Fatalf("approve: %+v %v", d, err)
	}
	other := link
	other.Owner = "o2"
	if _, _, err := follower.node().CreateLink(ctx, &other, nil); !errors.Is(err, store.ErrDomainNotOwned) {
		t.Fatalf("another owner creates on it: %v; want ErrDomainNotOwned", err)
	}
	if _, _, err := follower.node().CreateLink(ctx, &link, nil); err != nil {
		t.Fatalf("create on the approved domain: %v", err)
	}
	plain := link
	plain.Code = "launch"
	plain.URL = "https://plain.example/"
	if _, _, err := follower.node().CreateLink(ctx, &plain, nil); err != nil {
		t.Fatalf("the same alias on the default domain: %v", err)
	}
	for _, m := range c.live() {
		waitFor(t, m.id+" to apply the domain links", func() (bool, string) {
			var a, b store.Link
			fa, _ := m.store().GetLink([]byte("go.acme.com/launch"), &a)
			fb, _ := m.store().GetLink([]byte("launch"), &b)
			owner, ok := m.store().ApprovedDomains().Owner([]byte("go.acme.com"))
			return fa && fb && a.URL == link.URL && b.URL == plain.URL && ok && owner == "o1", fmt.Sprintf("links %v %v, approved %v", fa, fb, ok)
		})
	}
	// Deleting the domain takes it out of every replica's approved set.
	if _, _, err := follower.node().UpdateDomain(ctx, &store.DomainChange{Op: store.DomainDelete, Name: "go.acme.com", Owner: "o1", At: 8}); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.live() {
		waitFor(t, m.id+" to drop the domain", func() (bool, string) {
			return m.store().ApprovedDomains().Len() == 0, "still approved"
		})
	}
	if _, _, err := leader.node().UpdateDomain(ctx, &store.DomainChange{Op: 9, Name: "go.acme.com", At: 8}); err == nil {
		t.Error("an unknown operation was accepted")
	}
}
