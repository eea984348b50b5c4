package node

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// progress reports bytes moved on out: on a terminal one line rewritten
// every 200 ms, elsewhere (a log) a line every 5 s; a final line always.
type progress struct {
	out   io.Writer
	verb  string
	total int64 // 0 when unknown
	n     atomic.Int64
	tty   bool
	last  time.Time
}

func newProgress(out *os.File, verb string, total int64) *progress {
	st, err := out.Stat()
	return &progress{out: out, verb: verb, total: total, tty: err == nil && st.Mode()&os.ModeCharDevice != 0, last: time.Now()}
}

func (p *progress) add(n int) {
	p.n.Add(int64(n))
	every := 5 * time.Second
	if p.tty {
		every = 200 * time.Millisecond
	}
	if now := time.Now(); now.Sub(p.last) >= every {
		p.last = now
		p.print()
	}
}

func (p *progress) print() {
	prefix, end := "", "\n"
	if p.tty {
		prefix, end = "\r", ""
	}
	if p.total > 0 {
		fmt.Fprintf(p.out, "%s%s %d of %d bytes (%d%%)%s", prefix, p.verb, p.n.Load(), p.total, p.n.Load()*100/p.total, end)
		return
	}
	fmt.Fprintf(p.out, "%s%s %d bytes%s", prefix, p.verb, p.n.Load(), end)
}

func (p *progress) done() {
	p.print()
	if p.tty {
		fmt.Fprintln(p.out)
	}
}

type progressWriter struct {
	w io.Writer
	p *progress
}

func (w progressWriter) Write(b []byte) (int, error) {
	n, err := w.w.Write(b)
	w.p.add(n)
	return n, err
}

type progressReader struct {
	r io.Reader
	p *progress
}

func (r progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.add(n)
	return n, err
}

// snapshotRequest sends one snapshot call; the answer's body is the
// caller's to close. A non-2xx answer becomes an error with its detail.
func (c *client) snapshotRequest(method string, body io.Reader, size int64) (*http.Response, error) {
	req, err := http.NewRequest(method, c.baseURL()+"/v1/snapshot", body)
	if err != nil {
		return nil, &cliError{ExitUsage, fmt.Errorf("bad admin address %q: %w", c.addr, err)}
	}
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := (&http.Client{}).Do(req) // no timeout: a backup takes as long as it takes
	if err != nil {
		return nil, c.unreachable(err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, answerError(method, "/v1/snapshot", resp, b)
	}
	return resp, nil
}

// CmdSnapshotSave is `waymark snapshot save FILE`: a backup of every link,
// owner, API key, site and counter, checked before it is renamed to FILE.
func CmdSnapshotSave(args []string) error {
	fs, c, err := connect("snapshot save", args, "[flags] FILE", 1, 1)
	if err != nil {
		return err
	}
	path := fs.Arg(0)
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return &cliError{ExitUsage, fmt.Errorf("cannot create %s: %w", path, err)}
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	resp, err := c.snapshotRequest(http.MethodGet, nil, 0)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	p := newProgress(os.Stderr, "written", 0)
	n, err := io.Copy(progressWriter{tmp, p}, resp.Body)
	p.done()
	if err != nil {
		return fmt.Errorf("snapshot download cut short after %d bytes: %w", n, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("cannot sync %s: %w", tmp.Name(), err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	h, _, _, err := checkBackup(tmp, n)
	if err != nil {
		return fmt.Errorf("the node sent a bad snapshot (nothing written to %s): %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cannot rename to %s: %w", path, err)
	}
	if c.format == "json" {
		return c.print(map[string]any{"file": path, "bytes": n, "index": h.Index, "created": h.Created}, nil)
	}
	_, err = fmt.Fprintf(c.out, "saved snapshot %s: %d bytes, index %d\n", path, n, h.Index)
	return err
}

// CmdSnapshotRestore is `waymark snapshot restore FILE`: replace the whole
// cluster state with a backup, through the leader. The file is checked
// here first, and again by the node before anything changes.
func CmdSnapshotRestore(args []string) error {
	fs, c, err := connect("snapshot restore", args, "[flags] FILE", 1, 1)
	if err != nil {
		return err
	}
	path := fs.Arg(0)
	f, err := os.Open(path)
	if err != nil {
		return &cliError{ExitUsage, fmt.Errorf("cannot open snapshot: %w", err)}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if _, _, _, err := checkBackup(f, st.Size()); err != nil {
		return fmt.Errorf("refusing %s (nothing was sent): %w", path, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	p := newProgress(os.Stderr, "read", st.Size())
	resp, err := c.snapshotRequest(http.MethodPut, progressReader{f, p}, st.Size())
	p.done()
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out RestoreResult
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("cannot decode answer from %s: %w", c.addr, err)
	}
	return c.print(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "restored snapshot %s: %d bytes, source index %d, saved %s, took %s\n", path, out.Bytes, out.SourceIndex, out.Created.Format(time.RFC3339), out.Took)
	})
}
