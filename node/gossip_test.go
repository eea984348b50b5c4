package node

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
)

func startTestGossip(t *testing.T, name, region string, key []byte) *Gossip {
	t.Helper()
	g, err := StartGossip(GossipConfig{
		BindAddr:  "127.0.0.1:0",
		SecretKey: key,
		Meta:      Meta{Name: name, Region: region, Roles: []Role{RoleVoter}, Version: Version},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Shutdown() })
	return g
}

// Three real memberlist instances over loopback find each other from one
// seed and carry each other's metadata; a graceful leave shows as "left".
func TestGossipMembership(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	var gs []*Gossip
	for i, region := range []string{"us", "eu", "ap"} {
		gs = append(gs, startTestGossip(t, fmt.Sprintf("n%d", i), region, key))
	}
	for _, g := range gs[1:] {
		if _, err := g.Join([]string{gs[0].Addr()}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "all members alive everywhere", 10*time.Second, func() bool {
		for _, g := range gs {
			alive := 0
			for _, m := range g.Members() {
				if m.Status == "alive" {
					alive++
				}
			}
			if alive != 3 {
				return false
			}
		}
		return true
	})
	for _, m := range gs[0].Members() {
		if m.Name == "n1" && (m.Region != "eu" || len(m.Roles) != 1 || m.Roles[0] != RoleVoter) {
			t.Fatalf("metadata of n1: got %+v; want region eu, roles [voter]", m)
		}
	}
	if err := gs[2].Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "n2 shown as left", 10*time.Second, func() bool {
		for _, m := range gs[0].Members() {
			if m.Name == "n2" {
				return m.Status == "left"
			}
		}
		return false
	})
}

// A leaving member's dead message (gossip, UDP) can overtake its direct
// "leaving" message (TCP). The member is first recorded dead; the late
// message must turn that into left, or it stays dead for good.
func TestGossipLeaveIntentAfterDeadIsLeft(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	a := startTestGossip(t, "a", "us", key)
	b := startTestGossip(t, "b", "eu", key)
	if _, err := b.Join([]string{a.Addr()}); err != nil {
		t.Fatal(err)
	}
	status := func() string {
		for _, m := range a.Members() {
			if m.Name == "b" {
				return m.Status
			}
		}
		return ""
	}
	waitUntil(t, "b alive at a", 10*time.Second, func() bool { return status() == "alive" })
	// memberlist's own leave only: the dead message, no Leaving metadata,
	// no direct message.
	if err := b.ml.Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "b recorded dead at a", 10*time.Second, func() bool { return status() == "dead" })
	a.NotifyMsg([]byte(leaveIntent + "b")) // the direct message, arriving late
	if got := status(); got != "left" {
		t.Fatalf("b after its late leaving message: %q; want left", got)
	}
}

// A member with the wrong cluster key cannot join.
func TestGossipWrongKeyRefused(t *testing.T) {
	a := startTestGossip(t, "a", "us", []byte("0123456789abcdef0123456789abcdef"))
	b := startTestGossip(t, "b", "us", []byte("fedcba9876543210fedcba9876543210"))
	if _, err := b.Join([]string{a.Addr()}); err == nil {
		t.Fatal("join with a different cluster key succeeded; want an error")
	}
}

func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two nodes that each made their own salt for today converge on one salt
// through gossip's push/pull, so a visitor hashes the same on both.
func TestGossipSharesSalts(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	var gs []*Gossip
	var salts []*ingest.LocalSalts
	for i := 0; i < 2; i++ {
		s := ingest.NewLocalSalts(time.Now)
		s.Salt(time.Now())
		salts = append(salts, s)
		g, err := StartGossip(GossipConfig{
			BindAddr: "127.0.0.1:0", SecretKey: key,
			Meta:   Meta{Name: fmt.Sprintf("s%d", i), Region: "us", Roles: []Role{RoleEdge}},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Salts:  s,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Shutdown() })
		gs = append(gs, g)
	}
	if salts[0].Salt(time.Now()) == salts[1].Salt(time.Now()) {
		t.Fatal("two fresh salt stores made the same salt")
	}
	if _, err := gs[1].Join([]string{gs[0].Addr()}); err != nil { // join runs a push/pull
		t.Fatal(err)
	}
	waitUntil(t, "one salt for today on both nodes", 10*time.Second, func() bool {
		return salts[0].Salt(time.Now()) == salts[1].Salt(time.Now())
	})
}
