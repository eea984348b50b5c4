package api

import (
	"log/slog"
	"time"

	"github.com/waymark/waymark/rollup/query"
)

// Config is what the handlers need besides the backend.
type Config struct {
	// Now is the clock the default and relative ranges ("the last 7
	// days", period=7d) are taken from; time.Now when nil. The backend's
	// clock must agree with it.
	Now func() time.Time
	// Logger gets the errors answered as 500; slog.Default when nil.
	Logger *slog.Logger
}

// stats is one StatsHandler: a backend, the node's owners and tables.
type stats struct {
	b    query.Backend
	auth Authorizer
	cfg  Config
}

func (a *stats) now() time.Time {
	if a.cfg.Now == nil {
		return time.Now()
	}
	return a.cfg.Now()
}

func (a *stats) log() *slog.Logger {
	if a.cfg.Logger == nil {
		return slog.Default()
	}
	return a.cfg.Logger
}
