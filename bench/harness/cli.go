package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The helpers in this file end the process: they are for a command's main
// function only, never for library code or tests.

// ServeChildIfAsked runs childMain and exits when the command was started
// with flagName as its only argument: the way a command re-executes itself
// as its baseline server. It is checked before flag parsing, so the flag
// stays out of the usage text.
func ServeChildIfAsked(cmd, flagName string, childMain func() error) {
	if len(os.Args) != 2 || strings.TrimLeft(os.Args[1], "-") != strings.TrimLeft(flagName, "-") {
		return
	}
	if err := childMain(); err != nil {
		fmt.Fprintln(os.Stderr, cmd+":", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// SelfChild describes a child that re-executes this binary with args. It
// exits with status 1 when the binary cannot find itself.
func SelfChild(cmd, name string, args ...string) ChildConfig {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, cmd+": cannot find own executable:", err)
		os.Exit(1)
	}
	return ChildConfig{Name: name, Path: exe, Args: args}
}

// ParseFlags parses args into fs, refuses positional arguments, and then
// calls finish to derive and validate the rest of the config. Errors of its
// own and of finish are written to fs.Output() as "NAME: error"; the flag
// package writes its own.
func ParseFlags(fs *flag.FlagSet, args []string, finish func() error) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	} else {
		err = finish()
	}
	if err != nil {
		fmt.Fprintln(fs.Output(), fs.Name()+":", err)
	}
	return err
}

// ExitOnFlagError ends the process after a failed ParseFlags: status 0
// after -h (the usage is already out), 2 otherwise. It returns on nil.
func ExitOnFlagError(err error) {
	switch {
	case err == nil:
		return
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	default:
		os.Exit(2)
	}
}

// RunMain runs a benchmark under a context that the first SIGINT or
// SIGTERM cancels, so every child is stopped and every temp dir removed on
// the way out; a second signal kills the harness at once (the children
// still die with it: see ChildConfig). An error is written to stderr as
// "cmd: error" and exits with status 3 when it matches missedTarget (a
// finished run that missed its target; nil for none), else 1.
func RunMain(cmd string, missedTarget error, run func(context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := run(ctx)
	stop()
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, cmd+":", err)
	if missedTarget != nil && errors.Is(err, missedTarget) {
		os.Exit(3)
	}
	os.Exit(1)
}

// ResolveWaymark returns the node binary as an absolute path: flagValue
// (the -waymark flag) if given, else bin/waymark at the root of the module
// that holds the working directory.
func ResolveWaymark(flagValue string) (string, error) {
	if flagValue != "" {
		if _, err := os.Stat(flagValue); err != nil {
			return "", fmt.Errorf("cannot use -waymark %s: %w", flagValue, err)
		}
		return filepath.Abs(flagValue)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("cannot find the working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			bin := filepath.Join(dir, "bin", "waymark")
			if _, err := os.Stat(bin); err != nil {
				return "", fmt.Errorf("cannot find %s: run `make build` or pass -waymark", bin)
			}
			return bin, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repo root (go.mod) above the working directory: pass -waymark")
		}
		dir = parent
	}
}

// RoundFlags are the flags of a command that measures a baseline and a
// node in alternating rounds with the closed-loop load generator.
type RoundFlags struct {
	Duration time.Duration
	Warmup   time.Duration
	Conns    int
	Rounds   int
}

// Register defines -duration, -warmup, -conns and -rounds on fs.
func (f *RoundFlags) Register(fs *flag.FlagSet) {
	fs.DurationVar(&f.Duration, "duration", 10*time.Second, "measured window of each run")
	fs.DurationVar(&f.Warmup, "warmup", 2*time.Second, "unmeasured load before each window")
	fs.IntVar(&f.Conns, "conns", 64, "concurrent keep-alive connections of the load generator")
	fs.IntVar(&f.Rounds, "rounds", 3, "baseline/node run pairs; the report uses the median")
}

// Validate checks -duration, -warmup and -rounds; each command checks
// -conns with its own related flags.
func (f RoundFlags) Validate() error {
	switch {
	case f.Duration <= 0 || f.Warmup < 0:
		return fmt.Errorf("-duration must be positive and -warmup not negative, got %v and %v", f.Duration, f.Warmup)
	case f.Rounds <= 0:
		return fmt.Errorf("-rounds must be positive, got %d", f.Rounds)
	}
	return nil
}
