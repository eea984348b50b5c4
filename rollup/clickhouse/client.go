package clickhouse

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Config says how to reach ClickHouse.
type Config struct {
	URL      string // base URL of the HTTP interface, e.g. http://127.0.0.1:8123
	Database string // empty means "waymark"
	User     string // empty means the server's "default"
	Password string
	// Timeout bounds each request, on top of the caller's context; zero
	// means 60 s.
	Timeout time.Duration
	// HTTPClient, when set, replaces the client's own transport.
	HTTPClient *http.Client
	// Metrics receives the waymark_clickhouse_* series; nil keeps them
	// private.
	Metrics *metrics.Set
}

// ReadPasswordFile reads a password file (--clickhouse-password-file):
// its content without the trailing newline.
func ReadPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read clickhouse password file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// Client talks to ClickHouse over its HTTP interface. It is safe for
// concurrent use.
type Client struct {
	base    *url.URL
	db      string
	user    string
	pass    string
	timeout time.Duration
	http    *http.Client
	m       *clientMetrics
	// markerRows and printFailed are the marker cache (markercache.go).
	markerRows  *markerCache
	printFailed *sync.Once
}

// New checks cfg and returns a client; it does not contact the server.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("clickhouse url %q is not http(s)://host:port", cfg.URL)
	}
	if cfg.Database == "" {
		cfg.Database = "waymark"
	}
	if !identRE.MatchString(cfg.Database) {
		return nil, fmt.Errorf("clickhouse database %q is not a plain name (letters, digits, _)", cfg.Database)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	hc := cfg.HTTPClient
	if hc == nil {
		// Idle connections are dropped before ClickHouse drops them: its
		// keep_alive_timeout is 3 s by default, and a POST on a
		// connection it closed in the meantime fails with EOF (Go does
		// not retry a POST), which a readiness probe took for ClickHouse
		// being down in a 30M-event querybench load.
		hc = &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: 8, IdleConnTimeout: 2 * time.Second, DisableCompression: true,
		}}
	}
	m := newClientMetrics(cfg.Metrics)
	return &Client{base: u, db: cfg.Database, user: cfg.User, pass: cfg.Password, timeout: cfg.Timeout, http: hc, m: m,
		markerRows: newMarkerCache(m.markerCache), printFailed: &sync.Once{}}, nil
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Database is the database the schema lives in.
func (c *Client) Database() string { return c.db }

// Close drops idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// ServerError is an error ClickHouse answered with: its code and message.
type ServerError struct {
	Status  int    // HTTP status
	Code    int    // ClickHouse error code, 0 when the answer had none
	Message string // ClickHouse's text
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("clickhouse error %d (HTTP %d): %s", e.Code, e.Status, e.Message)
}

var codeRE = regexp.MustCompile(`^Code: (\d+)`)

func serverError(status int, body []byte) error {
	msg := strings.TrimSpace(string(body))
	if len(msg) > 2000 {
		msg = msg[:2000] + "..."
	}
	e := &ServerError{Status: status, Message: msg}
	if m := codeRE.FindStringSubmatch(msg); m != nil {
		e.Code, _ = strconv.Atoi(m[1])
	}
	return e
}

// ErrorCode returns the ClickHouse code of err, 0 when it is not a
// server's answer.
func ErrorCode(err error) int {
	var se *ServerError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// Exec runs a statement whose answer does not matter (DDL, INSERT ...
// SELECT), in the client's database.
func (c *Client) Exec(ctx context.Context, sql string) error {
	_, err := c.do(ctx, nil, strings.NewReader(sql), true)
	return err
}

// Result is a JSONCompact answer: column names and types, and rows of
// JSON values (64-bit integers come quoted, as ClickHouse writes them).
type Result struct {
	Meta []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"meta"`
	Data [][]json.RawMessage `json:"data"`
	Rows int                 `json:"rows"`
	// Totals is the WITH TOTALS row, when the query asked for one.
	Totals []json.RawMessage `json:"totals"`
}

// Query runs a SELECT (without a FORMAT clause) and decodes its
// JSONCompact answer. The server buffers the whole answer first
// (wait_end_of_query), so an error half-way is an HTTP error, not a cut
// answer.
func (c *Client) Query(ctx context.Context, sql string) (*Result, error) {
	b, err := c.do(ctx, url.Values{"wait_end_of_query": {"1"}}, strings.NewReader(sql+" FORMAT JSONCompact"), true)
	if err != nil {
		return nil, err
	}
	return decodeResult(b)
}

// QueryRowBinary runs a SELECT (without a FORMAT clause) and returns its
// answer as RowBinary bytes, buffered by the server first as Query's.
func (c *Client) QueryRowBinary(ctx context.Context, sql string) ([]byte, error) {
	return c.do(ctx, url.Values{"wait_end_of_query": {"1"}}, strings.NewReader(sql+" FORMAT RowBinary"), true)
}

// decodeResult reads a JSONCompact answer.
func decodeResult(b []byte) (*Result, error) {
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("cannot decode clickhouse answer (%.200q): %w", b, err)
	}
	return &r, nil
}

// Insert streams body as the data of insert (e.g. "INSERT INTO events
// FORMAT RowBinary"); settings go along as query settings. It returns
// once ClickHouse has written every row, or with its error.
func (c *Client) Insert(ctx context.Context, insert string, body io.Reader, settings url.Values) error {
	v := url.Values{"query": {insert}}
	for k, s := range settings {
		v[k] = s
	}
	_, err := c.do(ctx, v, body, false)
	return err
}

func (c *Client) do(ctx context.Context, params url.Values, body io.Reader, bodyIsQuery bool) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/"
	id := newQueryID()
	q := url.Values{"database": {c.db}, "query_id": {id}}
	for k, s := range params {
		q[k] = s
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("cannot build clickhouse request: %w", err)
	}
	if c.user != "" || c.pass != "" {
		user := c.user
		if user == "" {
			user = "default"
		}
		req.SetBasicAuth(user, c.pass)
	}
	if bodyIsQuery {
		req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	}
	c.m.requests.Inc()
	resp, err := c.http.Do(req)
	if err != nil {
		c.m.requestErrors.Inc()
		if ctx.Err() != nil {
			c.kill(id)
		}
		return nil, fmt.Errorf("cannot reach clickhouse at %s: %w", c.base.Host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			c.kill(id)
		}
		return nil, fmt.Errorf("cannot read clickhouse answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		c.m.requestErrors.Inc()
		return nil, serverError(resp.StatusCode, b)
	}
	// Without wait_end_of_query an error after the first bytes is
	// appended to a 200 answer; DDL and inserts answer empty, so any
	// "Code: " text there is the server's error.
	if !bodyIsQuery || params.Get("wait_end_of_query") == "" {
		if i := bytes.Index(b, []byte("Code: ")); i >= 0 && bytes.Contains(b[i:], []byte("DB::Exception")) {
			c.m.requestErrors.Inc()
			return nil, serverError(resp.StatusCode, b[i:])
		}
	}
	return b, nil
}

// newQueryID names a request so that it can be killed.
func newQueryID() string {
	var b [16]byte
	rand.Read(b[:])
	return "waymark-" + hex.EncodeToString(b[:])
}

// killTimeout bounds the KILL QUERY sent for a request whose context
// ended.
const killTimeout = 5 * time.Second

// kill asks the server to stop query id: 18.16 goes on running a query
// whose HTTP client has gone. Best effort; its error only matters to
// the log.
func (c *Client) kill(id string) {
	c.m.queriesKilled.Inc()
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	if _, err := c.do(ctx, nil, strings.NewReader("KILL QUERY WHERE query_id = "+String(id)+" ASYNC"), true); err != nil {
		slog.Debug("cannot kill a clickhouse query whose context ended", "query_id", id, "err", err)
	}
}
