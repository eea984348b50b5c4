package harness

import (
	"fmt"
	"net"
)

// FreeLoopbackPort asks the kernel for a free TCP port on 127.0.0.1 and
// releases it at once, for servers that cannot be told to bind port 0
// (nginx, ClickHouse). Another process may take the port before the
// server binds it, so whoever uses this must retry with a new port when
// the bind fails.
func FreeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("cannot find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
