package clickhouse

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test binary re-executed with childEnv set is an inserting process
// that a test can SIGKILL mid-insert: it stores the segment in file
// childSegEnv into database childDBEnv at childURLEnv, and after
// childStallEnv bytes of the insert body it prints "stalled" and stops
// sending, its insert open, until it is killed.
const (
	childEnv      = "WAYMARK_CH_TEST_CHILD"
	childURLEnv   = "WAYMARK_CH_TEST_URL"
	childDBEnv    = "WAYMARK_CH_TEST_DB"
	childSegEnv   = "WAYMARK_CH_TEST_SEGMENT"
	childStallEnv = "WAYMARK_CH_TEST_STALL_AFTER"
	// childBlockRows makes ClickHouse write the insert in blocks of this
	// many rows as they arrive, so a killed insert leaves some behind.
	childBlockRows = 1000
)

func childMain() int {
	seg, err := os.ReadFile(os.Getenv(childSegEnv))
	if err != nil {
		fmt.Println("error:", err)
		return 2
	}
	stall, _ := strconv.Atoi(os.Getenv(childStallEnv))
	rows := strconv.Itoa(childBlockRows)
	// min_insert_block_size_*: else the server squashes the blocks into
	// one again before it writes.
	testInsertSettings = url.Values{"max_insert_block_size": {rows}, "min_insert_block_size_rows": {rows}, "min_insert_block_size_bytes": {"1"}}
	testHookInsertBody = func(r io.Reader) io.Reader { return &stallingReader{r: r, left: stall} }
	c, err := New(Config{URL: os.Getenv(childURLEnv), Database: os.Getenv(childDBEnv)})
	if err != nil {
		fmt.Println("error:", err)
		return 2
	}
	res, err := c.StoreSegment(context.Background(), seg)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("done:", res.Outcome)
	return 0
}

// stallingReader passes left bytes through, then announces it and
// blocks for good.
type stallingReader struct {
	r    io.Reader
	left int
}

func (s *stallingReader) Read(p []byte) (int, error) {
	if s.left <= 0 {
		fmt.Println("stalled")
		select {}
	}
	n, err := s.r.Read(p[:min(len(p), s.left)])
	s.left -= n
	return n, err
}

// inserter is a running child.
type inserter struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	mu    sync.Mutex
	out   []string
}

// startInserter starts a child storing seg through c's database at url,
// stalling after stallAfter bytes of its insert.
func startInserter(t *testing.T, url, db string, seg []byte, stallAfter int) *inserter {
	t.Helper()
	path := t.TempDir() + "/segment"
	if err := os.WriteFile(path, seg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childURLEnv+"="+url, childDBEnv+"="+db,
		childSegEnv+"="+path, childStallEnv+"="+strconv.Itoa(stallAfter))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in := &inserter{cmd: cmd, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			in.mu.Lock()
			in.out = append(in.out, sc.Text())
			in.mu.Unlock()
			select {
			case in.lines <- sc.Text():
			default:
			}
		}
		cmd.Wait()
		close(in.done)
	}()
	t.Cleanup(func() { cmd.Process.Kill(); <-in.done })
	return in
}

func (in *inserter) output() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return strings.Join(in.out, "\n")
}

// waitLine waits for a line starting with prefix.
func (in *inserter) waitLine(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-in.lines:
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-in.done:
			t.Fatalf("inserter exited before %q: %s", prefix, in.output())
		case <-deadline:
			t.Fatalf("inserter printed no %q in %v: %s", prefix, timeout, in.output())
		}
	}
}

// kill ends the child with SIGKILL and waits for it.
func (in *inserter) kill(t *testing.T) {
	t.Helper()
	if err := in.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-in.done
}

func (in *inserter) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-in.done:
	case <-time.After(timeout):
		t.Fatalf("inserter still runs after %v: %s", timeout, in.output())
	}
}
