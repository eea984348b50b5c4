package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// profileCapture is a CPU profile of the node being taken over its admin
// API (/debug/pprof/profile) while the queries run.
type profileCapture struct {
	ch  chan struct{}
	err error
}

// startProfile asks the node for a CPU profile of the next seconds, and
// for the allocations over the same seconds, and writes them to path and
// path + ".allocs" when they arrive.
func startProfile(ctx context.Context, node *harness.AggregatorNode, seconds int, path string) *profileCapture {
	p := &profileCapture{ch: make(chan struct{})}
	allocs := make(chan error, 1)
	go func() { allocs <- fetchProfile(ctx, node.Admin, "allocs", seconds, path+".allocs") }()
	go func() {
		defer close(p.ch)
		p.err = errors.Join(fetchProfile(ctx, node.Admin, "profile", seconds, path), <-allocs)
	}()
	return p
}

func (p *profileCapture) done() bool { return harness.IsClosed(p.ch) }

func (p *profileCapture) wait() error {
	<-p.ch
	return p.err
}

func fetchProfile(ctx context.Context, admin *harness.AdminClient, kind string, seconds int, path string) error {
	url := admin.BaseURL + "/debug/pprof/" + kind + "?seconds=" + strconv.Itoa(seconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+admin.Token)
	client := &http.Client{Timeout: time.Duration(seconds)*time.Second + time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("cannot profile the node: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("cannot read the node's profile: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the node answered its profile with %s: %.300s", resp.Status, b)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("cannot write the profile: %w", err)
	}
	return nil
}
