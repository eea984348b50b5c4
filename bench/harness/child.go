package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Limits on the output a Child keeps: the head holds the start-up lines
// (where bound addresses are logged), the tail the latest ones for error
// reports. Lines longer than maxLineBytes are cut.
const (
	headLines    = 1000
	tailLines    = 100
	maxLineBytes = 64 << 10
)

// ChildConfig describes a process to start.
type ChildConfig struct {
	Name string   // short label for echoed lines and errors, e.g. "node"
	Path string   // executable
	Args []string // arguments after the executable
	Env  []string // added to the current environment
	Dir  string   // working directory; empty means the current one

	// Echo, when set, receives every output line prefixed with "[Name] ".
	Echo io.Writer

	// HoldStdin gives the child a stdin pipe that only the parent holds, so
	// a child that reads stdin sees EOF as soon as the parent dies, however
	// it dies. The baseline server uses this to never outlive the harness.
	HoldStdin bool

	// StopGrace is how long Stop waits after SIGTERM before SIGKILL.
	// Zero means 5 s.
	StopGrace time.Duration

	// CPUs, when set, pins the process to these CPUs (taskset's list
	// syntax, e.g. "0" or "0,1"): it is started as `taskset -c CPUs Path
	// Args...`, and taskset execs Path in place, so Pid is Path's own.
	// Without it the child inherits the harness's affinity.
	CPUs string

	// Nice, when above zero, starts the process at that niceness (`nice
	// -n Nice`, which also execs in place): a helper that stands for
	// another machine then takes only CPU time nothing else wants.
	Nice int
}

// Child is a running process in its own process group. Its stdout and stderr
// are read line by line so it never blocks on a full pipe.
type Child struct {
	cfg      ChildConfig
	cmd      *exec.Cmd
	stdinW   *os.File
	exited   chan struct{} // closed after Wait returns
	drained  chan struct{} // closed after the output pipe hits EOF
	waitErr  error
	stopOnce sync.Once

	mu      sync.Mutex
	head    []string
	tail    []string // ring buffer; once full, tailN%tailLines is the oldest slot
	tailN   int      // lines seen in total
	waiters []*lineWaiter
}

type lineWaiter struct {
	match func(string) (string, bool)
	found chan string // buffered, receives at most one value
}

// StartChild starts the process described by cfg. The caller must call Stop,
// normally in a defer, even if the process exits on its own.
func StartChild(cfg ChildConfig) (*Child, error) {
	if cfg.Name == "" {
		cfg.Name = cfg.Path
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 5 * time.Second
	}
	path, args := cfg.Path, cfg.Args
	if cfg.CPUs != "" {
		taskset, err := TasksetPath()
		if err != nil {
			return nil, fmt.Errorf("cannot pin %s to CPU %s: %w", cfg.Name, cfg.CPUs, err)
		}
		path, args = taskset, append([]string{"-c", cfg.CPUs, cfg.Path}, cfg.Args...)
	}
	if cfg.Nice > 0 {
		nice, err := exec.LookPath("nice")
		if err != nil {
			return nil, fmt.Errorf("cannot start %s at niceness %d: %w", cfg.Name, cfg.Nice, err)
		}
		path, args = nice, append([]string{"-n", strconv.Itoa(cfg.Nice), path}, args...)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("cannot create output pipe for %s: %w", cfg.Name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = cfg.Dir
	cmd.Env = append(os.Environ(), cfg.Env...)
	cmd.Stdout = outW
	cmd.Stderr = outW
	cmd.SysProcAttr = childSysProcAttr()
	c := &Child{cfg: cfg, cmd: cmd, exited: make(chan struct{}), drained: make(chan struct{})}
	if cfg.HoldStdin {
		inR, inW, err := os.Pipe()
		if err != nil {
			outR.Close()
			outW.Close()
			return nil, fmt.Errorf("cannot create stdin pipe for %s: %w", cfg.Name, err)
		}
		cmd.Stdin = inR
		c.stdinW = inW
		defer inR.Close() // the child has its own copy after Start
	}
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		if c.stdinW != nil {
			c.stdinW.Close()
		}
		return nil, fmt.Errorf("cannot start %s (%s): %w", cfg.Name, cfg.Path, err)
	}
	outW.Close() // the child holds the write end now; EOF comes when it exits
	go c.readOutput(outR)
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// Pid returns the process id, which is also its process group id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// ExitErr returns the error from waiting for the process; only meaningful
// after Exited is closed.
func (c *Child) ExitErr() error {
	select {
	case <-c.exited:
		return c.waitErr
	default:
		return nil
	}
}

func (c *Child) readOutput(r *os.File) {
	defer close(c.drained)
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(line) < maxLineBytes {
			line = append(line, chunk[:min(len(chunk), maxLineBytes-len(line))]...)
		}
		if err != nil {
			if len(line) > 0 {
				c.addLine(string(line))
			}
			return
		}
		if isPrefix {
			continue
		}
		c.addLine(string(line))
		line = line[:0]
	}
}

func (c *Child) addLine(line string) {
	if c.cfg.Echo != nil {
		fmt.Fprintf(c.cfg.Echo, "[%s] %s\n", c.cfg.Name, line)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.head) < headLines {
		c.head = append(c.head, line)
	}
	if len(c.tail) < tailLines {
		c.tail = append(c.tail, line)
	} else {
		c.tail[c.tailN%tailLines] = line
	}
	c.tailN++
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if v, ok := w.match(line); ok {
			w.found <- v
			continue
		}
		kept = append(kept, w)
	}
	c.waiters = kept
}

// Tail returns the most recent output lines, oldest first.
func (c *Child) Tail() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.tail) < tailLines {
		return append([]string(nil), c.tail...)
	}
	start := c.tailN % tailLines
	return append(append([]string(nil), c.tail[start:]...), c.tail[:start]...)
}

// WaitForLine returns the value of the first output line, past or future,
// for which match reports true. It fails when ctx ends or the process closes
// its output first.
func (c *Child) WaitForLine(ctx context.Context, what string, match func(string) (string, bool)) (string, error) {
	w := &lineWaiter{match: match, found: make(chan string, 1)}
	c.mu.Lock()
	for _, lines := range [][]string{c.head, c.tail} {
		for _, l := range lines {
			if v, ok := match(l); ok {
				c.mu.Unlock()
				return v, nil
			}
		}
	}
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	defer c.removeWaiter(w)

	select {
	case v := <-w.found:
		return v, nil
	case <-ctx.Done():
		return "", fmt.Errorf("cannot find %s in the output of %s: %w%s", what, c.cfg.Name, context.Cause(ctx), c.tailNote())
	case <-c.drained:
		select {
		case v := <-w.found:
			return v, nil
		default:
		}
		<-c.exitedOrTimeout(time.Second)
		return "", fmt.Errorf("cannot find %s in the output of %s: process ended (%v)%s", what, c.cfg.Name, c.ExitErr(), c.tailNote())
	}
}

// WaitForAddr waits for a log line with message msg and a bound address
// (see ParseListenAddr) and returns the address.
func (c *Child) WaitForAddr(ctx context.Context, msg string) (string, error) {
	return c.WaitForLine(ctx, fmt.Sprintf("%q address", msg), func(line string) (string, bool) {
		return ParseListenAddr(line, msg)
	})
}

func (c *Child) removeWaiter(w *lineWaiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.waiters {
		if x == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			return
		}
	}
}

func (c *Child) exitedOrTimeout(d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-c.exited:
		case <-time.After(d):
		}
	}()
	return done
}

// tailNote formats the last few output lines for an error message.
func (c *Child) tailNote() string {
	lines := c.Tail()
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	if len(lines) == 0 {
		return "; no output"
	}
	return "; last output:\n  " + strings.Join(lines, "\n  ")
}

// Stop ends the process and everything in its process group: SIGTERM, then
// SIGKILL after the grace period. It is safe to call more than once and
// after the process has exited on its own.
func (c *Child) Stop() error {
	var err error
	c.stopOnce.Do(func() { err = c.stop() })
	return err
}

func (c *Child) stop() error {
	if c.stdinW != nil {
		c.stdinW.Close()
	}
	pgid := c.cmd.Process.Pid
	select {
	case <-c.exited:
	default:
		if err := signalGroup(pgid, syscall.SIGTERM); err != nil {
			return fmt.Errorf("cannot signal %s: %w", c.cfg.Name, err)
		}
		select {
		case <-c.exited:
		case <-time.After(c.cfg.StopGrace):
			if err := signalGroup(pgid, syscall.SIGKILL); err != nil {
				return fmt.Errorf("cannot kill %s: %w", c.cfg.Name, err)
			}
			<-c.exited
		}
	}
	// Anything the child left behind in its group goes too.
	if err := signalGroup(pgid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("cannot kill the process group of %s: %w", c.cfg.Name, err)
	}
	select {
	case <-c.drained:
	case <-time.After(time.Second):
	}
	return nil
}

// signalGroup signals every process in group pgid; a group that is already
// gone is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
