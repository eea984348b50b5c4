package node

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readAllRows(t testing.TB, format string, data []byte) ([]importRow, string, error) {
	rr, detected, err := newRowReader(format, bytes.NewReader(data))
	if err != nil {
		return nil, "", err
	}
	var rows []importRow
	for {
		r, err := rr.next()
		if errors.Is(err, io.EOF) {
			return rows, detected, nil
		}
		if err != nil {
			return rows, detected, err
		}
		rows = append(rows, r)
	}
}

func fixture(t testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", "import", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestImportReaders reads each fixture (written from its product's
// documented export columns, see import_formats.go) with format auto and
// checks every row against the file, read by hand.
func TestImportReaders(t *testing.T) {
	type want struct{ url, code, ext string }
	cases := []struct {
		file, format string
		rows         []want
	}{
		{"bitly.csv", "bitly", []want{
			{"https://example.com/spring-sale?utm_source=bitly", "3xYzAbC", "bitly:bit.ly/3xYzAbC"},
			{"https://example.org/launch", "launch-2024", "bitly:bit.ly/launch-2024"},
			{"ftp://example.net/file", "Ab1", "bitly:bit.ly/Ab1"},
		}},
		{"yourls.csv", "yourls", []want{
			{"https://example.com/docs", "docs", "yourls:/docs"},
			{"https://ozh.org/", "ozh", "yourls:/ozh"},
			{"https://example.com/too-short", "a", "yourls:/a"},
		}},
		{"kutt.csv", "kutt", []want{
			{"https://example.com/kutt?ref=kutt", "kutt-demo", "kutt:kutt.it/kutt-demo"},
			{"https://example.com/kutt2", "x9", "kutt:kutt.it/x9"},
			{"http://127.0.0.1/loop", "loop-me", "kutt:kutt.it/loop-me"},
		}},
		{"shlink.csv", "shlink", []want{
			{"https://example.com/promo", "promo_2024", "shlink:s.test/promo_2024"},
			{"https://example.com/tz", "Tz9", "shlink:go.example/Tz9"},
			{"https://example.com/promo", "promo_2024", "shlink:s.test/promo_2024"},
		}},
	}
	for _, c := range cases {
		rows, detected, err := readAllRows(t, "auto", fixture(t, c.file))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if detected != c.format || len(rows) != len(c.rows) {
			t.Fatalf("%s: detected %q with %d rows; want %q with %d", c.file, detected, len(rows), c.format, len(c.rows))
		}
		for i, w := range c.rows {
			r := rows[i]
			if r.URL != w.url || r.Code != w.code || r.ExternalID != w.ext || r.Line != i+1 || r.Skip != "" {
				t.Errorf("%s row %d: got %+v; want %+v", c.file, i+1, r, w)
			}
		}
	}
}

// TestImportOwnFormats reads our CSV and JSON export shapes: options come
// through, and a disabled link is skipped with its reason.
func TestImportOwnFormats(t *testing.T) {
	csvFile := "code,short_url,url,redirect,status,expires_at,click_limit,forward_query,created_at,updated_at\n" +
		"launch,https://sho.rt/launch,https://example.com/l,301,active,2031-01-02T03:04:05Z,10,false,2026-01-01T00:00:00Z,2026-01-01T00:00:00Z\n" +
		"old,https://sho.rt/old,https://example.com/o,302,disabled,,,true,2026-01-01T00:00:00Z,2026-01-01T00:00:00Z\n"
	jsonFile := `[{"code":"launch","short_url":"https://sho.rt/launch","url":"https://example.com/l","redirect":301,"expires_at":"2031-01-02T03:04:05Z","click_limit":10,"status":"active","forward_query":false},
{"code":"old","short_url":"https://sho.rt/old","url":"https://example.com/o","redirect":302,"expires_at":null,"click_limit":null,"status":"disabled","forward_query":true}]`
	for format, data := range map[string]string{"csv": csvFile, "json": jsonFile} {
		rows, detected, err := readAllRows(t, "auto", []byte(data))
		if err != nil || detected != format || len(rows) != 2 {
			t.Fatalf("%s: %v %q %d rows", format, err, detected, len(rows))
		}
		r := rows[0]
		if r.URL != "https://example.com/l" || r.Code != "launch" || r.Redirect != 301 || r.ExpiresAt != "2031-01-02T03:04:05Z" ||
			r.ClickLimit != 10 || r.ForwardQuery == nil || *r.ForwardQuery || r.ExternalID != "waymark:sho.rt/launch" || r.Skip != "" {
			t.Errorf("%s row 1: %+v", format, r)
		}
		if !strings.Contains(rows[1].Skip, "disabled") {
			t.Errorf("%s row 2: skip %q; want the disabled status named", format, rows[1].Skip)
		}
	}
}

// fuzzReader is the property every reader keeps on any bytes: no panic,
// rows numbered in order, and an external id of at most 256 bytes on
// every row that is not skipped.
func fuzzReader(f *testing.F, format string, seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add([]byte{})
	f.Add([]byte("\xef\xbb\xbf"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, _, _ := readAllRows(t, format, data)
		for i, r := range rows {
			if i > 0 && r.Line <= rows[i-1].Line {
				t.Fatalf("row %d numbered %d after %d", i, r.Line, rows[i-1].Line)
			}
			if r.Skip == "" && (r.ExternalID == "" || len(r.ExternalID) > 256 || r.URL == "") {
				t.Fatalf("row %d: %+v", i, r)
			}
		}
	})
}

func FuzzImportBitly(f *testing.F)  { fuzzReader(f, "bitly", fixture(f, "bitly.csv")) }
func FuzzImportYOURLS(f *testing.F) { fuzzReader(f, "yourls", fixture(f, "yourls.csv")) }
func FuzzImportKutt(f *testing.F)   { fuzzReader(f, "kutt", fixture(f, "kutt.csv")) }
func FuzzImportShlink(f *testing.F) { fuzzReader(f, "shlink", fixture(f, "shlink.csv")) }
func FuzzImportOwnCSV(f *testing.F) {
	fuzzReader(f, "csv", []byte("code,short_url,url,redirect,status,expires_at,click_limit,forward_query\nab-c,https://s/ab-c,https://e/,302,active,,5,true\n"))
}
func FuzzImportJSON(f *testing.F) {
	fuzzReader(f, "json", []byte(`[{"code":"ab-c","short_url":"https://s/ab-c","url":"https://e/","redirect":302,"status":"active"}]`))
}
func FuzzImportAuto(f *testing.F) {
	fuzzReader(f, "auto", fixture(f, "bitly.csv"), fixture(f, "yourls.csv"), fixture(f, "kutt.csv"), fixture(f, "shlink.csv"))
}
