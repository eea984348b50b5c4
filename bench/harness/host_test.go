package harness

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// With a Host set (redirectmatrix -domain), wrk, the Go load generator and
// the answer probe all send it on every request; without, the address.
func TestLoadGeneratorsSendHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	hosts := map[string]int{}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		hosts[string(ctx.Host())]++
		mu.Unlock()
		BaselineHandler(ctx)
	}}
	go srv.Serve(ln)
	defer srv.Shutdown()
	addr := ln.Addr().String()
	seen := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := hosts
		hosts = map[string]int{}
		return out
	}

	if status, _, err := ResponseBytesHost(addr, "go.bench.example", "/a"); err != nil || status != 302 {
		t.Fatalf("ResponseBytesHost: %d %v", status, err)
	}
	if _, _, err := ResponseBytes(addr, "/a"); err != nil {
		t.Fatal(err)
	}
	if got := seen(); got["go.bench.example"] != 1 || got[addr] != 1 || len(got) != 2 {
		t.Errorf("probe hosts %v; want one go.bench.example and one %s", got, addr)
	}

	if _, err := RunLoad(context.Background(), LoadConfig{Addr: addr, Host: "go.bench.example", Paths: [][]byte{[]byte("/a")}, Conns: 2, Duration: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if got := seen(); got["go.bench.example"] == 0 || len(got) != 1 {
		t.Errorf("RunLoad hosts %v; want go.bench.example only", got)
	}

	if _, err := FindWrk(""); err != nil {
		requireTool(t, func() error { return err })
	}
	dir := t.TempDir()
	reqs := filepath.Join(dir, "reqs.tsv")
	if err := WrkRequests(reqs, [][]byte{[]byte("/a")}, nil, 10, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := RunWrk(context.Background(), WrkConfig{Dir: dir, Addr: addr, Host: "go.bench.example", Requests: reqs, Conns: 2, Duration: time.Second}); err != nil {
		t.Fatal(err)
	}
	if got := seen(); got["go.bench.example"] == 0 || len(got) != 1 {
		t.Errorf("wrk hosts %v; want go.bench.example only", got)
	}
}
