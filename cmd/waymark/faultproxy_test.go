package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// faultNet sits between the nodes' Raft transports: every node advertises
// (--raft-advertise) the address of its own front, and the front forwards
// to the node's bound --raft-addr. A connection's source node is read from
// the first RPC it carries (hashicorp/raft puts the sender's ID in every
// RPC header), so the test can cut, delay or drop one direction between
// any two nodes. Gossip and the internal HTTP calls do not go through it:
// these are Raft partitions.
type faultNet struct {
	t     *testing.T
	mu    sync.Mutex
	rules map[[2]string]linkRule // [from, to]: what happens to messages from -> to
	conns map[*faultConn]struct{}
	front map[string]*raftFront // by the name of the node behind it
	seen  map[[2]string]int     // connections accepted, by [src, dst]
}

// linkRule is the fate of the messages sent from one node to another.
type linkRule struct {
	drop  bool
	delay time.Duration
}

// raftFront is the listener other nodes dial to reach one node's Raft.
type raftFront struct {
	name    string
	ln      net.Listener
	backend string // the node's bound raft address
}

// faultConn is one proxied connection, src dialing dst.
type faultConn struct {
	src, dst     string
	client, back net.Conn
	once         sync.Once
}

func (c *faultConn) close() {
	c.once.Do(func() {
		c.client.Close()
		if c.back != nil {
			c.back.Close()
		}
	})
}

func newFaultNet(t *testing.T) *faultNet {
	f := &faultNet{t: t, rules: map[[2]string]linkRule{}, conns: map[*faultConn]struct{}{}, front: map[string]*raftFront{}, seen: map[[2]string]int{}}
	t.Cleanup(f.close)
	return f
}

// add opens the front of node name, forwarding to backend; it returns the
// address the node must advertise.
func (f *faultNet) add(name, backend string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	fr := &raftFront{name: name, ln: ln, backend: backend}
	f.mu.Lock()
	f.front[name] = fr
	f.mu.Unlock()
	go f.accept(fr)
	return ln.Addr().String()
}

func (f *faultNet) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fr := range f.front {
		fr.ln.Close()
	}
	for c := range f.conns {
		c.close()
	}
}

func (f *faultNet) accept(fr *raftFront) {
	for {
		conn, err := fr.ln.Accept()
		if err != nil {
			return
		}
		go f.serve(fr, conn)
	}
}

// rpcHeader is the part of every hashicorp/raft request the front reads:
// the embedded raft.RPCHeader, whose fields msgpack inlines.
type rpcHeader struct {
	ID []byte
}

// serve reads the first RPC to learn who is dialing, then pipes both
// directions under the rules of that pair.
func (f *faultNet) serve(fr *raftFront, client net.Conn) {
	var first bytes.Buffer
	client.SetReadDeadline(time.Now().Add(30 * time.Second))
	tee := io.TeeReader(client, &first)
	var typ [1]byte
	var hdr rpcHeader
	if _, err := io.ReadFull(tee, typ[:]); err != nil {
		client.Close()
		return
	}
	if err := codec.NewDecoder(tee, &codec.MsgpackHandle{}).Decode(&hdr); err != nil || len(hdr.ID) == 0 {
		f.t.Logf("faultnet: cannot read the sender of a raft connection to %s: %v", fr.name, err)
		client.Close()
		return
	}
	client.SetReadDeadline(time.Time{})
	c := &faultConn{src: string(hdr.ID), dst: fr.name, client: client}
	back, err := net.DialTimeout("tcp", fr.backend, 2*time.Second)
	if err != nil {
		client.Close()
		return
	}
	c.back = back
	f.mu.Lock()
	if _, open := f.front[fr.name]; !open {
		f.mu.Unlock()
		c.close()
		return
	}
	f.conns[c] = struct{}{}
	f.seen[[2]string{c.src, c.dst}]++
	fwd, rev := f.rules[[2]string{c.src, c.dst}], f.rules[[2]string{c.dst, c.src}]
	f.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { pipe(back, io.MultiReader(&first, client), fwd); done <- struct{}{} }()
	go func() { pipe(client, back, rev); done <- struct{}{} }()
	<-done
	c.close()
	<-done
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

// pipe copies src to dst under rule: dropped bytes are read and thrown
// away (a black hole, as a lost packet stream looks to TCP's peer), and
// delayed ones are written after rule.delay, in order.
func pipe(dst io.Writer, src io.Reader, rule linkRule) {
	switch {
	case rule.drop:
		io.Copy(io.Discard, src)
		return
	case rule.delay == 0:
		io.Copy(dst, src)
		return
	}
	type chunk struct {
		at time.Time
		b  []byte
	}
	ch := make(chan chunk, 4096)
	go func() {
		for c := range ch {
			if d := time.Until(c.at); d > 0 {
				time.Sleep(d) // the simulated network latency itself
			}
			if _, err := dst.Write(c.b); err != nil {
				for range ch {
				}
				return
			}
		}
	}()
	defer close(ch)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			ch <- chunk{at: time.Now().Add(rule.delay), b: append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			return
		}
	}
}

// set changes the rules of the given directed pairs and closes their open
// connections, so Raft redials under the new rules (a half-dropped stream
// cannot be resumed without corrupting its framing).
func (f *faultNet) set(rule linkRule, pairs ...[2]string) {
	f.mu.Lock()
	touched := map[[2]string]bool{}
	for _, p := range pairs {
		if rule == (linkRule{}) {
			delete(f.rules, p)
		} else {
			f.rules[p] = rule
		}
		touched[p], touched[[2]string{p[1], p[0]}] = true, true
	}
	var stale []*faultConn
	for c := range f.conns {
		if touched[[2]string{c.src, c.dst}] {
			stale = append(stale, c)
		}
	}
	f.mu.Unlock()
	for _, c := range stale {
		c.close()
	}
}

// partition cuts every message between group a and group b, both ways.
func (f *faultNet) partition(a, b []string) {
	f.set(linkRule{drop: true}, crossPairs(a, b)...)
}

// dropOneWay loses the messages from -> to only.
func (f *faultNet) dropOneWay(from, to string) {
	f.set(linkRule{drop: true}, [2]string{from, to})
}

// delayAll delays every message between any two of names.
func (f *faultNet) delayAll(d time.Duration, names []string) {
	f.set(linkRule{delay: d}, crossPairs(names, names)...)
}

// heal removes every rule.
func (f *faultNet) heal() {
	f.mu.Lock()
	var pairs [][2]string
	for p := range f.rules {
		pairs = append(pairs, p)
	}
	f.mu.Unlock()
	f.set(linkRule{}, pairs...)
}

// sawAll reports whether every one of names has been dialled through its
// front by another node named in the connection's first RPC.
func (f *faultNet) sawAll(names []string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	dst := map[string]bool{}
	for p := range f.seen {
		dst[p[1]] = true
	}
	for _, n := range names {
		if !dst[n] {
			return false
		}
	}
	return true
}

func (f *faultNet) describe() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("%d rules, %d open connections", len(f.rules), len(f.conns))
}

func crossPairs(a, b []string) [][2]string {
	var out [][2]string
	for _, x := range a {
		for _, y := range b {
			if x != y {
				out = append(out, [2]string{x, y}, [2]string{y, x})
			}
		}
	}
	return out
}

// freePort reserves a loopback port from the OS for a node's raft bind
// address, which must stay the same across restarts behind its front.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
