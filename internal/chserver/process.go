package chserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is the running server as its starter sees it. bench/harness
// passes its own (*harness.Child, which echoes and pins to CPUs); the
// default is a plain child whose output goes to DIR/stdout.log.
type Process interface {
	Pid() int
	Exited() <-chan struct{}
	ExitErr() error
	Stop() error
	Tail() []string
}

// StartFunc starts path with args in dir, in a process group of its own
// that Stop ends (SIGTERM, then SIGKILL after grace).
type StartFunc func(path string, args []string, dir string, grace time.Duration) (Process, error)

type plainChild struct {
	cmd     *exec.Cmd
	out     string
	grace   time.Duration
	exited  chan struct{}
	waitErr error
}

func startPlain(path string, args []string, dir string, grace time.Duration) (Process, error) {
	outPath := filepath.Join(dir, "stdout.log")
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open clickhouse output file: %w", err)
	}
	defer out.Close() // the child has its own copy once started
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	// Its own group, so Stop reaches whatever it forks; killed with us if
	// the test binary dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", path, err)
	}
	c := &plainChild{cmd: cmd, out: outPath, grace: grace, exited: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

func (c *plainChild) Pid() int                { return c.cmd.Process.Pid }
func (c *plainChild) Exited() <-chan struct{} { return c.exited }

func (c *plainChild) ExitErr() error {
	select {
	case <-c.exited:
		return c.waitErr
	default:
		return nil
	}
}

// Tail returns the last lines of the output file.
func (c *plainChild) Tail() []string {
	b, _ := os.ReadFile(c.out)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return lines
}

func (c *plainChild) Stop() error {
	pgid := c.cmd.Process.Pid
	select {
	case <-c.exited:
	default:
		if err := signalGroup(pgid, syscall.SIGTERM); err != nil {
			return fmt.Errorf("cannot signal clickhouse-server: %w", err)
		}
		select {
		case <-c.exited:
		case <-time.After(c.grace):
			if err := signalGroup(pgid, syscall.SIGKILL); err != nil {
				return fmt.Errorf("cannot kill clickhouse-server: %w", err)
			}
			<-c.exited
		}
	}
	return signalGroup(pgid, syscall.SIGKILL)
}

// signalGroup signals every process in group pgid; a group already gone
// is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
