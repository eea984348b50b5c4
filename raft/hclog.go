package raft

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends hashicorp/raft's log lines to slog. Raft is chatty at
// info (every election, every snapshot), so trace, debug and info all go
// to slog's debug level; warnings and errors keep theirs.
type hclogAdapter struct {
	l    *slog.Logger
	name string
	args []any
}

func newHCLogger(l *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{l: l, name: name}
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelDebug
	}
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	lvl := slogLevel(level)
	ctx := context.Background()
	if !a.l.Enabled(ctx, lvl) {
		return
	}
	all := make([]any, 0, 2+len(a.args)+len(args))
	all = append(all, "component", a.name)
	all = append(all, a.args...)
	all = append(all, args...)
	a.l.Log(ctx, lvl, msg, all...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(level hclog.Level) bool {
	return a.l.Enabled(context.Background(), slogLevel(level))
}

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.args }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.args = append(append([]any(nil), a.args...), args...)
	return &c
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	c := *a
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

// SetLevel is a no-op: the slog handler decides what is written.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	switch {
	case a.IsDebug():
		return hclog.Trace
	case a.IsWarn():
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return lineWriter{a}
}

// lineWriter logs each write from a standard logger as one debug line.
type lineWriter struct{ a *hclogAdapter }

func (w lineWriter) Write(p []byte) (int, error) {
	w.a.Log(hclog.Debug, string(bytes.TrimSpace(p)))
	return len(p), nil
}
