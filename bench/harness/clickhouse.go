package harness

import (
	"context"
	"io"
	"time"

	"github.com/waymark/waymark/internal/chserver"
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

// ClickHouse is a running clickhouse-server in its own process group
// (internal/chserver, which rollup/clickhouse's tests use too).
type ClickHouse = chserver.Server

// FindClickHouse returns the server binary, or an error that says which
// package to install.
func FindClickHouse(binary string) (string, error) { return chserver.FindBinary(binary) }

// RenderClickHouseConfig returns the server config and the users config
// (chserver.RenderConfig).
func RenderClickHouseConfig(dir string, httpPort, tcpPort int) (config, users []byte) {
	return chserver.RenderConfig(dir, httpPort, tcpPort)
}

// StartClickHouse starts the server as a harness Child (echoed, pinned
// to o.CPUs) and waits until `SELECT 1` answers over HTTP. Stop ends it
// with SIGTERM, then SIGKILL after 20 s. On error nothing is left running.
func StartClickHouse(ctx context.Context, o ClickHouseOptions) (*ClickHouse, error) {
	return chserver.Start(ctx, chserver.Options{
		Binary: o.Binary, Dir: o.Dir, StartTimeout: o.StartTimeout,
		Start: func(path string, args []string, dir string, grace time.Duration) (chserver.Process, error) {
			return StartChild(ChildConfig{
				Name: "clickhouse", Path: path, Args: args,
				Dir: dir, Echo: o.Echo, CPUs: o.CPUs, StopGrace: grace,
			})
		},
	})
}
