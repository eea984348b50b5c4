package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultNet sits between the nodes' Raft transports: every node advertises
// (--raft-advertise) the address of its own front, and the front forwards
// to the node's bound --raft-addr. Raft between nodes is TLS, so the front
// cannot read who is dialing from the stream; it finds the process that
// owns the other end of the connection instead (/proc/net/tcp gives the
// socket's inode, /proc/PID/fd the process holding it), so the test can
// cut, delay or drop one direction between any two nodes. Gossip and the
// internal HTTP calls do not go through it: these are Raft partitions.
type faultNet struct {
	t      *testing.T
	mu     sync.Mutex
	rules  map[[2]string]linkRule // [from, to]: what happens to messages from -> to
	conns  map[*faultConn]struct{}
	front  map[string]*raftFront // by the name of the node behind it
	seen   map[[2]string]int     // connections accepted, by [src, dst]
	pids   map[int]string        // node processes, by pid
	closed bool
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
	f := &faultNet{t: t, rules: map[[2]string]linkRule{}, conns: map[*faultConn]struct{}{}, front: map[string]*raftFront{}, seen: map[[2]string]int{}, pids: map[int]string{}}
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
	f.closed = true
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

// setPid names the node process pid (a restart brings a new one).
func (f *faultNet) setPid(name string, pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, n := range f.pids {
		if n == name {
			delete(f.pids, p)
		}
	}
	f.pids[pid] = name
}

// serve learns which node is dialing, then pipes both directions under
// the rules of that pair.
func (f *faultNet) serve(fr *raftFront, client net.Conn) {
	// A node dials as soon as its Raft starts, maybe before the test has
	// named its pid: look again for a moment.
	var src string
	var err error
	for try := 0; try < 40; try++ {
		if src, err = f.dialer(client); err == nil {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if err != nil {
		f.mu.Lock()
		closed := f.closed
		f.mu.Unlock()
		if !closed {
			f.t.Logf("faultnet: cannot tell who dialled %s: %v", fr.name, err)
		}
		client.Close()
		return
	}
	c := &faultConn{src: src, dst: fr.name, client: client}
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
	go func() { pipe(back, client, fwd); done <- struct{}{} }()
	go func() { pipe(client, back, rev); done <- struct{}{} }()
	<-done
	c.close()
	<-done
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

// dialer finds the node whose process owns the far end of conn, an
// accepted loopback connection: the socket whose local address is conn's
// remote one and whose peer is conn's local one.
func (f *faultNet) dialer(conn net.Conn) (string, error) {
	want := procTCPAddr(conn.RemoteAddr().(*net.TCPAddr)) + " " + procTCPAddr(conn.LocalAddr().(*net.TCPAddr))
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return "", err
	}
	inode := ""
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 9 && fields[1]+" "+fields[2] == want {
			inode = fields[9]
			break
		}
	}
	if inode == "" || inode == "0" {
		return "", fmt.Errorf("no socket %s in /proc/net/tcp", want)
	}
	target := "socket:[" + inode + "]"
	f.mu.Lock()
	pids := make(map[int]string, len(f.pids))
	for p, n := range f.pids {
		pids[p] = n
	}
	f.mu.Unlock()
	for pid, name := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(dir + "/" + fd.Name()); err == nil && l == target {
				return name, nil
			}
		}
	}
	return "", fmt.Errorf("socket %s (inode %s) belongs to no node process", want, inode)
}

// procTCPAddr writes an IPv4 address as /proc/net/tcp does: the address
// as a little-endian hex word, the port in hex.
func procTCPAddr(a *net.TCPAddr) string {
	ip := a.IP.To4()
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
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
// front by another node (found by the socket's owner).
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
