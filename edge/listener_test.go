package edge

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

// Past the per-address cap a new connection gets a 429 problem and is
// closed; the connections already open keep working, and once one closes
// its slot is free again.
func TestListenerConnsPerIPCap(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxConnsPerIP = 3 })
	var held []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A request per connection, so each is surely accepted.
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d: %v %v", i, resp, err)
		}
		resp.Body.Close()
		held = append(held, c)
	}
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("fourth connection: no answer: %v", err)
	}
	var p problemDoc
	json.NewDecoder(resp.Body).Decode(&p)
	c.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Content-Type") != "application/problem+json" ||
		p.Type != "/problems/too-many-connections" || p.Title != "Too many connections" || p.Status != 429 {
		t.Fatalf("fourth connection: got %d %q %+v; want a 429 too-many-connections problem", resp.StatusCode, resp.Header.Get("Content-Type"), p)
	}
	if n := counterValue(e.set, "waymark_http_connections_rejected_total"); n != 1 {
		t.Errorf("rejected connections: got %d; want 1", n)
	}
	held[0].Close()
	waitUntil(t, "a slot to free up", func() bool {
		r := e.do("GET", "/healthz", "", "")
		return r.status == 200
	})
}

// brokenListener is a real listener whose accepts start failing for good,
// as a listener does when its socket is torn down under it (a non-resource
// error fasthttp cannot recover from).
type brokenListener struct {
	net.Listener
	broken chan struct{}
}

var errListenerBroken = errors.New("listener socket is gone")

func (l *brokenListener) Accept() (net.Conn, error) {
	select {
	case <-l.broken:
		return nil, errListenerBroken
	default:
	}
	return l.Listener.Accept()
}

// A listener that dies ends Serve with the error and fails readiness.
func TestListenerDeathFailsReadiness(t *testing.T) {
	e := newEnv(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bl := &brokenListener{Listener: ln, broken: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- e.srv.Serve(bl) }()
	if ok, detail := e.srv.ListenerHealth(); !ok {
		t.Fatalf("before: %s", detail)
	}
	close(bl.broken)
	// Wake the accept. An accept already waiting takes this connection and
	// serves it, so it is closed before the server's shutdown waits for it.
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		defer c.Close()
	}
	select {
	case err := <-done:
		if !errors.Is(err, errListenerBroken) {
			t.Fatalf("Serve: got %v; want the listener's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its listener died")
	}
	if ok, detail := e.srv.ListenerHealth(); ok {
		t.Fatalf("after the listener died: healthy (%s)", detail)
	}
}

// EMFILE and friends are retried; a closed listener or anything else is
// not.
func TestTemporaryAccept(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, true},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ENFILE)}, true},
		{net.ErrClosed, false},
		{errListenerBroken, false},
	} {
		if got := temporaryAccept(c.err); got != c.want {
			t.Errorf("temporaryAccept(%v) = %v; want %v", c.err, got, c.want)
		}
	}
}
