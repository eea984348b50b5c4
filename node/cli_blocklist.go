package node

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"text/tabwriter"
	"time"

	"github.com/waymark/waymark/raft"
	"github.com/waymark/waymark/store"
)

// CmdBlocklistAdd is `waymark blocklist add ENTRY... [--reason TEXT]
// [--kind block|shortener]`.
func CmdBlocklistAdd(args []string) error {
	var reason, kind *string
	fs, mk, err := parseCommandFlags("blocklist add", args, "[flags] DOMAIN|IP|CIDR...", 1, -1, func(fs *flag.FlagSet) {
		reason = fs.String("reason", "", "why the entry is there (shown to operators and in the refusal detail)")
		kind = fs.String("kind", "block", "block (refuse creates and edits, stop existing links) or shortener (refuse creates and edits)")
	})
	if err != nil {
		return err
	}
	if _, ok := store.ParseBlockKind(*kind); !ok {
		return &cliError{ExitUsage, fmt.Errorf("--kind %q: want block or shortener", *kind)}
	}
	c, err := mk()
	if err != nil {
		return err
	}
	var req BlocklistUpdate
	for _, e := range fs.Args() {
		if _, err := store.ParseBlockEntry(e); err != nil {
			return &cliError{ExitUsage, err}
		}
		req.Add = append(req.Add, BlocklistAdd{Entry: e, Kind: *kind, Reason: *reason})
	}
	var res BlocklistResult
	if err := c.call("POST", "/v1/blocklist", req, &res); err != nil {
		return err
	}
	return c.print(res, func(w *tabwriter.Writer) {
		for _, v := range res.Added {
			fmt.Fprintf(w, "added %s (%s)\n", v, *kind)
		}
	})
}

// CmdBlocklistRemove is `waymark blocklist remove ENTRY...`.
func CmdBlocklistRemove(args []string) error {
	fs, c, err := connect("blocklist remove", args, "[flags] ENTRY...", 1, -1)
	if err != nil {
		return err
	}
	var req BlocklistUpdate
	for _, e := range fs.Args() {
		if _, err := store.ParseBlockEntry(e); err != nil {
			return &cliError{ExitUsage, err}
		}
		req.Remove = append(req.Remove, e)
	}
	var res BlocklistResult
	if err := c.call("POST", "/v1/blocklist", req, &res); err != nil {
		return err
	}
	return c.print(res, func(w *tabwriter.Writer) {
		for _, v := range res.Removed {
			fmt.Fprintf(w, "removed %s\n", v)
		}
	})
}

// CmdBlocklistList is `waymark blocklist list`: every replicated entry
// (the built-in shortener list is not shown).
func CmdBlocklistList(args []string) error {
	_, c, err := connect("blocklist list", args, "[flags]", 0, 0)
	if err != nil {
		return err
	}
	var all []BlocklistEntry
	after := ""
	for {
		var page BlocklistPage
		if err := c.call("GET", "/v1/blocklist?limit=10000&after="+url.QueryEscape(after), nil, &page); err != nil {
			return err
		}
		all = append(all, page.Entries...)
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if all == nil {
		all = []BlocklistEntry{}
	}
	return c.print(all, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "ENTRY\tKIND\tADDED\tREASON")
		for _, e := range all {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.Entry, e.Kind, e.AddedAt.Format(time.RFC3339), e.Reason)
		}
	})
}

// importBatch is how many entries one log entry of an import carries: a
// few hundred KiB at most, well inside the forwarding and entry limits.
const importBatch = 1000

// ImportSummary is what `blocklist import` prints.
type ImportSummary struct {
	File     string `json:"file"`
	Format   string `json:"format"`
	Entries  int    `json:"entries"` // distinct entries sent
	Skipped  int    `json:"skipped"` // lines without a usable host
	Batches  int    `json:"batches"`
	LastIdx  uint64 `json:"index"`
	Duration string `json:"duration"`
}

// CmdBlocklistImport is `waymark blocklist import FILE --format
// hosts|urlhaus|domains`: it reads the feed, drops duplicates, and sends
// the entries in batches (one log entry each) with a progress line on
// stderr.
func CmdBlocklistImport(args []string) error {
	var format, reason, kind *string
	var batch *int
	fs, mk, err := parseCommandFlags("blocklist import", args, "[flags] FILE (- for stdin)", 1, 1, func(fs *flag.FlagSet) {
		format = fs.String("format", "", "file format: hosts (\"0.0.0.0 evil.example\"), urlhaus (abuse.ch URLhaus CSV) or domains (one per line); the summary is printed as text")
		reason = fs.String("reason", "", "reason recorded on every entry (default: the file name, or the URLhaus threat)")
		kind = fs.String("kind", "block", "block or shortener")
		batch = fs.Int("batch", importBatch, fmt.Sprintf("entries per log entry (1 to %d)", raft.MaxBlocklistChanges))
	})
	if err != nil {
		return err
	}
	if *format == "" {
		return &cliError{ExitUsage, fmt.Errorf("--format is required: hosts, urlhaus or domains")}
	}
	if _, ok := store.ParseBlockKind(*kind); !ok {
		return &cliError{ExitUsage, fmt.Errorf("--kind %q: want block or shortener", *kind)}
	}
	if *batch < 1 || *batch > raft.MaxBlocklistChanges {
		return &cliError{ExitUsage, fmt.Errorf("--batch %d: want 1 to %d", *batch, raft.MaxBlocklistChanges)}
	}
	c, err := mk()
	if err != nil {
		return err
	}
	c.http.Timeout = time.Minute
	path := fs.Arg(0)
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return &cliError{ExitUsage, fmt.Errorf("cannot open %q: %w", path, err)}
		}
		defer f.Close()
		r = f
	}
	start := time.Now()
	entries, skips, err := parseBlockFile(*format, r)
	if err != nil {
		return &cliError{ExitUsage, fmt.Errorf("cannot import %q: %w", path, err)}
	}
	entries = dedupeImport(entries)
	for i, s := range skips {
		if i == 5 {
			fmt.Fprintf(os.Stderr, "waymark: ... and %d more lines skipped\n", len(skips)-5)
			break
		}
		fmt.Fprintf(os.Stderr, "waymark: %s:%d: skipped: %s\n", path, s.Line, s.Msg)
	}
	defReason := *reason
	if defReason == "" {
		defReason = "imported from " + trimForMsg(path)
	}
	sum := ImportSummary{File: path, Format: *format, Entries: len(entries), Skipped: len(skips)}
	for lo := 0; lo < len(entries); lo += *batch {
		hi := min(lo+*batch, len(entries))
		var req BlocklistUpdate
		for _, e := range entries[lo:hi] {
			rs := defReason
			if *reason == "" && e.Reason != "" {
				rs = e.Reason
			}
			if store.CheckBlockReason(rs) != nil {
				rs = ""
			}
			req.Add = append(req.Add, BlocklistAdd{Entry: e.Value, Kind: *kind, Reason: rs})
		}
		var res BlocklistResult
		if err := c.call("POST", "/v1/blocklist", req, &res); err != nil {
			fmt.Fprintln(os.Stderr)
			return fmt.Errorf("import stopped after %d of %d entries (batches are applied whole; rerun to resume, entries already there are replaced): %w", lo, len(entries), err)
		}
		sum.Batches++
		sum.LastIdx = res.Index
		fmt.Fprintf(os.Stderr, "\rwaymark: imported %d/%d entries (%d batches)", hi, len(entries), sum.Batches)
	}
	if len(entries) > 0 {
		fmt.Fprintln(os.Stderr)
	}
	sum.Duration = time.Since(start).Round(time.Millisecond).String()
	return c.print(sum, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "imported %d entries from %s in %d batches (%d lines skipped) in %s; log index %d\n",
			sum.Entries, sum.File, sum.Batches, sum.Skipped, sum.Duration, sum.LastIdx)
	})
}
