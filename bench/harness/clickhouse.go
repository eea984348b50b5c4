package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ClickHouseOptions describes a clickhouse-server child with a throwaway
// config: loopback only, free ports, every path under Dir.
type ClickHouseOptions struct {
	Binary       string // empty means clickhouse-server on PATH
	Dir          string // fresh, caller-owned folder
	CPUs         string // taskset CPU list, or empty
	Echo         io.Writer
	StartTimeout time.Duration // for SELECT 1 to answer; zero means 60 s
}

// ClickHouse is a running clickhouse-server in its own process group.
type ClickHouse struct {
	*Child
	HTTPAddr string // 127.0.0.1:PORT of the HTTP interface
	TCPPort  int    // native protocol, bound only because the server wants one
	Version  string // SELECT version()
	Dir      string
	client   *http.Client
}

// FindClickHouse returns the server binary, or an error that says which
// package to install.
func FindClickHouse(binary string) (string, error) {
	if binary == "" {
		binary = "clickhouse-server"
	}
	p, err := lookSbin(binary)
	if err != nil {
		return "", fmt.Errorf("cannot find %s: install the clickhouse-server package (Debian)", binary)
	}
	return p, nil
}

// RenderClickHouseConfig returns the server config and the users config
// for a server whose data, temp files, user files and logs live under
// dir, listening on 127.0.0.1 only, with one user "default" without a
// password who may connect from loopback. Only settings that ClickHouse
// 18.16 and current releases both read are used (`<yandex>` is still
// accepted as the root element).
func RenderClickHouseConfig(dir string, httpPort, tcpPort int) (config, users []byte) {
	p := func(name string) string { return xmlEscape(filepath.Join(dir, name)) + "/" }
	config = fmt.Appendf(nil, `<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>%[1]sserver.log</log>
        <errorlog>%[1]sserver.err.log</errorlog>
        <size>100M</size>
        <count>1</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>%[2]d</http_port>
    <tcp_port>%[3]d</tcp_port>
    <path>%[4]s</path>
    <tmp_path>%[5]s</tmp_path>
    <user_files_path>%[6]s</user_files_path>
    <format_schema_path>%[7]s</format_schema_path>
    <users_config>%[8]s</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mark_cache_size>536870912</mark_cache_size>
    <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
`, p("log"), httpPort, tcpPort, p("data"), p("tmp"), p("user_files"), p("format_schemas"), xmlEscape(filepath.Join(dir, "users.xml")))
	users = []byte(`<?xml version="1.0"?>
<yandex>
    <profiles>
        <default></default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks>
                <ip>127.0.0.1</ip>
                <ip>::1</ip>
            </networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas>
        <default></default>
    </quotas>
</yandex>
`)
	return config, users
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// StartClickHouse writes a config into Dir, starts `clickhouse-server
// --config-file=DIR/config.xml` and waits until `SELECT 1` answers over
// HTTP. Ports taken between the harness freeing them and the server
// binding them are retried with new ones. Stop ends it with SIGTERM, then
// SIGKILL after 20 s. On error nothing is left running.
func StartClickHouse(ctx context.Context, o ClickHouseOptions) (*ClickHouse, error) {
	bin, err := FindClickHouse(o.Binary)
	if err != nil {
		return nil, err
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
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
	var lastErr error
	for attempt := 0; attempt < maxPortAttempts; attempt++ {
		httpPort, err1 := FreeLoopbackPort()
		tcpPort, err2 := FreeLoopbackPort()
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("cannot find ports for clickhouse: %v %v", err1, err2)
		}
		if httpPort == tcpPort {
			continue
		}
		config, users := RenderClickHouseConfig(dir, httpPort, tcpPort)
		confPath := filepath.Join(dir, "config.xml")
		if err := os.WriteFile(confPath, config, 0o644); err != nil {
			return nil, fmt.Errorf("cannot write clickhouse config: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "users.xml"), users, 0o644); err != nil {
			return nil, fmt.Errorf("cannot write clickhouse users: %w", err)
		}
		child, err := StartChild(ChildConfig{
			Name: "clickhouse", Path: bin, Args: []string{"--config-file=" + confPath},
			Dir: dir, Echo: o.Echo, CPUs: o.CPUs, StopGrace: 20 * time.Second,
		})
		if err != nil {
			return nil, err
		}
		c := &ClickHouse{
			Child: child, HTTPAddr: "127.0.0.1:" + strconv.Itoa(httpPort), TCPPort: tcpPort, Dir: dir,
			client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}},
		}
		err = c.waitReady(ctx, o.StartTimeout)
		if err == nil {
			return c, nil
		}
		child.Stop()
		lastErr = err
		if !c.portTaken() {
			return nil, err
		}
	}
	return nil, fmt.Errorf("cannot start clickhouse after %d port pairs: %w", maxPortAttempts, lastErr)
}

func (c *ClickHouse) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		if IsClosed(c.Exited()) {
			return fmt.Errorf("clickhouse-server exited (%v)%s%s", c.ExitErr(), c.tailNote(), c.errLogNote())
		}
		out, err := c.Query(ctx, "SELECT 1")
		if err == nil && strings.TrimSpace(out) == "1" {
			v, err := c.Query(ctx, "SELECT version()")
			if err != nil {
				return err
			}
			c.Version = strings.TrimSpace(v)
			return nil
		}
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot see clickhouse answer SELECT 1 (last: %s): %w%s%s", last, context.Cause(ctx), c.tailNote(), c.errLogNote())
		case <-time.After(pollInterval):
		}
	}
}

func (c *ClickHouse) errLog() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "log", "server.err.log"))
	return string(b)
}

func (c *ClickHouse) errLogNote() string {
	log := strings.TrimSpace(c.errLog())
	if log == "" {
		return ""
	}
	lines := strings.Split(log, "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return "; error log:\n  " + strings.Join(lines, "\n  ")
}

func (c *ClickHouse) portTaken() bool {
	return strings.Contains(c.errLog()+strings.Join(c.Tail(), "\n"), "Address already in use")
}

// Query runs sql over the HTTP interface and returns the answer body
// (TabSeparated unless sql names another FORMAT).
func (c *ClickHouse) Query(ctx context.Context, sql string) (string, error) {
	b, err := c.post(ctx, "", strings.NewReader(sql))
	return string(b), err
}

// Exec runs a statement whose answer does not matter (DDL).
func (c *ClickHouse) Exec(ctx context.Context, sql string) error {
	_, err := c.post(ctx, "", strings.NewReader(sql))
	return err
}

// Insert sends rows (in the FORMAT that insert names, e.g. "INSERT INTO t
// FORMAT TabSeparated") as the request body; it returns once ClickHouse
// has written them.
func (c *ClickHouse) Insert(ctx context.Context, insert string, rows []byte) error {
	_, err := c.post(ctx, insert, bytes.NewReader(rows))
	return err
}

func (c *ClickHouse) post(ctx context.Context, query string, body io.Reader) ([]byte, error) {
	u := "http://" + c.HTTPAddr + "/"
	if query != "" {
		u += "?" + url.Values{"query": {query}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return nil, fmt.Errorf("cannot build clickhouse request: %w", err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach clickhouse: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("cannot read clickhouse answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("clickhouse answered %s: %s", resp.Status, truncate(b, 500))
	}
	return b, nil
}

// Stop closes the client's connections (the server waits for open ones
// before it exits) and ends the server: SIGTERM, then SIGKILL of its
// group after the grace period.
func (c *ClickHouse) Stop() error {
	c.client.CloseIdleConnections()
	return c.Child.Stop()
}
