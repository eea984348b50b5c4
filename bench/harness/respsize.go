package harness

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n int
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n += n
	return n, err
}

// ResponseBytes sends one GET path to addr on a fresh connection, with
// the same request line and Host header as the load generator, and
// returns the status and the size of the whole answer on the wire
// (status line, headers and body). Servers that answer the same redirect
// with more bytes do more work per request; the report shows it.
func ResponseBytes(addr, path string) (status, size int, err error) {
	return ResponseBytesHost(addr, "", path)
}

// ResponseBytesHost is ResponseBytes with the Host header host (empty:
// addr).
func ResponseBytesHost(addr, host, path string) (status, size int, err error) {
	if host == "" {
		host = addr
	}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, 0, fmt.Errorf("cannot measure the answer of %s: %w", addr, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host); err != nil {
		return 0, 0, fmt.Errorf("cannot measure the answer of %s: %w", addr, err)
	}
	cc := &countingConn{Conn: conn}
	// Whatever bufio read past the answer is taken off again below.
	br := bufio.NewReaderSize(cc, 16)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("cannot read the answer of %s: %w", addr, err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, 0, fmt.Errorf("cannot read the answer body of %s: %w", addr, err)
	}
	resp.Body.Close()
	return resp.StatusCode, cc.n - br.Buffered(), nil
}
