package raft

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/waymark/waymark/store"
)

func sampleResults() []*applyResult {
	link := *testLink("abc1234")
	link.Index = 42
	edited := link
	edited.ReviewUntil = 86_400_000
	return []*applyResult{
		{Index: 9, Bulk: []store.BulkResult{
			{Link: link},
			{Link: edited, Existing: true},
			{Err: fmt.Errorf("cannot create link %q: %w", "taken", store.ErrCodeTaken)},
		}},
		{Index: 7},
		{Index: 8, Link: link},
		{Index: 9, Block: store.Block{Start: 1 << 40, End: 1<<40 + 4096}},
		{Index: 10, Existing: &store.Idempotency{RequestHash: [32]byte{1, 2}, Status: 201, Response: []byte(`{"code":"x"}`), CreatedAt: 99}},
		{Index: 11, Err: fmt.Errorf("cannot create link %q: %w", "abc1234", store.ErrCodeTaken)},
		{Err: fmt.Errorf("cannot apply command: %w: %w", store.ErrNoLeader, errors.New("node is not the leader"))},
		{Err: fmt.Errorf("cannot confirm command: %w", store.ErrUnknownOutcome)},
		{Index: 12, Err: store.ErrNotFound},
		{Index: 13, Err: store.ErrPermanentRedirect},
		{Index: 14, Err: store.ErrDomainTaken},
		{Index: 15, Err: store.ErrRangeExhausted},
		{Index: 16, Err: store.ErrRegionSpaceFull},
		{Index: 18, Err: fmt.Errorf("cannot update link %q: %w", "x", store.ErrLinkLocked)},
		{Index: 17, Err: fmt.Errorf("cannot apply entry 17: %w", store.ErrCorrupt)},
		{Index: 19, Site: &store.Site{ID: "s1", Domain: "a.example", Timezone: "UTC", Owner: "o1", CreatedAt: 5}},
		{Index: 20, Site: &store.Site{ID: "s1", Domain: "a.example", Owner: "o1", IgnoreDNT: true, Goals: []store.Goal{
			{ID: "g1", EventName: "Signup", DisplayName: "Signup"}, {ID: "g2", PagePath: "/blog/*", DisplayName: "Visit /blog/*"}}}},
		{Index: 21, Err: fmt.Errorf("cannot update site %q: %w", "s1", store.ErrGoalExists)},
		{Index: 22, Err: fmt.Errorf("cannot update site %q: %w", "s1", store.ErrTooManyGoals)},
		{Index: 23, Err: fmt.Errorf("cannot update site %q: %w", "s1", store.ErrInvalidSiteEdit)},
		{Index: 24, Report: &store.Report{ID: 24, Code: "abc1234", Count: 3, Reasons: store.ReasonSpam, FirstAt: 1, LastAt: 2, Details: []string{"d"}}},
		{Index: 25, Link: link, Report: &store.Report{ID: 3, Code: "abc1234", Count: 1, Reasons: store.ReasonIllegal, Action: store.ReportLegal, ResolvedAt: 9, ResolvedReason: "court"}},
		{Index: 26, Err: fmt.Errorf("cannot resolve report 3: %w", store.ErrReportResolved)},
		{Index: 27, Domain: &store.Domain{Name: "go.acme.com", Owner: "o1", Status: store.DomainApproved, CreatedAt: 1, ApprovedAt: 2, UpdatedAt: 2}},
		{Index: 28, Link: store.Link{Code: "go.acme.com/launch", URL: "u", Owner: "o1", Redirect: 302, Index: 28}},
		{Index: 29, Err: fmt.Errorf("cannot create link: %w", store.ErrDomainNotApproved)},
		{Index: 30, Err: fmt.Errorf("cannot create link: %w", store.ErrDomainNotOwned)},
		{Index: 30, Link: edited},
		{Index: 32, Link: store.Link{Code: "noq", URL: "u", Owner: "o", Redirect: 302, NoForwardQuery: true, ReviewUntil: 5}},
		{Index: 31, Err: fmt.Errorf("cannot update link %q: %w", "x", store.ErrStatusChanged)},
		{Index: 33, Link: store.Link{Code: "tag", URL: "u", Owner: "o", Redirect: 302, Tags: "sms,spring"}},
		{Index: 34, Link: store.Link{Code: "tag", URL: "u", Owner: "o", Redirect: 302, NoForwardQuery: true, ReviewUntil: 5, Tags: "a"},
			Report: &store.Report{ID: 3, Code: "tag", Count: 1, Reasons: store.ReasonIllegal}},
		{Index: 35, Link: store.Link{Code: "rul", URL: "u", Owner: "o", Redirect: 302, Tags: "a", Rules: testRules}},
	}
}

func TestResultRoundTripKeepsErrorIdentity(t *testing.T) {
	for _, want := range sampleResults() {
		got, err := decodeResult(appendResult(nil, want))
		if err != nil {
			t.Fatalf("decode %+v: %v", want, err)
		}
		if got.Index != want.Index || got.Link != want.Link || got.Block != want.Block || !reflect.DeepEqual(got.Existing, want.Existing) ||
			!reflect.DeepEqual(got.Site, want.Site) {
			t.Errorf("got %+v; want %+v", got, want)
		}
		if want.Err == nil {
			if got.Err != nil {
				t.Errorf("got error %v; want none", got.Err)
			}
			continue
		}
		if got.Err == nil || got.Err.Error() != want.Err.Error() {
			t.Errorf("error text: got %v; want %v", got.Err, want.Err)
		}
		sentinel := sentinelOf(codeOf(want.Err))
		if !errors.Is(got.Err, sentinel) || !errors.Is(want.Err, sentinel) {
			t.Errorf("errors.Is(%v, %v): got false; want true", got.Err, sentinel)
		}
	}
}

func TestResultUnknownErrorsReadAsUnknownOutcome(t *testing.T) {
	// An error without a sentinel (a deadline inside the leader) and a
	// code from a newer leader may both hide a committed write.
	other, err := decodeResult(appendResult(nil, &applyResult{Err: errors.New("deadline")}))
	if err != nil || !errors.Is(other.Err, store.ErrUnknownOutcome) {
		t.Errorf("plain leader error: got %v, %v; want ErrUnknownOutcome", other, err)
	}
	b := appendResult(nil, &applyResult{Err: store.ErrNotFound})
	b[3] = 200 // the error code follows version, flags and a one-byte index
	newer, err := decodeResult(b)
	if err != nil || !errors.Is(newer.Err, store.ErrUnknownOutcome) {
		t.Errorf("unknown error code: got %v, %v; want ErrUnknownOutcome", newer, err)
	}
}

func TestDecodeResultRejects(t *testing.T) {
	good := appendResult(nil, sampleResults()[1])
	badFlags := append([]byte(nil), good...)
	badFlags[1] |= 0x80
	zeroBlock := []byte{resultVersion, resultHasBlock, 1, 0, 0, 0}
	backwards := []byte{resultVersion, resultHasBlock, 1, 0, 9, 3}
	dupGoals := appendResult(nil, &applyResult{Index: 1, Site: &store.Site{ID: "s", Goals: []store.Goal{
		{ID: "g1", EventName: "E", DisplayName: "E"}, {ID: "g2", EventName: "E", DisplayName: "F"}}}})
	noSiteID := appendResult(nil, &applyResult{Index: 1, Site: &store.Site{Domain: "a.example"}})
	tagged := appendResult(nil, &applyResult{Index: 1, Link: store.Link{Code: "t", URL: "u", Redirect: 302, Tags: "sms"}})
	zeroMore := append([]byte(nil), tagged...)
	zeroMore[2] = 0 // the second flags byte follows version and flags
	unknownMore := append([]byte(nil), tagged...)
	unknownMore[2] |= 1 << 6
	badTag := appendResult(nil, &applyResult{Index: 1, Link: store.Link{Code: "t", URL: "u", Redirect: 302, Tags: "b,a"}})
	noLinkTags := []byte{resultVersion, resultMoreFlags, resultMoreTags, 1, 0, 1, 'a'}
	badRules := appendResult(nil, &applyResult{Index: 1, Link: store.Link{Code: "t", URL: "u", Redirect: 302, Rules: "\x01\x00"}})
	for name, b := range map[string][]byte{
		"bad rules":              badRules,
		"empty":                  nil,
		"version 0":              {0, 0, 0, 0},
		"version 2":              {2, 0, 0, 0},
		"truncated":              good[:len(good)-1],
		"trailing":               append(append([]byte(nil), good...), 0),
		"unknown flag":           badFlags,
		"zero block":             zeroBlock,
		"backward block":         backwards,
		"duplicate goals":        dupGoals,
		"site without id":        noSiteID,
		"zero second flags byte": zeroMore,
		"unknown second flag":    unknownMore,
		"tags out of order":      badTag,
		"tags without a link":    noLinkTags,
	} {
		if res, err := decodeResult(b); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s: got %+v, %v; want ErrCorrupt", name, res, err)
		}
	}
}

func FuzzDecodeResult(f *testing.F) {
	for _, r := range sampleResults() {
		f.Add(appendResult(nil, r))
	}
	f.Add([]byte{})
	f.Add([]byte{resultVersion, 0xff, 0xff})
	f.Add([]byte{resultVersion, resultHasLink, 0, 99, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := decodeResult(data)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("got error %v; want ErrCorrupt", err)
			}
			return
		}
		again, err := decodeResult(appendResult(nil, res))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if again.Index != res.Index || again.Link != res.Link || again.Block != res.Block || !reflect.DeepEqual(again.Existing, res.Existing) ||
			!reflect.DeepEqual(again.Site, res.Site) || !reflect.DeepEqual(again.Report, res.Report) || !sameBulk(again.Bulk, res.Bulk) || !reflect.DeepEqual(again.Domain, res.Domain) {
			t.Fatalf("round trip: got %+v; want %+v", again, res)
		}
		if (res.Err == nil) != (again.Err == nil) || (res.Err != nil && (res.Err.Error() != again.Err.Error() || codeOf(res.Err) != codeOf(again.Err))) {
			t.Fatalf("round trip error: got %v; want %v", again.Err, res.Err)
		}
	})
}

// sameBulk compares bulk results, errors by text and wire code.
func sameBulk(a, b []store.BulkResult) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if a[i].Link != b[i].Link || a[i].Existing != b[i].Existing || (a[i].Err == nil) != (b[i].Err == nil) {
			return false
		}
		if a[i].Err != nil && (a[i].Err.Error() != b[i].Err.Error() || codeOf(a[i].Err) != codeOf(b[i].Err)) {
			return false
		}
	}
	return true
}
