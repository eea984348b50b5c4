package edge

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/waymark/waymark/store"
)

// FileReport applies a report the way the FSM does for a committed entry.
func (w *testWriter) FileReport(_ context.Context, f *store.ReportFiling) (store.Report, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var r store.Report
	_, err := w.apply(func(b *store.Batch, index uint64) error {
		var err error
		r, err = b.FileReport(f, index)
		return err
	})
	return r, err
}

func (w *testWriter) appliedIndex() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.index
}

type reportAnswer struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func (e *env) fileReport(body string) reportAnswer {
	e.t.Helper()
	r := e.do("POST", "/v1/reports", "", body)
	e.expect(r, 202, "")
	var a reportAnswer
	if err := json.Unmarshal(r.body, &a); err != nil || a.ID == "" || a.Status != "received" {
		e.t.Fatalf("report answer %s: %v", r.body, err)
	}
	return a
}

func TestReportsCoalesceRepeatedReportsOfACodeIntoOneLogEntry(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Reports.PerIPBurst = 100 })
	e.w.putLink(t, store.Link{Code: "abc1234", URL: "https://example.com/x", Owner: "alice"})
	before := e.w.appliedIndex()

	first := e.fileReport(`{"url": "http://` + e.addr + `/abc1234", "reason": "phishing", "details": "  fake bank login  "}`)
	if got := e.w.appliedIndex(); got != before+1 {
		t.Fatalf("first report wrote %d entries; want 1", got-before)
	}
	// Nine more within the window, by bare code, by scheme-less URL, with a
	// query: all fold into the first one's case with no log write.
	bodies := []string{
		`{"url": "abc1234", "reason": "spam"}`,
		`{"url": "` + e.addr + `/abc1234", "reason": "spam", "details": "second"}`,
		`{"url": "http://` + e.addr + `/abc1234?utm=1#x", "reason": "other"}`,
	}
	for i := 0; i < 9; i++ {
		if a := e.fileReport(bodies[i%len(bodies)]); a.ID != first.ID {
			t.Fatalf("report %d: case %s; want the open case %s", i+2, a.ID, first.ID)
		}
		e.clock.Advance(time.Second)
	}
	if got := e.w.appliedIndex(); got != before+1 {
		t.Fatalf("10 reports in the window wrote %d entries; want 1", got-before)
	}
	rep, found, err := e.st.OpenReport("abc1234")
	if err != nil || !found || rep.Count != 1 {
		t.Fatalf("case before the window ends: %+v, %v, %v", rep, found, err)
	}
	e.clock.Advance(2 * time.Second) // 11 s after the first: past the 10 s window
	e.srv.reports.flush(context.Background(), e.clock.Now())
	if got := e.w.appliedIndex(); got != before+2 {
		t.Fatalf("after the window: %d entries; want 2 (one for the nine folded reports)", got-before)
	}
	rep, _, _ = e.st.OpenReport("abc1234")
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixMilli()
	want := store.Report{ID: rep.ID, Code: "abc1234", Count: 10, Reasons: store.ReasonPhishing | store.ReasonSpam | store.ReasonOther,
		FirstAt: start, LastAt: start + 8000, // the tenth report came 8 s after the first
		Details: []string{"fake bank login", "second", "second", "second"}}
	if !reflect.DeepEqual(rep, want) {
		t.Fatalf("case after the window:\n got %+v\nwant %+v", rep, want)
	}
	// A window with nothing folded closes; the next report writes again.
	e.clock.Advance(11 * time.Second)
	e.srv.reports.flush(context.Background(), e.clock.Now())
	if got := e.w.appliedIndex(); got != before+2 {
		t.Fatalf("empty window wrote an entry")
	}
	e.fileReport(`{"url": "abc1234", "reason": "malware"}`)
	if got := e.w.appliedIndex(); got != before+3 {
		t.Fatalf("report after the window closed: %d entries; want 3", got-before)
	}
}

func TestReportsAreRateLimitedPerClientIP(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Reports.PerIPBurst = 2 }) // default rate: one a minute
	e.w.putLink(t, store.Link{Code: "abc1234", URL: "https://example.com/x", Owner: "alice"})
	body := `{"url": "abc1234", "reason": "spam"}`
	e.fileReport(body)
	e.fileReport(body)
	r := e.do("POST", "/v1/reports", "", body)
	e.expect(r, 429, "rate-limited")
	// Two tokens spent, none left: one more comes after 1/rate = 60 s.
	if got := r.get("Retry-After"); got != "60" {
		t.Fatalf("Retry-After: %q; want 60", got)
	}
	// Bad bodies take tokens too, so probing for codes is limited.
	e.clock.Advance(30 * time.Second)
	e.expect(e.do("POST", "/v1/reports", "", `{}`), 429, "rate-limited")
	e.clock.Advance(30 * time.Second)
	e.fileReport(body)
}

func TestReportsRefuseBadBodiesWithoutWriting(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Reports.PerIPBurst = 100 })
	e.w.putLink(t, store.Link{Code: "abc1234", URL: "https://example.com/x", Owner: "alice"})
	before := e.w.appliedIndex()
	cases := []struct {
		name, body string
		status     int
		problem    string
	}{
		{"empty", ``, 400, "invalid-request"},
		{"not JSON", `url=abc1234`, 400, "invalid-request"},
		{"array", `["abc1234"]`, 400, "invalid-request"},
		{"unknown field", `{"url": "abc1234", "reason": "spam", "email": "a@b"}`, 400, "invalid-request"},
		{"no url", `{"reason": "spam"}`, 400, "invalid-request"},
		{"url not a string", `{"url": 5, "reason": "spam"}`, 400, "invalid-request"},
		{"no reason", `{"url": "abc1234"}`, 400, "invalid-request"},
		{"unknown reason", `{"url": "abc1234", "reason": "boring"}`, 400, "invalid-request"},
		{"reason in capitals", `{"url": "abc1234", "reason": "SPAM"}`, 400, "invalid-request"},
		{"details too long", `{"url": "abc1234", "reason": "spam", "details": "` + strings.Repeat("é", 501) + `"}`, 400, "invalid-request"},
		{"another host", `{"url": "https://bit.ly/abc1234", "reason": "spam"}`, 400, "invalid-request"},
		{"another port", `{"url": "http://127.0.0.1:1/abc1234", "reason": "spam"}`, 400, "invalid-request"},
		{"no code in path", `{"url": "http://` + e.addr + `/", "reason": "spam"}`, 400, "invalid-request"},
		{"nested path", `{"url": "http://` + e.addr + `/v1/links/abc1234", "reason": "spam"}`, 400, "invalid-request"},
		{"user info", `{"url": "http://x@` + e.addr + `/abc1234", "reason": "spam"}`, 400, "invalid-request"},
		{"unknown code", `{"url": "nosuch1", "reason": "spam"}`, 404, "not-found"},
		{"unknown code by URL", `{"url": "http://` + e.addr + `/nosuch1", "reason": "spam"}`, 404, "not-found"},
		{"body over 4 KiB", `{"url": "abc1234", "reason": "spam", "details": "` + strings.Repeat("a", 4100) + `"}`, 413, "payload-too-large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			e.expect(e.do("POST", "/v1/reports", "", tc.body), tc.status, tc.problem)
		})
	}
	e.t = t
	r := e.do("GET", "/v1/reports", "", "")
	e.expect(r, 405, "method-not-allowed")
	if got := e.w.appliedIndex(); got != before {
		t.Fatalf("refused reports wrote %d entries; want none", got-before)
	}
	// Exactly 1000 characters of details is accepted.
	e.fileReport(`{"url": "abc1234", "reason": "spam", "details": "` + strings.Repeat("x", 1000) + `"}`)
}

func TestReportedCodeMatchesOnlyThisService(t *testing.T) {
	o := newPublicOrigin("https://Sho.rt")
	ok := map[string]string{
		"abc1234":                    "abc1234",
		"https://sho.rt/abc1234":     "abc1234",
		"http://SHO.RT./abc1234":     "abc1234",
		"sho.rt/abc1234":             "abc1234",
		"https://sho.rt:443/abc1234": "abc1234",
		"https://sho.rt/abc1234?x=1": "abc1234",
	}
	for in, want := range ok {
		if got, err := o.reportedCode(in); err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"https://sho.rt.evil/abc1234", "https://evil/sho.rt/abc1234", "https://sho.rt:8443/abc1234",
		"ftp://sho.rt/abc1234", "https://sho.rt/ab", "https://sho.rt/abc1234/x", "ab", "a b c"} {
		if got, err := o.reportedCode(in); err == nil {
			t.Errorf("%q: accepted as %q", in, got)
		}
	}
	withPort := newPublicOrigin("http://127.0.0.1:8080/s")
	if got, err := withPort.reportedCode("http://127.0.0.1:8080/s/abc1234"); err != nil || got != "abc1234" {
		t.Errorf("path prefix: got %q, %v", got, err)
	}
	if _, err := withPort.reportedCode("http://127.0.0.1/s/abc1234"); err == nil {
		t.Errorf("default port accepted for a public URL on :8080")
	}
}

// FuzzDecodeReport feeds arbitrary bodies to the report decoder: it never
// panics, and whatever it accepts is within the bounds the store holds.
func FuzzDecodeReport(f *testing.F) {
	f.Add([]byte(`{"url": "https://sho.rt/abc1234", "reason": "phishing", "details": "fake bank"}`))
	f.Add([]byte(`{"url": "abc1234", "reason": "other"}`))
	f.Add([]byte(`{"url": "sho.rt/abc", "reason": "spam", "details": null}`))
	f.Add([]byte(`{"url": "\u0000", "reason": "spam", "details": "\ud800"}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	o := newPublicOrigin("https://sho.rt")
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeReport(body)
		if err != nil {
			return
		}
		if !req.Reason.Valid() || len(req.Reason.Names()) != 1 {
			t.Fatalf("accepted reason %#x", req.Reason)
		}
		if len(req.Details) > store.MaxReportDetailLen || !utf8.ValidString(req.Details) || strings.TrimSpace(req.Details) != req.Details {
			t.Fatalf("accepted details %q", req.Details)
		}
		code, err := o.reportedCode(req.Target)
		if err != nil {
			return
		}
		if !validCodeSyntax(code) {
			t.Fatalf("accepted code %q from %q", code, req.Target)
		}
		f := store.ReportFiling{Code: code, Reasons: req.Reason, Count: 1}
		if req.Details != "" {
			f.Details = []string{req.Details}
		}
		if err := f.Check(); err != nil {
			t.Fatalf("accepted report the store refuses: %v", err)
		}
	})
}

func TestReportsFoldedInAnOpenWindowAreWrittenAtShutdown(t *testing.T) {
	e := newEnv(t, nil)
	e.w.putLink(t, store.Link{Code: "abc1234", URL: "https://example.com/x", Owner: "alice"})
	e.fileReport(`{"url": "abc1234", "reason": "spam"}`)
	e.fileReport(`{"url": "abc1234", "reason": "illegal", "details": "late"}`)
	e.srv.reports.close() // as Shutdown does; the cleanup's Shutdown closes again
	rep, _, err := e.st.OpenReport("abc1234")
	if err != nil || rep.Count != 2 || rep.Reasons != store.ReasonSpam|store.ReasonIllegal || len(rep.Details) != 1 {
		t.Fatalf("case after close: %+v, %v; want both reports", rep, err)
	}
}

func TestReportsFlushWaitsForTheNodeWriteBudget(t *testing.T) {
	// 0.01 writes/s, burst 1: the first report spends the only token.
	e := newEnv(t, func(c *Config) { c.Reports.GlobalRate = 0.01; c.Reports.PerIPBurst = 100 })
	e.w.putLink(t, store.Link{Code: "abc1234", URL: "https://example.com/x", Owner: "alice"})
	e.w.putLink(t, store.Link{Code: "def5678", URL: "https://example.com/y", Owner: "alice"})
	e.fileReport(`{"url": "abc1234", "reason": "spam"}`)
	e.fileReport(`{"url": "abc1234", "reason": "malware"}`) // folded
	// Another code needs a write now, and the budget is spent: 429, with
	// the wait for one token at 0.01/s: 100 s.
	r := e.do("POST", "/v1/reports", "", `{"url": "def5678", "reason": "spam"}`)
	e.expect(r, 429, "rate-limited")
	if got := r.get("Retry-After"); got != "100" {
		t.Fatalf("Retry-After %q; want 100", got)
	}
	before := e.w.appliedIndex()
	e.clock.Advance(11 * time.Second) // window over, 0.11 tokens: no write yet
	e.srv.reports.flush(context.Background(), e.clock.Now())
	if e.w.appliedIndex() != before {
		t.Fatal("flush wrote past the node's write budget")
	}
	e.clock.Advance(89 * time.Second) // 100 s after the first write: one token
	e.srv.reports.flush(context.Background(), e.clock.Now())
	rep, _, _ := e.st.OpenReport("abc1234")
	if e.w.appliedIndex() != before+1 || rep.Count != 2 || rep.Reasons != store.ReasonSpam|store.ReasonMalware {
		t.Fatalf("after the budget refilled: %d entries, case %+v; want 1 entry and both reports", e.w.appliedIndex()-before, rep)
	}
}
