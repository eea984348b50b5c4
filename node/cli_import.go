package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/waymark/waymark/edge"
)

// `waymark links import FILE` sends the rows of an export (ours or
// another shortener's, import_formats.go) to POST /v1/links/bulk, up to
// bulkBatch rows a call. Every item carries an external_id derived from
// its source row, so a rerun after an interruption (Ctrl-C, a kill, a
// lost connection) answers the links made the first time instead of
// making them again: resuming is running the same command again.

const (
	bulkBatch      = 1000    // items per bulk call (the API's limit)
	bulkBatchBytes = 1 << 20 // encoded items per call, well under the API's 2 MiB
	importRetries  = 8       // attempts of one call the cluster cannot take (503, no answer)
	importMaxWait  = 60      // seconds, the longest Retry-After honoured
)

// importItem is one row on its way to the API.
type importItem struct {
	row       importRow
	alias     string // sent as "alias"; cleared once the alias proved unavailable
	aliasNote string // why the original code was not kept
	tries     int
}

// importReport is the summary, and the -format json output.
type importReport struct {
	File        string          `json:"file"`
	Format      string          `json:"format"`
	Rows        int             `json:"rows"`
	Created     int             `json:"created"`
	Skipped     int             `json:"skipped"`
	Failed      int             `json:"failed"`
	Interrupted bool            `json:"interrupted,omitempty"`
	Renamed     int             `json:"renamed"`             // rows made under a new code: their own did not fit
	Generated   []importNote    `json:"generated,omitempty"` // the first maxReportedFailures of them
	Failures    []importFailure `json:"failures,omitempty"`
}

type importNote struct {
	Line int    `json:"row"`
	From string `json:"original_code"`
	Code string `json:"code"`
	Why  string `json:"reason"`
}

type importFailure struct {
	Line   int    `json:"row"`
	Code   string `json:"original_code,omitempty"`
	Reason string `json:"reason"`
}

// maxReportedFailures bounds the failures (and new codes) kept for the
// summary.
const maxReportedFailures = 1000

// CmdLinksImport is `waymark links import FILE [--format F] [--domain D]`.
func CmdLinksImport(args []string) error {
	var format, domain *string
	var progressMode *string
	fs, mk, err := parseOwnerCommand("links import", args, "FILE [--format auto|bitly|yourls|kutt|shlink|csv|json] [--domain D]", 1, 1, func(fs *flag.FlagSet) {
		format = fs.String("format", "auto", "format of FILE: "+strings.Join(importFormats, ", ")+" (auto reads it from the header)")
		domain = fs.String("domain", "", "custom domain the links are made on, sent as each item's \"domain\" (needs custom domains; default: the cluster's own)")
		progressMode = fs.String("progress", "auto", "progress display: auto (a bar on a terminal, lines otherwise), bar, lines or none")
	})
	if err != nil {
		return err
	}
	if !slices.Contains(importFormats, *format) {
		return &cliError{ExitUsage, fmt.Errorf("--format %q: want one of %s", *format, strings.Join(importFormats, ", "))}
	}
	c, err := mk()
	if err != nil {
		return err
	}
	path := fs.Arg(0)
	f, err := os.Open(path)
	if err != nil {
		return &cliError{ExitUsage, fmt.Errorf("cannot open %s: %w", path, err)}
	}
	defer f.Close()
	size := int64(0)
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	counted := &countingReader{r: f}
	rows, detected, err := newRowReader(*format, counted)
	if err != nil {
		return &cliError{ExitUsage, fmt.Errorf("%s: %w", path, err)}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	im := &importer{c: c, domain: *domain, rep: importReport{File: path, Format: detected},
		show: newImportProgress(*progressMode, os.Stderr, size, counted)}
	runErr := im.run(ctx, rows)
	im.show.done(&im.rep)
	if errors.Is(runErr, context.Canceled) {
		im.rep.Interrupted = true
		runErr = nil
	}
	if perr := c.print(im.rep, im.rep.table); perr != nil {
		return perr
	}
	switch {
	case runErr != nil:
		return &cliError{ExitError, fmt.Errorf("import stopped after %d rows: %w; rerun the same command to resume (rows already imported are skipped)", im.rep.Rows, runErr)}
	case im.rep.Interrupted:
		return &cliError{ExitError, fmt.Errorf("import interrupted after %d rows; rerun the same command to resume (rows already imported are skipped)", im.rep.Rows)}
	case im.rep.Failed > 0:
		return &cliError{ExitError, fmt.Errorf("%d of %d rows failed", im.rep.Failed, im.rep.Rows)}
	}
	return nil
}

type importer struct {
	c      *client
	domain string
	rep    importReport
	show   *importProgress
}

// run reads every row and sends them in bulk calls until none is left.
func (im *importer) run(ctx context.Context, rows rowReader) error {
	var queue []*importItem // items to send again (rate-limited, alias refused)
	eof := false
	wait := 0
	for !eof || len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if wait > 0 {
			if err := sleepCtx(ctx, time.Duration(wait)*time.Second); err != nil {
				return err
			}
			wait = 0
		}
		batch, bytes := queue, 0
		queue = nil
		for _, it := range batch {
			bytes += len(it.row.URL) + 128
		}
		for !eof && len(batch) < bulkBatch && bytes < bulkBatchBytes {
			row, err := rows.next()
			if err == io.EOF {
				eof = true
				break
			}
			if err != nil {
				return err
			}
			im.rep.Rows++
			if row.Skip != "" {
				im.fail(row, row.Skip)
				continue
			}
			it := &importItem{row: row}
			if row.Code != "" {
				if err := edge.AliasFits(row.Code); err != nil {
					it.aliasNote = err.Error()
				} else {
					it.alias = row.Code
				}
			}
			batch = append(batch, it)
			bytes += len(row.URL) + len(row.ExternalID) + 128
		}
		if len(batch) == 0 {
			continue
		}
		again, retryAfter, err := im.send(ctx, batch)
		if err != nil {
			return err
		}
		queue, wait = again, retryAfter
		im.show.update(&im.rep)
	}
	return nil
}

func (im *importer) fail(row importRow, reason string) {
	im.rep.Failed++
	if len(im.rep.Failures) < maxReportedFailures {
		im.rep.Failures = append(im.rep.Failures, importFailure{Line: row.Line, Code: row.Code, Reason: reason})
	}
}

// bulkItemResult is one item of the API's answer.
type bulkItemResult struct {
	Index      int  `json:"index"`
	Status     int  `json:"status"`
	Existing   bool `json:"existing"`
	RetryAfter int  `json:"retry_after"`
	Link       *struct {
		Code string `json:"code"`
	} `json:"link"`
	Problem *struct {
		Type   string `json:"type"`
		Detail string `json:"detail"`
	} `json:"problem"`
}

// send makes one bulk call (retrying it while the cluster cannot take
// it) and sorts its answers; it returns the items to send again and how
// long to wait first.
func (im *importer) send(ctx context.Context, batch []*importItem) ([]*importItem, int, error) {
	type wireItem struct {
		URL          string `json:"url"`
		Alias        string `json:"alias,omitempty"`
		Domain       string `json:"domain,omitempty"`
		ExternalID   string `json:"external_id,omitempty"`
		Redirect     int    `json:"redirect,omitempty"`
		ExpiresAt    string `json:"expires_at,omitempty"`
		ClickLimit   int64  `json:"click_limit,omitempty"`
		ForwardQuery *bool  `json:"forward_query,omitempty"`
	}
	body := struct {
		Links []wireItem `json:"links"`
	}{Links: make([]wireItem, len(batch))}
	for i, it := range batch {
		r := &it.row
		body.Links[i] = wireItem{URL: r.URL, Alias: it.alias, Domain: im.domain, ExternalID: r.ExternalID,
			Redirect: r.Redirect, ExpiresAt: r.ExpiresAt, ClickLimit: r.ClickLimit, ForwardQuery: r.ForwardQuery}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, 0, err
	}
	var ans struct {
		Results []bulkItemResult `json:"results"`
	}
	if err := im.post(ctx, raw, &ans); err != nil {
		return nil, 0, err
	}
	if len(ans.Results) != len(batch) {
		return nil, 0, fmt.Errorf("the node answered %d results for %d links", len(ans.Results), len(batch))
	}
	var again []*importItem
	wait := 0
	for i, r := range ans.Results {
		it := batch[i]
		code := ""
		if r.Link != nil {
			code = r.Link.Code
		}
		switch {
		case r.Status == http.StatusCreated:
			im.rep.Created++
			if it.row.Code != "" && code != it.row.Code {
				im.rep.Renamed++
				if len(im.rep.Generated) < maxReportedFailures {
					im.rep.Generated = append(im.rep.Generated, importNote{Line: it.row.Line, From: it.row.Code, Code: code, Why: it.aliasNote})
				}
			}
		case r.Status == http.StatusOK && r.Existing:
			im.rep.Skipped++
		case r.Problem == nil:
			im.fail(it.row, fmt.Sprintf("status %d", r.Status))
		case r.Problem.Type == "/problems/alias-unavailable" && it.alias != "":
			// Reserved, or taken by another link: a generated code instead.
			it.alias, it.aliasNote = "", r.Problem.Detail
			again = append(again, it)
		case (r.Status == http.StatusTooManyRequests || r.Status == http.StatusServiceUnavailable) && it.tries < importRetries:
			it.tries++
			wait = max(wait, min(max(r.RetryAfter, 1), importMaxWait))
			again = append(again, it)
		default:
			im.fail(it.row, strings.TrimPrefix(r.Problem.Type, "/problems/")+": "+r.Problem.Detail)
		}
	}
	return again, wait, nil
}

// post sends one bulk body, retrying while the cluster cannot take it
// (no leader, an unknown outcome, no answer): each retry is safe, the
// external ids answer what a lost attempt made.
func (im *importer) post(ctx context.Context, raw []byte, out any) error {
	var last error
	for attempt := range importRetries {
		if attempt > 0 {
			if err := sleepCtx(ctx, time.Duration(min(1<<attempt, importMaxWait))*time.Second/2); err != nil {
				return err
			}
		}
		req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, im.c.baseURL()+"/v1/links/bulk", bytes.NewReader(raw))
		if err != nil {
			return &cliError{ExitUsage, err}
		}
		req.Header.Set("Authorization", "Bearer "+im.c.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := im.c.http.Do(req)
		if err != nil {
			last = im.c.unreachable(err)
			continue
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		switch {
		case err != nil:
			last = fmt.Errorf("cannot read answer from %s: %w", im.c.addr, err)
			continue
		case resp.StatusCode == http.StatusMultiStatus:
			if err := json.Unmarshal(b, out); err != nil {
				return fmt.Errorf("cannot decode answer from %s: %w", im.c.addr, err)
			}
			return nil
		case resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			last = answerError("POST", "/v1/links/bulk", resp, b)
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 1 {
				if err := sleepCtx(ctx, time.Duration(min(s, importMaxWait))*time.Second); err != nil {
					return err
				}
			}
			continue
		default:
			return answerError("POST", "/v1/links/bulk", resp, b)
		}
	}
	return last
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r importReport) table(w *tabwriter.Writer) {
	fmt.Fprintf(w, "imported %s (format %s): %d rows, %d created, %d skipped (already there), %d failed\n",
		r.File, r.Format, r.Rows, r.Created, r.Skipped, r.Failed)
	if r.Interrupted {
		fmt.Fprintln(w, "interrupted: rerun the same command to resume")
	}
	if len(r.Generated) > 0 {
		fmt.Fprintf(w, "\n%d rows were made under a new code:\n", r.Renamed)
		fmt.Fprintln(w, "ROW\tORIGINAL\tCODE\tWHY A CODE WAS GENERATED")
		for _, g := range r.Generated {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", g.Line, g.From, g.Code, g.Why)
		}
		if r.Renamed > len(r.Generated) {
			fmt.Fprintf(w, "...\t\t\t%d more\n", r.Renamed-len(r.Generated))
		}
	}
	if len(r.Failures) > 0 {
		fmt.Fprintln(w, "\nROW\tORIGINAL\tFAILED BECAUSE")
		for _, f := range r.Failures {
			fmt.Fprintf(w, "%d\t%s\t%s\n", f.Line, f.Code, f.Reason)
		}
		if r.Failed > len(r.Failures) {
			fmt.Fprintf(w, "...\t\t%d more\n", r.Failed-len(r.Failures))
		}
	}
}

// countingReader counts the bytes read, for the progress display.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// progress shows how far the import is: a bar redrawn in place on a
// terminal, one plain line per bulk call otherwise.
type importProgress struct {
	mode  string // bar, lines, none
	w     io.Writer
	size  int64
	read  *countingReader
	start time.Time
}

func newImportProgress(mode string, w *os.File, size int64, read *countingReader) *importProgress {
	if mode == "auto" {
		mode = "lines"
		if st, err := w.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			mode = "bar"
		}
	}
	return &importProgress{mode: mode, w: w, size: size, read: read, start: time.Now()}
}

func (p *importProgress) percent() int {
	if p.size <= 0 {
		return 100
	}
	return int(min(100, p.read.n*100/p.size))
}

func (p *importProgress) update(r *importReport) {
	switch p.mode {
	case "bar":
		const width = 30
		filled := p.percent() * width / 100
		fmt.Fprintf(p.w, "\r[%s%s] %3d%%  %d rows: %d created, %d skipped, %d failed ",
			strings.Repeat("#", filled), strings.Repeat(".", width-filled), p.percent(), r.Rows, r.Created, r.Skipped, r.Failed)
	case "lines":
		fmt.Fprintf(p.w, "import: %d rows read (%d%%): %d created, %d skipped, %d failed, %s\n",
			r.Rows, p.percent(), r.Created, r.Skipped, r.Failed, time.Since(p.start).Round(time.Millisecond))
	}
}

func (p *importProgress) done(r *importReport) {
	if p.mode == "bar" {
		p.update(r)
		fmt.Fprintln(p.w)
	}
}
