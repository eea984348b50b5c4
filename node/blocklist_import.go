package node

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"strings"

	"github.com/waymark/waymark/store"
)

// Threat-feed files `waymark blocklist import` reads. Each parser yields
// canonical entries (store.ParseBlockEntry) with the line they came from;
// a line that holds no usable host is reported, not fatal, because feeds
// carry the odd malformed row.

// importEntry is one host found in a feed.
type importEntry struct {
	Value  string // canonical
	Reason string // from the feed, when it gives one (URLhaus threat)
	Line   int
}

// importSkip is a line that could not be used.
type importSkip struct {
	Line int
	Msg  string
}

// Import file formats.
const (
	formatHosts   = "hosts"
	formatURLhaus = "urlhaus"
	formatDomains = "domains"
)

// maxImportLine bounds one line of a feed; longer lines are skipped.
const maxImportLine = 64 << 10

// parseBlockFile reads a feed in one of the formats.
func parseBlockFile(format string, r io.Reader) ([]importEntry, []importSkip, error) {
	switch format {
	case formatHosts:
		return scanLines(r, hostsLine)
	case formatDomains:
		return scanLines(r, domainsLine)
	case formatURLhaus:
		return parseURLhaus(r)
	}
	return nil, nil, fmt.Errorf("unknown format %q: want hosts, urlhaus or domains", format)
}

// scanLines runs one line parser over r, comments ('#' to the end of the
// line) and blank lines removed.
func scanLines(r io.Reader, parse func(line string) ([]string, error)) ([]importEntry, []importSkip, error) {
	var out []importEntry
	var skips []importSkip
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxImportLine)
	for n := 1; ; n++ {
		if !sc.Scan() {
			if errors.Is(sc.Err(), bufio.ErrTooLong) {
				return out, append(skips, importSkip{n, "line too long; stopped reading"}), nil
			}
			if err := sc.Err(); err != nil {
				return nil, nil, fmt.Errorf("cannot read line %d: %w", n, err)
			}
			return out, skips, nil
		}
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		hosts, err := parse(line)
		if err != nil {
			skips = append(skips, importSkip{n, err.Error()})
			continue
		}
		for _, h := range hosts {
			v, err := store.ParseBlockEntry(h)
			if err != nil {
				skips = append(skips, importSkip{n, err.Error()})
				continue
			}
			out = append(out, importEntry{Value: v, Line: n})
		}
	}
}

// hostsNoise are names every hosts file maps to itself, not threats.
var hostsNoise = map[string]bool{
	"localhost": true, "localhost.localdomain": true, "local": true, "broadcasthost": true,
	"ip6-localhost": true, "ip6-loopback": true, "ip6-localnet": true, "ip6-mcastprefix": true,
	"ip6-allnodes": true, "ip6-allrouters": true, "ip6-allhosts": true, "0.0.0.0": true,
}

// hostsLine reads "ADDRESS NAME [NAME...]" (e.g. "0.0.0.0 evil.example"):
// the names are the entries, the address (a sink) is not.
func hostsLine(line string) ([]string, error) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return nil, fmt.Errorf("want an address and a host name; got %q", trimForMsg(line))
	}
	if _, err := netip.ParseAddr(f[0]); err != nil {
		return nil, fmt.Errorf("%q is not an IP address", trimForMsg(f[0]))
	}
	var out []string
	for _, name := range f[1:] {
		if !hostsNoise[strings.ToLower(name)] {
			out = append(out, name)
		}
	}
	return out, nil
}

// domainsLine reads one domain (or address, or prefix) per line.
func domainsLine(line string) ([]string, error) {
	if f := strings.Fields(line); len(f) != 1 {
		return nil, fmt.Errorf("want one entry per line; got %q", trimForMsg(line))
	}
	return []string{line}, nil
}

// parseURLhaus reads abuse.ch URLhaus CSV exports ("csv_online",
// "csv_recent"): '#' comment lines (the header is one of them), then
// quoted fields id, dateadded, url, url_status, last_online, threat,
// tags, urlhaus_link, reporter. The URL's host is the entry; the threat
// becomes the reason. A row without an http(s) URL in the third field is
// skipped.
func parseURLhaus(r io.Reader) ([]importEntry, []importSkip, error) {
	br := bufio.NewReader(r)
	cr := csv.NewReader(br)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	cr.ReuseRecord = true
	var out []importEntry
	var skips []importSkip
	lastBad := -1
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, skips, nil
		}
		var perr *csv.ParseError
		if errors.As(err, &perr) {
			skips = append(skips, importSkip{perr.Line, perr.Err.Error()})
			if perr.Line <= lastBad {
				return out, skips, nil // no progress: stop rather than spin
			}
			lastBad = perr.Line
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("cannot read URLhaus CSV: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) > 0 && len(rec[0]) > maxImportLine {
			skips = append(skips, importSkip{line, "field too long"})
			continue
		}
		// Only the url field: others hold URLs too (urlhaus_link names
		// abuse.ch itself), so looking elsewhere would block the wrong host.
		if len(rec) < 3 || !isHTTPURL(rec[2]) {
			skips = append(skips, importSkip{line, "third field is not an http or https URL"})
			continue
		}
		raw := rec[2]
		host, err := urlHost(raw)
		if err != nil {
			skips = append(skips, importSkip{line, err.Error()})
			continue
		}
		v, err := store.ParseBlockEntry(host)
		if err != nil {
			skips = append(skips, importSkip{line, err.Error()})
			continue
		}
		e := importEntry{Value: v, Line: line}
		if len(rec) > 5 && rec[5] != "" && store.CheckBlockReason("urlhaus: "+rec[5]) == nil {
			e.Reason = "urlhaus: " + rec[5]
		}
		out = append(out, e)
	}
}

func isHTTPURL(s string) bool {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// urlHost returns the host of a feed's URL (brackets kept for IPv6).
func urlHost(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%q is not a URL with a host", trimForMsg(raw))
	}
	h := u.Hostname()
	if strings.IndexByte(h, ':') >= 0 {
		h = "[" + h + "]"
	}
	return h, nil
}

// trimForMsg shortens feed text quoted in a message.
func trimForMsg(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// dedupeImport keeps the first of each value, in file order.
func dedupeImport(in []importEntry) []importEntry {
	seen := make(map[string]struct{}, len(in))
	out := in[:0]
	for _, e := range in {
		if _, ok := seen[e.Value]; ok {
			continue
		}
		seen[e.Value] = struct{}{}
		out = append(out, e)
	}
	return out
}
