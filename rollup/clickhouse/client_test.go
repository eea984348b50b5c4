package clickhouse

import (
	"context"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServerErrorCarriesClickHouseMessage(t *testing.T) {
	c := newClient(t, sharedServer(t))
	_, err := c.Query(testCtx(t), "SELECT 1 FROM no_such_table")
	var se *ServerError
	if !errors.As(err, &se) {
		t.Fatalf("query of a missing table: %v; want a *ServerError", err)
	}
	// Code 60 is UNKNOWN_TABLE in every release.
	if se.Code != 60 || !strings.Contains(se.Message, "no_such_table") || se.Status == 200 {
		t.Errorf("error = %+v; want code 60 naming the table, not HTTP 200", se)
	}
	if err := c.Exec(testCtx(t), "CREATE TABLE broken ("); ErrorCode(err) != 62 { // SYNTAX_ERROR
		t.Errorf("bad DDL: %v (code %d); want code 62", err, ErrorCode(err))
	}
}

// Every byte value, quotes and backslashes in every position, and bytes
// that are not UTF-8 come back from the server as sent.
func TestStringLiteralRoundTrips(t *testing.T) {
	c := newClient(t, sharedServer(t))
	var all []byte
	for i := 0; i < 256; i++ {
		all = append(all, byte(i))
	}
	for _, s := range []string{"", "'", `\`, `\'`, `'\`, "a'b\\c\nd\te\x00f", "') OR 1=1 --", "é€\xff\xfe", string(all)} {
		r, err := c.Query(testCtx(t), "SELECT hex("+String(s)+")")
		if err != nil {
			t.Fatalf("literal of %q: %v", s, err)
		}
		got, _ := rawValue(r.Data[0][0]).str()
		if want := strings.ToUpper(hex.EncodeToString([]byte(s))); got != want {
			t.Errorf("literal of %q came back as %s; want %s", s, got, want)
		}
	}
}

func TestUserAndPasswordFile(t *testing.T) {
	srv := sharedServer(t)
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("s3cr'et\\pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pw, err := ReadPasswordFile(pwFile)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := New(Config{URL: srv.URL(), Database: "default", User: "waymark", Password: pw})
	// 18.16 has no currentUser(); a query sees itself in system.processes.
	r, err := good.Query(testCtx(t), "SELECT any(user) FROM system.processes WHERE query LIKE '%whoami-7f3a%'")
	if err != nil {
		t.Fatalf("query as waymark: %v", err)
	}
	if u, _ := rawValue(r.Data[0][0]).str(); u != "waymark" {
		t.Errorf("user = %q; want waymark", u)
	}
	bad, _ := New(Config{URL: srv.URL(), Database: "default", User: "waymark", Password: pw + "x"})
	_, err = bad.Query(testCtx(t), "SELECT 1")
	var se *ServerError
	if !errors.As(err, &se) || !strings.Contains(strings.ToLower(se.Message), "password") {
		t.Errorf("wrong password: %v; want the server's password error", err)
	}
}

func TestTimeoutAndCancelEndTheRequest(t *testing.T) {
	srv := sharedServer(t)
	c, _ := New(Config{URL: srv.URL(), Database: "default", Timeout: 300 * time.Millisecond})
	// sleep() is capped at 3 s a block; the timeout ends the request first.
	if _, err := c.Query(context.Background(), "SELECT sleep(3)"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("query past the timeout: %v; want context.DeadlineExceeded", err)
	}
	c, _ = New(Config{URL: srv.URL(), Database: "default"})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	if _, err := c.Query(ctx, "SELECT sleep(3)"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled query: %v; want context.Canceled", err)
	}
}

// A query whose context ends is stopped on the server too (KILL QUERY):
// 18.16 would otherwise run it to its end.
func TestCancelledQueryStopsOnTheServer(t *testing.T) {
	srv := sharedServer(t)
	c, _ := New(Config{URL: srv.URL(), Database: "default"})
	const marker = "cancel-me-4d1c"
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Query(ctx, "SELECT count() FROM numbers(100000000000) WHERE sipHash64(number) = 0 AND '"+marker+"' != ''")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("long query: %v; want context.DeadlineExceeded", err)
	}
	probe, _ := New(Config{URL: srv.URL(), Database: "default"})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, err := probe.Query(testCtx(t), "SELECT count() FROM system.processes WHERE query LIKE '%"+marker+"%' AND query NOT LIKE '%system.processes%'")
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := rawValue(r.Data[0][0]).int(); n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled query still runs on the server after 20 s")
		}
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []Config{{URL: "127.0.0.1:8123"}, {URL: "ftp://x"}, {URL: "http://x", Database: "a; DROP"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted it", cfg)
		}
	}
}
