package edge

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// connPair returns a deadlineConn and the plain other end of a loopback
// TCP connection.
func connPair(t *testing.T) (*deadlineConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := deadlineListener{Listener: ln}.Accept()
		accepted <- c
	}()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := (<-accepted).(*deadlineConn)
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c, peer
}

// waitUntil polls cond until it holds or ten seconds pass.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDeadlineConnLaterDeadlineKeepsReading(t *testing.T) {
	c, peer := connPair(t)
	c.SetReadDeadline(time.Now().Add(time.Millisecond)) // armed on the socket
	want := time.Now().Add(time.Minute)
	c.SetReadDeadline(want) // later: recorded only
	if got := c.read.armed.Load(); got == want.UnixNano() {
		t.Fatalf("a later deadline was armed at once; want it deferred")
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := c.Read(make([]byte, 8))
		done <- result{n, err}
	}()
	// The socket's 1 ms deadline fires under the pending Read, which must
	// move it to the wanted one and keep waiting.
	waitUntil(t, "the socket deadline to move", func() bool { return c.read.armed.Load() == want.UnixNano() })
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.n != 1 || r.err != nil {
		t.Fatalf("Read: got %d, %v; want 1, nil", r.n, r.err)
	}
}

func TestDeadlineConnEarlierDeadlineTimesOut(t *testing.T) {
	c, _ := connPair(t)
	c.SetReadDeadline(time.Now().Add(time.Minute))
	c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	_, err := c.Read(make([]byte, 8))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read: got %v; want a timeout", err)
	}
}

func TestDeadlineConnDeadlineFromAnotherGoroutine(t *testing.T) {
	c, _ := connPair(t)
	c.SetDeadline(time.Now().Add(time.Minute))
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		done <- err
	}()
	c.SetDeadline(time.Now()) // what a shutdown does to wake a reader
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read: got %v; want a timeout", err)
	}
}

func TestDeadlineConnClearedDeadlineNeverFires(t *testing.T) {
	c, peer := connPair(t)
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	c.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(c, make([]byte, 1))
		done <- err
	}()
	waitUntil(t, "the socket deadline to be cleared", func() bool { return c.read.armed.Load() == 0 })
	peer.Write([]byte("x"))
	if err := <-done; err != nil {
		t.Fatalf("Read: got %v; want nil", err)
	}
}

func TestDeadlineConnWriteCarriesOn(t *testing.T) {
	c, peer := connPair(t)
	c.SetWriteDeadline(time.Now().Add(time.Millisecond))
	want := time.Now().Add(time.Minute)
	c.SetWriteDeadline(want)
	big := make([]byte, 64<<20) // more than the socket buffers hold
	done := make(chan error, 1)
	go func() {
		n, err := c.Write(big)
		if err == nil && n != len(big) {
			err = io.ErrShortWrite
		}
		done <- err
	}()
	waitUntil(t, "the socket deadline to move", func() bool { return c.write.armed.Load() == want.UnixNano() })
	if n, err := io.CopyN(io.Discard, peer, int64(len(big))); err != nil {
		t.Fatalf("reading what was written: got %d bytes, %v", n, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Write: got %v; want nil", err)
	}
}
