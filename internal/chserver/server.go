package chserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options describes a clickhouse-server child with a throwaway config.
type Options struct {
	Binary       string        // empty means clickhouse-server on PATH or in /usr/sbin
	Dir          string        // fresh, caller-owned folder
	StartTimeout time.Duration // for SELECT 1 to answer; zero means 60 s
	Users        []User        // accounts besides the password-less "default"
	// Start starts the process; nil means a plain child writing its
	// output to DIR/stdout.log.
	Start StartFunc
}

// Server is a running clickhouse-server in its own process group.
type Server struct {
	Process
	HTTPAddr string // 127.0.0.1:PORT of the HTTP interface
	TCPPort  int    // native protocol, bound only because the server wants one
	Version  string // SELECT version()
	Dir      string
	opts     Options
	bin      string
	client   *http.Client
}

// maxPortAttempts bounds the retries when a freed port was taken before
// the server bound it.
const maxPortAttempts = 5

const pollInterval = 50 * time.Millisecond

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 20 * time.Second

// Start writes a config into o.Dir, starts `clickhouse-server
// --config-file=DIR/config.xml` and waits until `SELECT 1` answers over
// HTTP. Ports taken between this function freeing them and the server
// binding them are retried with new ones. On error nothing is left
// running.
func Start(ctx context.Context, o Options) (*Server, error) {
	bin, err := FindBinary(o.Binary)
	if err != nil {
		return nil, err
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.Start == nil {
		o.Start = startPlain
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("cannot use clickhouse dir %q: %w", o.Dir, err)
	}
	for _, d := range []string{"log", "data", "tmp", "user_files", "format_schemas"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("cannot create clickhouse dir: %w", err)
		}
	}
	s := &Server{
		Dir: dir, opts: o, bin: bin,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}},
	}
	var lastErr error
	for attempt := 0; attempt < maxPortAttempts; attempt++ {
		httpPort, err1 := freeLoopbackPort()
		tcpPort, err2 := freeLoopbackPort()
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("cannot find ports for clickhouse: %v %v", err1, err2)
		}
		if httpPort == tcpPort {
			continue
		}
		err := s.run(ctx, httpPort, tcpPort)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !s.portTaken() {
			return nil, err
		}
	}
	return nil, fmt.Errorf("cannot start clickhouse after %d port pairs: %w", maxPortAttempts, lastErr)
}

// run starts the server on these ports and waits for it; on error it is
// stopped again.
func (s *Server) run(ctx context.Context, httpPort, tcpPort int) error {
	config, users := RenderConfig(s.Dir, httpPort, tcpPort, s.opts.Users...)
	confPath := filepath.Join(s.Dir, "config.xml")
	if err := os.WriteFile(confPath, config, 0o644); err != nil {
		return fmt.Errorf("cannot write clickhouse config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "users.xml"), users, 0o644); err != nil {
		return fmt.Errorf("cannot write clickhouse users: %w", err)
	}
	// A restart must not read the error log of the last run.
	os.Remove(filepath.Join(s.Dir, "log", "server.err.log"))
	p, err := s.opts.Start(s.bin, []string{"--config-file=" + confPath}, s.Dir, stopGrace)
	if err != nil {
		return err
	}
	s.Process = p
	s.HTTPAddr, s.TCPPort = "127.0.0.1:"+strconv.Itoa(httpPort), tcpPort
	if err := s.waitReady(ctx, s.opts.StartTimeout); err != nil {
		p.Stop()
		return err
	}
	return nil
}

// Restart starts the server again on the same folder (its data kept) and
// the same ports, after Stop or Kill.
func (s *Server) Restart(ctx context.Context) error {
	select {
	case <-s.Exited():
	default:
		return errors.New("BUG: Restart of a clickhouse-server that still runs")
	}
	_, port, _ := net.SplitHostPort(s.HTTPAddr)
	httpPort, _ := strconv.Atoi(port)
	return s.run(ctx, httpPort, s.TCPPort)
}

// Kill ends the server with SIGKILL at once (a crash, for tests) and
// waits until it has exited.
func (s *Server) Kill() error {
	s.client.CloseIdleConnections()
	if err := signalGroup(s.Pid(), syscall.SIGKILL); err != nil {
		return fmt.Errorf("cannot kill clickhouse-server: %w", err)
	}
	<-s.Exited()
	return nil
}

// Stop closes the client's connections (the server waits for open ones
// before it exits) and ends the server: SIGTERM, then SIGKILL of its
// group after the grace period.
func (s *Server) Stop() error {
	s.client.CloseIdleConnections()
	return s.Process.Stop()
}

// URL is the HTTP interface's base URL.
func (s *Server) URL() string { return "http://" + s.HTTPAddr }

func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		select {
		case <-s.Exited():
			return fmt.Errorf("clickhouse-server exited (%v)%s%s", s.ExitErr(), s.tailNote(), s.errLogNote())
		default:
		}
		out, err := s.Query(ctx, "SELECT 1")
		if err == nil && strings.TrimSpace(out) == "1" {
			v, err := s.Query(ctx, "SELECT version()")
			if err != nil {
				return err
			}
			s.Version = strings.TrimSpace(v)
			return nil
		}
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot see clickhouse answer SELECT 1 (last: %s): %w%s%s", last, context.Cause(ctx), s.tailNote(), s.errLogNote())
		case <-time.After(pollInterval):
		}
	}
}

func (s *Server) tailNote() string {
	lines := s.Tail()
	if len(lines) == 0 {
		return "; no output"
	}
	return "; last output:\n  " + strings.Join(lines, "\n  ")
}

func (s *Server) errLog() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "log", "server.err.log"))
	return string(b)
}

func (s *Server) errLogNote() string {
	log := strings.TrimSpace(s.errLog())
	if log == "" {
		return ""
	}
	lines := strings.Split(log, "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return "; error log:\n  " + strings.Join(lines, "\n  ")
}

func (s *Server) portTaken() bool {
	return strings.Contains(s.errLog()+strings.Join(s.Tail(), "\n"), "Address already in use")
}

// Query runs sql over the HTTP interface as "default" and returns the
// answer body (TabSeparated unless sql names another FORMAT).
func (s *Server) Query(ctx context.Context, sql string) (string, error) {
	b, err := s.post(ctx, "", strings.NewReader(sql))
	return string(b), err
}

// Exec runs a statement whose answer does not matter (DDL).
func (s *Server) Exec(ctx context.Context, sql string) error {
	_, err := s.post(ctx, "", strings.NewReader(sql))
	return err
}

// Insert sends rows (in the FORMAT that insert names, e.g. "INSERT INTO t
// FORMAT TabSeparated") as the request body; it returns once ClickHouse
// has written them.
func (s *Server) Insert(ctx context.Context, insert string, rows []byte) error {
	_, err := s.post(ctx, insert, bytes.NewReader(rows))
	return err
}

func (s *Server) post(ctx context.Context, query string, body io.Reader) ([]byte, error) {
	u := s.URL() + "/"
	if query != "" {
		u += "?" + url.Values{"query": {query}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return nil, fmt.Errorf("cannot build clickhouse request: %w", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach clickhouse: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("cannot read clickhouse answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		if len(b) > 500 {
			b = b[:500]
		}
		return nil, fmt.Errorf("clickhouse answered %s: %s", resp.Status, b)
	}
	return b, nil
}

func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("cannot find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
