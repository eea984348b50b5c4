package node

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// CmdNode is `waymark node`: run a node until SIGINT or SIGTERM.
func CmdNode(args []string) error {
	cfg, checkOnly, err := ParseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &cliError{ExitUsage, err}
	}
	if checkOnly {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(cfg)
	}
	log, err := NewLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return &cliError{ExitUsage, err}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := Start(ctx, cfg, log)
	if err != nil && ctx.Err() != nil {
		// SIGTERM during start-up: Start already stopped what it had
		// started, in reverse order; that is a clean shutdown.
		log.Info("stopped during start-up", "reason", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	var fault error
	select {
	case <-ctx.Done():
	case <-n.Exit():
	case fault = <-n.Failed():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = n.Close(shutdownCtx)
	if fault != nil {
		return errors.Join(fmt.Errorf("node stopped: %w", fault), err)
	}
	return err
}
