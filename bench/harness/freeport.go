package harness

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
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

// lookSbin finds a server binary on PATH or, since users' PATHs often
// leave it out, in /usr/sbin (where Debian puts nginx and
// clickhouse-server).
func lookSbin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if !strings.Contains(name, "/") {
		if p, err := exec.LookPath(filepath.Join("/usr/sbin", name)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not on PATH or in /usr/sbin", name)
}
