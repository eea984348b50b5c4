package node

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
)

// CmdLinksExport is `waymark links export [--format csv|json] [-o FILE]`:
// it streams GET /v1/links/export to FILE (or stdout) as it arrives, so
// the export never sits in memory here either. A file is written beside
// its final name and renamed once the whole body has arrived: a cut
// export never looks like a whole one.
func CmdLinksExport(args []string) error {
	var format, out *string
	fs, mk, err := parseOwnerCommand("links export", args, "[--format csv|json] [-o FILE]", 0, 0, func(fs *flag.FlagSet) {
		format = fs.String("format", "csv", "file format: csv or json")
		out = fs.String("o", "", "file to write (default: standard output)")
	})
	if err != nil {
		return err
	}
	_ = fs
	if *format != "csv" && *format != "json" {
		return &cliError{ExitUsage, fmt.Errorf("--format %q: want csv or json", *format)}
	}
	c, err := mk()
	if err != nil {
		return err
	}
	path := "/v1/links/export?format=" + *format
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, c.baseURL()+path, nil)
	if err != nil {
		return &cliError{ExitUsage, err}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	// No overall timeout: a large export takes as long as it takes; the
	// server bounds each chunk's write.
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return answerError("GET", path, resp, b)
	}
	if *out == "" {
		if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
			return fmt.Errorf("export cut off: %w", err)
		}
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".part-*")
	if err != nil {
		return &cliError{ExitUsage, fmt.Errorf("cannot write %s: %w", *out, err)}
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	n, err := io.Copy(tmp, resp.Body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("export cut off after %d bytes: %w", n, err)
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return errors.Join(fmt.Errorf("cannot write %s", *out), err)
	}
	fmt.Fprintf(os.Stderr, "exported %d bytes to %s\n", n, *out)
	return nil
}
