package node

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// The readers of `waymark links import`. Each turns one export format
// into importRows; the columns each reads are the ones its product
// documents for its export:
//
//   - bitly: the fields of a Bitlink in Bitly's API v4 and its CSV
//     exports (POST /v4/groups/{group_guid}/exports, links_list; the
//     dashboard's Settings → Data → Export): id ("bit.ly/abc"), link,
//     long_url, title, created_at, archived, tags, custom_bitlinks.
//     https://dev.bitly.com/api-reference (Bitlink object).
//   - yourls: the columns of YOURLS' yourls_url table, which the export
//     plugins write as they are: keyword, url, title, timestamp, ip,
//     clicks. https://github.com/YOURLS/YOURLS/blob/master/includes/functions-install.php
//   - kutt: Kutt has no CSV export of its own; a CSV of its API v2 link
//     objects (GET /api/v2/links): id, address, banned, password, target,
//     description, visit_count, link, created_at, updated_at.
//     https://github.com/thedevs-network/kutt (docs/api/api.yml, Link).
//   - shlink: the web client's "Export" of the short URL list
//     (short_urls.csv, ExportableShortUrl): createdAt, domain, shortCode,
//     shortUrl, longUrl, title, tags, visits; shlink-importer's CSV
//     ("Long URL", "Short code", optional "Domain", "Title", "Tags") reads
//     the same. https://github.com/shlinkio/shlink-web-client
//     (src/short-urls/data, ExportableShortUrl) and
//     https://github.com/shlinkio/shlink-importer (README, CSV).
//   - csv, json: our own export (GET /v1/links/export): the columns of
//     edge's exportColumns, or the array of link objects.
//
// Header names match loosely (case, spaces, '_' and '-' ignored), so
// "Long URL", "long_url" and "longUrl" are one column.

// importRow is one link to import, or the reason its row is skipped.
type importRow struct {
	Line         int    // 1-based data row (JSON: array element)
	URL          string // destination
	Code         string // the source's code, kept as the alias when it fits
	ExternalID   string // source + original short domain + code: makes a rerun idempotent
	Redirect     int    // 0: the default
	ExpiresAt    string // RFC 3339, "" for none
	ClickLimit   int64  // 0 for none
	ForwardQuery *bool
	Skip         string // not imported, and why (e.g. a disabled link of our export)
}

// importFormats are the --format values, auto first.
var importFormats = []string{"auto", "bitly", "yourls", "kutt", "shlink", "csv", "json"}

// rowReader yields the rows of one file; io.EOF ends it.
type rowReader interface {
	next() (importRow, error)
}

// maxImportField bounds one CSV field or JSON element, so a file without
// a line break cannot make the reader hold it whole.
const maxImportField = 64 << 10

// newRowReader opens r in format ("auto" detects it from the first line)
// and returns the reader and the format it reads.
func newRowReader(format string, r io.Reader) (rowReader, string, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(4096)
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimLeft(head, " \t\r\n")
	if format == "json" || (format == "auto" && len(trimmed) > 0 && trimmed[0] == '[') {
		return newJSONReader(br), "json", nil
	}
	cr := csv.NewReader(skipBOM(br))
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	cr.ReuseRecord = false
	header, err := cr.Read()
	if err == io.EOF {
		return nil, "", errors.New("the file is empty: want a header row")
	}
	if err != nil {
		return nil, "", fmt.Errorf("cannot read the header row: %w", err)
	}
	cols := map[string]int{}
	for i, h := range header {
		if _, dup := cols[normColumn(h)]; !dup {
			cols[normColumn(h)] = i
		}
	}
	if format == "auto" {
		if format = detectFormat(cols); format == "" {
			return nil, "", fmt.Errorf("cannot tell the format from the header %q; give --format", strings.Join(header, ","))
		}
	}
	m, ok := csvMappers[format]
	if !ok {
		return nil, "", fmt.Errorf("--format %q: want one of %s", format, strings.Join(importFormats, ", "))
	}
	if err := m.check(cols); err != nil {
		return nil, "", fmt.Errorf("%s export: %w", format, err)
	}
	return &csvReader{r: cr, cols: cols, m: m, format: format}, format, nil
}

func skipBOM(br *bufio.Reader) io.Reader {
	if b, err := br.Peek(3); err == nil && string(b) == "\xef\xbb\xbf" {
		br.Discard(3)
	}
	return br
}

// normColumn is a header name matched loosely.
func normColumn(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		if r != ' ' && r != '_' && r != '-' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func detectFormat(cols map[string]int) string {
	has := func(names ...string) bool {
		for _, n := range names {
			if _, ok := cols[n]; ok {
				return true
			}
		}
		return false
	}
	switch {
	case has("code") && has("url") && has("shorturl"):
		return "csv"
	case has("shortcode") && has("longurl"):
		return "shlink"
	case has("longurl") && has("link", "id", "bitlink"):
		return "bitly"
	case has("keyword") && has("url"):
		return "yourls"
	case has("target") && has("address", "link"):
		return "kutt"
	case has("url"):
		return "csv"
	}
	return ""
}

// csvMapper names one format's columns.
type csvMapper struct {
	url, code, host string // the destination, the code, the original short link (for its host)
	required        []string
	row             func(r *importRow, get func(string) string) // format specifics, after url and code
}

func (m csvMapper) check(cols map[string]int) error {
	for _, c := range m.required {
		if _, ok := cols[c]; !ok {
			return fmt.Errorf("the header has no %q column", c)
		}
	}
	return nil
}

var csvMappers = map[string]csvMapper{
	"bitly":  {url: "longurl", code: "id", host: "link", required: []string{"longurl"}},
	"yourls": {url: "url", code: "keyword", required: []string{"url", "keyword"}},
	"kutt":   {url: "target", code: "address", host: "link", required: []string{"target"}},
	"shlink": {url: "longurl", code: "shortcode", host: "shorturl", required: []string{"longurl", "shortcode"}},
	"csv":    {url: "url", code: "code", host: "shorturl", required: []string{"url"}, row: ownRow},
}

type csvReader struct {
	r      *csv.Reader
	cols   map[string]int
	m      csvMapper
	format string
	line   int
}

func (c *csvReader) next() (importRow, error) {
	for {
		rec, err := c.r.Read()
		if err == io.EOF {
			return importRow{}, io.EOF
		}
		c.line++
		row := importRow{Line: c.line}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) && pe.Err != csv.ErrFieldCount {
				row.Skip = "not valid CSV: " + pe.Err.Error()
				return row, nil
			}
			return importRow{}, fmt.Errorf("cannot read row %d: %w", c.line, err)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			c.line--
			continue // a blank line
		}
		get := func(col string) string {
			if i, ok := c.cols[col]; ok && i < len(rec) {
				if v := strings.TrimSpace(rec[i]); len(v) <= maxImportField {
					return v
				}
			}
			return ""
		}
		row.URL = get(c.m.url)
		host, code := "", get(c.m.code)
		if c.format == "bitly" && code == "" {
			code = get("bitlink")
			if code == "" {
				code = get("link")
			}
		}
		// Bitly's id and Kutt's link carry the short domain: "bit.ly/abc".
		if h, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(code, "https://"), "http://"), "/"); ok && c.format == "bitly" {
			host, code = h, rest
		}
		if host == "" && c.m.host != "" {
			host = shortHost(get(c.m.host))
		}
		if c.format == "shlink" && get("domain") != "" {
			host = strings.ToLower(get("domain"))
		}
		row.Code = code
		if c.m.row != nil {
			c.m.row(&row, get)
		}
		source := c.format
		if source == "csv" {
			source = "waymark" // our CSV and JSON exports name a link alike
		}
		row.ExternalID = externalID(source, host, code, c.line, row.URL)
		if row.URL == "" && row.Skip == "" {
			row.Skip = "no destination URL in column " + c.m.url
		}
		return row, nil
	}
}

// ownRow reads the columns only our export has.
func ownRow(r *importRow, get func(string) string) {
	if st := get("status"); st != "" && st != "active" {
		r.Skip = "status " + st + " is not imported (only active links are)"
	}
	if v := get("redirect"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			r.Redirect = n
		} else {
			r.Skip = fmt.Sprintf("redirect %q is not a number", v)
		}
	}
	r.ExpiresAt = get("expiresat")
	if v := get("clicklimit"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			r.ClickLimit = n
		} else {
			r.Skip = fmt.Sprintf("click_limit %q is not a number", v)
		}
	}
	if v := get("forwardquery"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			r.Skip = fmt.Sprintf("forward_query %q is not true or false", v)
		}
		r.ForwardQuery = &b
	}
}

// shortHost is the host of a short link ("https://sho.rt/abc" or
// "sho.rt/abc"), lower-cased; "" when it has none.
func shortHost(s string) string {
	if s == "" {
		return ""
	}
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Host)
}

// externalID names a source row for the bulk API: the format, the
// original short domain and code, so a rerun of the same file (or of
// another export of the same links) answers the links made the first
// time. A row without a code is named by its position and destination.
func externalID(format, host, code string, line int, dest string) string {
	if code != "" {
		id := format + ":" + host + "/" + code
		if len(id) <= 256 {
			return id
		}
	}
	sum := sha256.Sum256([]byte(dest))
	return format + ":row:" + strconv.Itoa(line) + ":" + hex.EncodeToString(sum[:8])
}

// jsonReader reads our JSON export: one array of link objects.
type jsonReader struct {
	dec   *json.Decoder
	line  int
	begun bool
}

func newJSONReader(r io.Reader) *jsonReader {
	return &jsonReader{dec: json.NewDecoder(skipBOMReader(r))}
}

func skipBOMReader(r io.Reader) io.Reader {
	if br, ok := r.(*bufio.Reader); ok {
		return skipBOM(br)
	}
	return r
}

// jsonLink is the part of a link object the import reads.
type jsonLink struct {
	Code         string  `json:"code"`
	ShortURL     string  `json:"short_url"`
	URL          string  `json:"url"`
	Redirect     int     `json:"redirect"`
	ExpiresAt    *string `json:"expires_at"`
	ClickLimit   *int64  `json:"click_limit"`
	Status       string  `json:"status"`
	ForwardQuery *bool   `json:"forward_query"`
}

func (j *jsonReader) next() (importRow, error) {
	if !j.begun {
		tok, err := j.dec.Token()
		if err != nil {
			return importRow{}, fmt.Errorf("cannot read the JSON export: %w", err)
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return importRow{}, errors.New("the JSON export must be an array of link objects")
		}
		j.begun = true
	}
	if !j.dec.More() {
		if _, err := j.dec.Token(); err != nil {
			return importRow{}, fmt.Errorf("cannot read the end of the JSON export: %w", err)
		}
		return importRow{}, io.EOF
	}
	j.line++
	var raw json.RawMessage
	if err := j.dec.Decode(&raw); err != nil {
		return importRow{}, fmt.Errorf("cannot read element %d of the JSON export: %w", j.line, err)
	}
	row := importRow{Line: j.line}
	var l jsonLink
	if len(raw) > maxImportField {
		row.Skip = "element is larger than 64 KiB"
		return row, nil
	}
	if err := json.Unmarshal(raw, &l); err != nil {
		row.Skip = "not a link object: " + err.Error()
		return row, nil
	}
	row.URL, row.Code, row.Redirect, row.ForwardQuery = l.URL, l.Code, l.Redirect, l.ForwardQuery
	if l.ExpiresAt != nil {
		row.ExpiresAt = *l.ExpiresAt
	}
	if l.ClickLimit != nil {
		row.ClickLimit = *l.ClickLimit
	}
	if l.Status != "" && l.Status != "active" {
		row.Skip = "status " + l.Status + " is not imported (only active links are)"
	}
	row.ExternalID = externalID("waymark", shortHost(l.ShortURL), l.Code, j.line, l.URL)
	if row.URL == "" && row.Skip == "" {
		row.Skip = `no destination "url"`
	}
	return row, nil
}
