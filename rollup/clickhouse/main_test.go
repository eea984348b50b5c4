package clickhouse

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waymark/waymark/internal/chserver"
)

// One clickhouse-server serves the package's tests, each in a database
// of its own; tests that stop or kill the server start their own.
var shared struct {
	once sync.Once
	srv  *chserver.Server
	dir  string
	err  error
}

var dbSeq atomic.Int64

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// sharedServer returns the package's server, started on first use.
func sharedServer(t testing.TB) *chserver.Server {
	t.Helper()
	chserver.Require(t)
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "waymark-ch-")
		if shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		shared.srv, shared.err = chserver.Start(ctx, chserver.Options{
			Dir: shared.dir, Users: []chserver.User{{Name: "waymark", Password: "s3cr'et\\pw"}},
		})
	})
	if shared.err != nil {
		t.Fatalf("cannot start clickhouse-server: %v", shared.err)
	}
	return shared.srv
}

// newClient returns a client of srv on a fresh database, migrated.
func newClient(t testing.TB, srv *chserver.Server) *Client {
	t.Helper()
	c, err := New(Config{URL: srv.URL(), Database: fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
