package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// bulkAnswer is the 207 body of POST /v1/links/bulk.
type bulkAnswer struct {
	Created, Existing, Failed int
	Results                   []struct {
		Index    int
		Status   int
		Existing bool
		Link     map[string]any
		Problem  map[string]any
	}
}

func postBulk(t *testing.T, url, key, body string) (response, bulkAnswer) {
	t.Helper()
	r := do(t, "POST", url+"/v1/links/bulk", key, body)
	var a bulkAnswer
	if r.status == http.StatusMultiStatus {
		if err := json.Unmarshal(r.body, &a); err != nil {
			t.Fatalf("bulk answer: %v: %s", err, r.body)
		}
	}
	return r, a
}

// TestE2EBulk sends a bulk call with good and bad items through the edge
// of three voters (so it is forwarded to the leader), checks each item's
// result against what the API promises for it, that the links it made
// redirect on every node, and that the same call again makes nothing.
func TestE2EBulk(t *testing.T) {
	c := newCluster(t)
	all := c.threeVotersAndEdge(nil)
	key := c.createOwner("v1", "alice")
	e1 := "http://" + c.nodes["e1"].http
	body := `{"links":[
		{"url":"https://example.com/one","alias":"bulk-one","external_id":"e2e:1"},
		{"url":"ftp://example.com/"},
		{"url":"https://example.com/two","external_id":"e2e:2","redirect":301,"forward_query":false},
		{"url":"https://example.com/three","alias":"bulk-one"},
		{"url":"https://example.com/old","expires_at":"2001-01-01T00:00:00Z"},
		{"url":"https://example.com/one-again","external_id":"e2e:1"},
		{"colour":"red","url":"https://example.com/"}
	]}`
	// Item by item, as the API defines them: 0 and 2 are made; 1 has a
	// refused scheme; 3 asks for item 0's alias; 4 expired already; 5
	// repeats item 0's external id, so it answers item 0's link; 6 has
	// an unknown field.
	want := []struct {
		status int
		prob   string
	}{{201, ""}, {400, "invalid-url"}, {201, ""}, {409, "alias-unavailable"}, {400, "invalid-request"}, {200, ""}, {400, "invalid-request"}}
	check := func(a bulkAnswer, created, existing int) string {
		t.Helper()
		if a.Created != created || a.Existing != existing || a.Failed != 4 || len(a.Results) != len(want) {
			t.Fatalf("counts: created %d existing %d failed %d of %d; want %d, %d, 4 of %d", a.Created, a.Existing, a.Failed, len(a.Results), created, existing, len(want))
		}
		for i, w := range want {
			r := a.Results[i]
			st := w.status
			if st == 201 && existing == 3 {
				st = 200 // the second call: every external id is known
			}
			if r.Index != i || r.Status != st {
				t.Fatalf("item %d: got index %d status %d; want status %d: %+v", i, r.Index, r.Status, st, r)
			}
			if w.prob != "" && (r.Problem["type"] != "/problems/"+w.prob || r.Problem["status"] != float64(w.status) || r.Link != nil) {
				t.Fatalf("item %d: got %+v; want problem %s", i, r, w.prob)
			}
			if w.prob == "" && (r.Link == nil || r.Problem != nil || r.Existing != (st == 200)) {
				t.Fatalf("item %d: got %+v; want a link", i, r)
			}
		}
		if a.Results[0].Link["code"] != "bulk-one" || a.Results[5].Link["code"] != "bulk-one" || a.Results[5].Link["url"] != "https://example.com/one" {
			t.Fatalf("items 0 and 5: %v and %v; want both bulk-one to https://example.com/one", a.Results[0].Link, a.Results[5].Link)
		}
		two := a.Results[2].Link
		if !codeRE.MatchString(fmt.Sprint(two["code"])) || two["redirect"] != float64(301) || two["forward_query"] != false {
			t.Fatalf("item 2: %v; want a generated code, 301, no query forwarding", two)
		}
		return two["code"].(string)
	}
	r, a := postBulk(t, e1, key, body)
	if r.status != http.StatusMultiStatus || r.header.Get("Waymark-Index") == "" {
		t.Fatalf("bulk: %d %s", r.status, r.body)
	}
	gen := check(a, 2, 1)
	for _, n := range all {
		waitFor(t, "bulk-one redirecting on "+n, 10*time.Second, func() bool { return resolves(t, c.nodes[n], "bulk-one", "https://example.com/one") })
		waitFor(t, gen+" redirecting 301 on "+n, 10*time.Second, func() bool {
			r := do(t, "GET", "http://"+c.nodes[n].http+"/"+gen, "", "")
			return r.status == 301 && r.header.Get("Location") == "https://example.com/two"
		})
	}

	// The same call again, through a voter this time: nothing new.
	_, a = postBulk(t, "http://"+c.nodes["v2"].http, key, body)
	if again := check(a, 0, 3); again != gen {
		t.Fatalf("the second call answered item 2 with %s; want %s", again, gen)
	}
	if n := countLinks(t, e1, key); n != 2 {
		t.Fatalf("alice has %d links after two calls; want 2", n)
	}

	// Bounds: 1,001 items, a body over 2 MiB, a body that is no array.
	many := `{"links":[` + strings.Repeat(`{"url":"https://example.com/"},`, 1000) + `{"url":"https://example.com/"}]}`
	if r, _ := postBulk(t, e1, key, many); r.status != 413 || !strings.Contains(string(r.body), "payload-too-large") {
		t.Fatalf("1001 items: got %d %s; want 413 payload-too-large", r.status, r.body)
	}
	// 3 MiB announced and not sent: the node answers on the headers and
	// closes (sending the body would race that close: a reset).
	resp, raw := rawExchange(t, c.nodes["e1"].http, "POST /v1/links/bulk HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+key+
		"\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(3<<20)+"\r\n\r\n")
	expectProblem(t, "bulk body of 3 MiB", resp.StatusCode, resp.Header.Get("Content-Type"), raw, 413, "payload-too-large", "Request body too large")
	if r, _ := postBulk(t, e1, key, `{"links":{}}`); r.status != 400 || !strings.Contains(string(r.body), "invalid-request") {
		t.Fatalf("links not an array: %d %s; want 400", r.status, r.body)
	}
	if n := countLinks(t, e1, key); n != 2 {
		t.Fatalf("alice has %d links after refused calls; want 2", n)
	}
}

// countLinks pages through GET /v1/links.
func countLinks(t *testing.T, base, key string) int {
	t.Helper()
	n, cursor := 0, ""
	for {
		u := base + "/v1/links?limit=1000"
		if cursor != "" {
			u += "&cursor=" + cursor
		}
		r := do(t, "GET", u, key, "")
		if r.status != 200 {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		var page struct {
			Links      []json.RawMessage
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		n += len(page.Links)
		if page.NextCursor == nil {
			return n
		}
		cursor = *page.NextCursor
	}
}

// devNode starts a --dev node with args and returns it, its URL and key.
func bulkDevNode(t *testing.T, env []string, args ...string) (*proc, string, string) {
	t.Helper()
	dir := t.TempDir()
	full := append([]string{"--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0"}, args...)
	p := startNodeWith(t, dir, func(bin string, args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		return cmd
	}, full...)
	base := "http://" + p.http
	waitFor(t, "readyz", 30*time.Second, func() bool { return do(t, "GET", base+"/readyz", "", "").status == 200 })
	var key string
	waitFor(t, "dev-api-key", 30*time.Second, func() bool { key = readKeyMaybe(filepath.Join(dir, "dev-api-key")); return key != "" })
	return p, base, key
}

func ownerEnv(base, key string) []string {
	return []string{"WAYMARK_URL=" + base, "WAYMARK_API_KEY=" + key}
}

var summaryRE = regexp.MustCompile(`(\d+) rows, (\d+) created, (\d+) skipped \(already there\), (\d+) failed`)

// summary reads rows, created, skipped and failed from an import's output.
func summary(t *testing.T, out string) [4]int {
	t.Helper()
	m := summaryRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary in %q", out)
	}
	var s [4]int
	for i := range s {
		s[i], _ = strconv.Atoi(m[i+1])
	}
	return s
}

// generatedCode is the code an import made for a row whose original code
// it could not keep, from the summary's table.
func generatedCode(t *testing.T, out, original string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[1] == original && codeRE.MatchString(f[2]) {
			return f[2]
		}
	}
	t.Fatalf("no generated code for %s in %q", original, out)
	return ""
}

func linkURL(t *testing.T, base, key, code string) string {
	t.Helper()
	r := do(t, "GET", base+"/v1/links/"+code, key, "")
	if r.status != 200 {
		t.Fatalf("link %s: %d %s", code, r.status, r.body)
	}
	return r.json(t)["url"].(string)
}

// TestE2EBulkImportFormats imports the fixture of each foreign format
// (node/testdata/import, written from each product's documented export
// columns) through the binary, and checks the summary and every link
// against the file, read by hand.
func TestE2EBulkImportFormats(t *testing.T) {
	_, base, key := bulkDevNode(t, nil)
	env := ownerEnv(base, key)
	fixture := func(name string) string { return filepath.Join("..", "..", "node", "testdata", "import", name) }
	run := func(name string, wantExit int, want [4]int) string {
		t.Helper()
		out, errOut, code := runCLI(t, env, "links", "import", fixture(name))
		if code != wantExit || summary(t, out) != want {
			t.Fatalf("import %s: exit %d, %v; want exit %d, %v\n%s\n%s", name, code, summary(t, out), wantExit, want, out, errOut)
		}
		if !strings.Contains(errOut, "import: 3 rows read (100%)") {
			t.Fatalf("import %s: no plain progress line on a pipe: %q", name, errOut)
		}
		return out
	}

	// Bitly: 3xYzAbC has the shape of a generated code, so a code is
	// generated for it; launch-2024 is kept; ftp:// is refused.
	out := run("bitly.csv", 1, [4]int{3, 2, 0, 1})
	if got := linkURL(t, base, key, "launch-2024"); got != "https://example.org/launch" {
		t.Fatalf("launch-2024 -> %s", got)
	}
	if got := linkURL(t, base, key, generatedCode(t, out, "3xYzAbC")); got != "https://example.com/spring-sale?utm_source=bitly" {
		t.Fatalf("3xYzAbC's new code -> %s", got)
	}
	if !strings.Contains(out, "3\tAb1") && !regexp.MustCompile(`3\s+Ab1\s+invalid-url`).MatchString(out) {
		t.Fatalf("row 3 (Ab1) not reported as invalid-url: %q", out)
	}
	// A rerun makes nothing: both made rows are there already.
	run("bitly.csv", 1, [4]int{3, 0, 2, 1})

	// YOURLS: "docs" is reserved (409, then generated), "a" too short
	// (generated), "ozh" kept.
	out = run("yourls.csv", 0, [4]int{3, 3, 0, 0})
	if got := linkURL(t, base, key, "ozh"); got != "https://ozh.org/" {
		t.Fatalf("ozh -> %s", got)
	}
	if got := linkURL(t, base, key, generatedCode(t, out, "docs")); got != "https://example.com/docs" {
		t.Fatalf("docs's new code -> %s", got)
	}
	if got := linkURL(t, base, key, generatedCode(t, out, "a")); got != "https://example.com/too-short" {
		t.Fatalf("a's new code -> %s", got)
	}
	if r := do(t, "GET", base+"/v1/links/docs", key, ""); r.status != 404 {
		t.Fatalf("a link under the reserved word docs: %d", r.status)
	}

	// Kutt: kutt-demo kept, x9 too short, the loopback target refused.
	out = run("kutt.csv", 1, [4]int{3, 2, 0, 1})
	if got := linkURL(t, base, key, "kutt-demo"); got != "https://example.com/kutt?ref=kutt" {
		t.Fatalf("kutt-demo -> %s", got)
	}
	if got := linkURL(t, base, key, generatedCode(t, out, "x9")); got != "https://example.com/kutt2" {
		t.Fatalf("x9's new code -> %s", got)
	}
	if !regexp.MustCompile(`3\s+loop-me\s+invalid-url`).MatchString(out) {
		t.Fatalf("row 3 (loop-me) not reported as invalid-url: %q", out)
	}

	// Shlink: both codes kept; row 3 repeats row 1 (same domain and
	// code), so it is there already.
	run("shlink.csv", 0, [4]int{3, 2, 1, 0})
	for code, dest := range map[string]string{"promo_2024": "https://example.com/promo", "Tz9": "https://example.com/tz"} {
		if got := linkURL(t, base, key, code); got != dest {
			t.Fatalf("%s -> %s; want %s", code, got, dest)
		}
	}
	// 2 + 3 + 2 + 2 links, none twice.
	if n := countLinks(t, base, key); n != 9 {
		t.Fatalf("%d links after the imports; want 9", n)
	}
}

// TestE2EBulkImportResume interrupts an import with SIGINT, then kills
// the rerun with SIGKILL, each once the node has made a good part of it,
// runs it a third time, and checks that every row is there exactly once.
func TestE2EBulkImportResume(t *testing.T) {
	p, base, key := bulkDevNode(t, nil, "--create-rate-domain", "0")
	const rows = 50000
	var b strings.Builder
	b.WriteString("keyword,url,title,timestamp,ip,clicks\n")
	for i := range rows {
		fmt.Fprintf(&b, "k-%05d,https://example.com/r/%d,Row %d,2023-01-01 00:00:00,127.0.0.1,0\n", i, i, i)
	}
	file := filepath.Join(t.TempDir(), "yourls.csv")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	env := ownerEnv(base, key)
	created := `waymark_api_bulk_items_total{result="created"}`
	// interruptAt starts the import and sends sig once the node has made
	// at least n links, and returns what the import printed.
	interruptAt := func(n int, sig syscall.Signal) (string, int) {
		t.Helper()
		cmd := exec.Command(binPath, "links", "import", file)
		cmd.Env = append(os.Environ(), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		defer func() { cmd.Process.Kill(); <-exited }()
		waitFor(t, fmt.Sprintf("%d rows made", n), 60*time.Second, func() bool { return metricValue(t, p, created) >= float64(n) })
		cmd.Process.Signal(sig)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("import still running 30 s after %v:\n%s", sig, out.String())
		}
		made := int(metricValue(t, p, created))
		if made >= rows {
			t.Fatalf("the import finished (%d made) before %v", made, sig)
		}
		return out.String(), cmd.ProcessState.ExitCode()
	}
	// Ctrl-C: the import stops after the call in flight, says so and
	// prints its summary.
	o, code := interruptAt(10000, syscall.SIGINT)
	if code != 1 || !strings.Contains(o, "interrupted") || summary(t, o)[1] < 10000 {
		t.Fatalf("after SIGINT: exit %d\n%s", code, o)
	}
	// A kill: nothing printed, the outcome of the call in flight unknown.
	interruptAt(25000, syscall.SIGKILL)
	before := int(metricValue(t, p, created))
	t.Logf("killed the import after the node made %d links", before)

	o, errOut, code := runCLI(t, env, "links", "import", file, "--progress", "bar")
	s := summary(t, o)
	if !strings.Contains(errOut, "\r[##############################] 100%") {
		t.Fatalf("no progress bar with --progress bar: %q", errOut[max(0, len(errOut)-300):])
	}
	if code != 0 || s[0] != rows || s[1]+s[2] != rows || s[2] < before || s[3] != 0 {
		t.Fatalf("resume: exit %d, %v; want %d rows all made or skipped, at least %d skipped\n%s\n%s", code, s, rows, before, o, errOut)
	}
	if total := int(metricValue(t, p, created)); total != rows {
		t.Fatalf("the node made %d links in all; want %d", total, rows)
	}
	// Every row once, under its own keyword.
	exp := filepath.Join(t.TempDir(), "links.csv")
	if _, errOut, code := runCLI(t, env, "links", "export", "-o", exp); code != 0 {
		t.Fatalf("export: %d %s", code, errOut)
	}
	recs := readCSV(t, exp)
	seen := map[string]bool{}
	for _, r := range recs[1:] {
		seen[r[0]+" "+r[2]] = true
	}
	if len(recs)-1 != rows || len(seen) != rows {
		t.Fatalf("export holds %d links, %d distinct; want %d", len(recs)-1, len(seen), rows)
	}
	for _, i := range []int{0, before - 1, rows - 1} {
		if k := fmt.Sprintf("k-%05d https://example.com/r/%d", i, i); !seen[k] {
			t.Fatalf("row %d missing (%s)", i, k)
		}
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// heapSampler polls a node's /metrics and keeps the largest Go heap and
// resident size it saw.
type heapSampler struct {
	url       string
	stop      chan struct{}
	done      chan struct{}
	mu        sync.Mutex
	heap, rss float64
}

func sampleOnce(url string) (heap, rss float64) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_alloc_bytes "); ok {
			heap, _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(line, "process_resident_memory_bytes "); ok {
			rss, _ = strconv.ParseFloat(v, 64)
		}
	}
	return heap, rss
}

func startSampler(url string) *heapSampler {
	s := &heapSampler{url: url, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			h, r := sampleOnce(url)
			s.mu.Lock()
			s.heap, s.rss = max(s.heap, h), max(s.rss, r)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *heapSampler) peak() (heap, rss float64) {
	close(s.stop)
	<-s.done
	return s.heap, s.rss
}

// TestE2EBulkExport makes 100,000 links with bulk calls, exports them
// through the CLI while it samples the node's Go heap, and imports the
// export into a fresh node: the same links come out of it.
//
// The memory bound: the node runs with GOGC=10, so garbage the export
// leaves behind is collected once it reaches a tenth of the live heap;
// what stays above the heap before the export is what the export holds.
// Streaming holds one link and a 32 KiB buffer; building the list would
// hold 100,000 links (well over the export's own size in Go objects), and
// building the body would hold the export's size. The test demands the
// peak heap stay less than half the export's size above the baseline.
func TestE2EBulkExport(t *testing.T) {
	const total = 100000
	p, base, key := bulkDevNode(t, []string{"GOGC=10"}, "--create-rate-domain", "0")
	env := ownerEnv(base, key)
	type link struct {
		alias      string
		url        string
		redirect   int
		clickLimit int
		forward    bool
	}
	want := make([]link, total)
	for call := 0; call < total/1000; call++ {
		var b strings.Builder
		b.WriteString(`{"links":[`)
		for j := range 1000 {
			i := call*1000 + j
			l := link{url: fmt.Sprintf("https://example.com/export/%06d?utm_source=e2e", i), redirect: 302, forward: true}
			if i%100 == 0 {
				l.alias = fmt.Sprintf("al-%06d", i)
			}
			if i%10 == 3 {
				l.redirect = 301
			}
			if i%7 == 0 {
				l.clickLimit = 5
			}
			if i%3 == 0 {
				l.forward = false
			}
			want[i] = l
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"url":%q,"redirect":%d,"forward_query":%v`, l.url, l.redirect, l.forward)
			if l.alias != "" {
				fmt.Fprintf(&b, `,"alias":%q`, l.alias)
			}
			if l.clickLimit != 0 {
				fmt.Fprintf(&b, `,"click_limit":%d`, l.clickLimit)
			}
			b.WriteString("}")
		}
		b.WriteString("]}")
		r, a := postBulk(t, base, key, b.String())
		if r.status != 207 || a.Created != 1000 {
			t.Fatalf("bulk call %d: %d, %d created: %.300s", call, r.status, a.Created, r.body)
		}
	}

	baseHeap, baseRSS := sampleOnce(base + "/metrics")
	for range 5 { // the lowest of a few: after a collection
		h, _ := sampleOnce(base + "/metrics")
		baseHeap = min(baseHeap, h)
	}
	s := startSampler(base + "/metrics")
	exp := filepath.Join(t.TempDir(), "links.csv")
	start := time.Now()
	if _, errOut, code := runCLI(t, env, "links", "export", "--format", "csv", "-o", exp); code != 0 {
		t.Fatalf("export: %d %s", code, errOut)
	}
	took := time.Since(start)
	peakHeap, peakRSS := s.peak()
	st, err := os.Stat(exp)
	if err != nil {
		t.Fatal(err)
	}
	size := float64(st.Size())
	t.Logf("export of %d links: %.1f MB in %v; node heap %.1f MB before, peak %.1f MB (+%.1f MB); RSS %.1f MB before, peak %.1f MB",
		total, size/1e6, took.Round(time.Millisecond), baseHeap/1e6, peakHeap/1e6, (peakHeap-baseHeap)/1e6, baseRSS/1e6, peakRSS/1e6)
	if peakHeap-baseHeap > size/2 {
		t.Fatalf("the node's heap grew %.1f MB during an export of %.1f MB; want under half the export's size", (peakHeap-baseHeap)/1e6, size/1e6)
	}
	recs := readCSV(t, exp)
	if len(recs) != total+1 || strings.Join(recs[0], ",") != "code,short_url,url,redirect,status,expires_at,click_limit,forward_query,created_at,updated_at" {
		t.Fatalf("export: %d rows, header %v", len(recs), recs[0])
	}
	key4 := func(url, redirect, limit, forward string) string {
		return url + " " + redirect + " " + limit + " " + forward
	}
	wantSet := map[string]bool{}
	for _, l := range want {
		limit := ""
		if l.clickLimit != 0 {
			limit = strconv.Itoa(l.clickLimit)
		}
		wantSet[key4(l.url, strconv.Itoa(l.redirect), limit, strconv.FormatBool(l.forward))] = true
	}
	gotSet := func(recs [][]string) map[string]bool {
		m := map[string]bool{}
		for _, r := range recs[1:] {
			m[key4(r[2], r[3], r[6], r[7])] = true
		}
		return m
	}
	if g := gotSet(recs); len(g) != total || !sameKeys(g, wantSet) {
		t.Fatalf("the export's links differ from those made (%d distinct)", len(g))
	}
	// Oldest first, by log entry: the links of one bulk call share an
	// entry, and within it come in code order.
	entryOf := func(url string) int {
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(url, "https://example.com/export/"), "?utm_source=e2e"))
		return n / 1000
	}
	if entryOf(recs[1][2]) != 0 || entryOf(recs[1000][2]) != 0 || entryOf(recs[1001][2]) != 1 || entryOf(recs[total][2]) != total/1000-1 {
		t.Fatalf("export order: rows 1, 1000, 1001 and last from calls %d, %d, %d, %d; want 0, 0, 1, %d",
			entryOf(recs[1][2]), entryOf(recs[1000][2]), entryOf(recs[1001][2]), entryOf(recs[total][2]), total/1000-1)
	}

	// Round trip: the export into a fresh node gives the same links; the
	// aliases keep their codes, generated codes get new ones (a foreign
	// generated code could collide with this cluster's own).
	p.stop(t)
	_, base2, key2 := bulkDevNode(t, nil, "--create-rate-domain", "0")
	env2 := ownerEnv(base2, key2)
	out, errOut, code := runCLI(t, env2, "links", "import", exp, "--progress", "none")
	if code != 0 || summary(t, out) != [4]int{total, total, 0, 0} {
		t.Fatalf("import into a fresh node: exit %d %v\n%.2000s\n%s", code, summary(t, out), out, errOut)
	}
	exp2 := filepath.Join(t.TempDir(), "again.csv")
	if _, errOut, code := runCLI(t, env2, "links", "export", "-o", exp2); code != 0 {
		t.Fatalf("second export: %d %s", code, errOut)
	}
	recs2 := readCSV(t, exp2)
	if g := gotSet(recs2); len(recs2) != total+1 || !sameKeys(g, wantSet) {
		t.Fatalf("the fresh node's links differ (%d rows)", len(recs2)-1)
	}
	aliases := 0
	for _, r := range recs2[1:] {
		if strings.HasPrefix(r[0], "al-") {
			aliases++
			if n, _ := strconv.Atoi(strings.TrimPrefix(r[0], "al-")); want[n].url != r[2] {
				t.Fatalf("alias %s -> %s; want %s", r[0], r[2], want[n].url)
			}
		}
	}
	if aliases != total/100 {
		t.Fatalf("%d aliases kept; want %d", aliases, total/100)
	}
}

func sameKeys(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
