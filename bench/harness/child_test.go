package harness

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestChildWaitForAddrAndStopKillsGroup(t *testing.T) {
	// The shell logs an address, leaves a grandchild behind, and ignores
	// SIGTERM, so Stop has to escalate to SIGKILL for the whole group.
	script := `trap '' TERM; sleep 60 & echo 'level=INFO msg="http listening" addr=127.0.0.1:4242'; wait`
	c, err := StartChild(ChildConfig{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script}, StopGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("StartChild: %v", err)
	}
	defer c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr, err := c.WaitForAddr(ctx, "http listening")
	if err != nil {
		t.Fatalf("WaitForAddr: %v", err)
	}
	if want := "127.0.0.1:4242"; addr != want {
		t.Errorf("WaitForAddr = %q; want %q", addr, want)
	}
	// A second wait sees the line from the retained output.
	if again, err := c.WaitForAddr(ctx, "http listening"); err != nil || again != addr {
		t.Errorf("second WaitForAddr = %q, %v; want %q, nil", again, err, addr)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// The killed grandchild lingers until init reaps it: poll for the group
	// to disappear.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := syscall.Kill(-c.Pid(), 0)
		if errors.Is(err, syscall.ESRCH) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("signal 0 to group %d after Stop: got %v; want ESRCH", c.Pid(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestChildWaitFailsWhenProcessEnds(t *testing.T) {
	c, err := StartChild(ChildConfig{Name: "sh", Path: "/bin/sh", Args: []string{"-c", "echo booting; echo 'fatal: no config' >&2; exit 3"}})
	if err != nil {
		t.Fatalf("StartChild: %v", err)
	}
	defer c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.WaitForAddr(ctx, "http listening")
	if err == nil {
		t.Fatal("WaitForAddr succeeded; want an error")
	}
	if !strings.Contains(err.Error(), "fatal: no config") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("WaitForAddr error = %q; want the exit status and the last output", err)
	}
}
