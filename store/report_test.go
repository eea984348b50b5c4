package store

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func fileReport(tb testing.TB, s *Store, index uint64, f ReportFiling) Report {
	tb.Helper()
	var r Report
	apply(tb, s, index, func(b *Batch) error {
		var err error
		r, err = b.FileReport(&f, index)
		return err
	})
	return r
}

func TestReportsFoldIntoOneCasePerCodeUntilResolved(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	l := sampleLink("abc1234", "o1", 1)
	apply(t, s, 1, func(b *Batch) error { return b.CreateLink(&l) })

	first := fileReport(t, s, 2, ReportFiling{Code: "abc1234", Reasons: ReasonPhishing, Count: 1, FirstAt: 1000, LastAt: 1000, Details: []string{"fake bank"}})
	if first.ID != 2 {
		t.Fatalf("first report opened case %d; want the entry's index 2", first.ID)
	}
	// Seven more, one of them a coalesced filing of five: 1+1+5 = 7 in all.
	fileReport(t, s, 3, ReportFiling{Code: "abc1234", Reasons: ReasonSpam, Count: 1, FirstAt: 900, LastAt: 900})
	got := fileReport(t, s, 4, ReportFiling{Code: "abc1234", Reasons: ReasonSpam | ReasonOther, Count: 5, FirstAt: 2000, LastAt: 5000,
		Details: []string{"d2", "d3", "d4", "d5", "d6"}})
	want := Report{ID: 2, Code: "abc1234", Count: 7, Reasons: ReasonPhishing | ReasonSpam | ReasonOther, FirstAt: 900, LastAt: 5000,
		Details: []string{"fake bank", "d2", "d3", "d4", "d5"}} // the first five details only
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("case after 7 reports:\n got %+v\nwant %+v", got, want)
	}
	if names := got.Reasons.Names(); strings.Join(names, ",") != "phishing,spam,other" {
		t.Errorf("reason names %v", names)
	}

	var res Report
	var changed *Link
	apply(t, s, 5, func(b *Batch) error {
		var err error
		res, changed, err = b.ResolveReport(&ReportResolution{ID: 2, Action: ReportBlock, Reason: "phishing kit", At: 6000}, 5)
		return err
	})
	if changed == nil || changed.Status != StatusBlocked || changed.Index != 5 || changed.UpdatedAt != 6000 {
		t.Fatalf("link after block: %+v", changed)
	}
	if res.Open() || res.Action != ReportBlock || res.ResolvedAt != 6000 || res.ResolvedReason != "phishing kit" || res.Count != 7 {
		t.Fatalf("resolved case: %+v", res)
	}
	var stored Link
	if found, err := s.GetLink([]byte("abc1234"), &stored); err != nil || !found || stored.Status != StatusBlocked {
		t.Fatalf("stored link %+v, %v, %v", stored, found, err)
	}
	// Resolving twice is refused and changes nothing.
	b := s.NewBatch()
	if _, _, err := b.ResolveReport(&ReportResolution{ID: 2, Action: ReportDismiss, At: 7000}, 6); !errors.Is(err, ErrReportResolved) {
		t.Errorf("second resolve: %v; want ErrReportResolved", err)
	}
	if _, _, err := b.ResolveReport(&ReportResolution{ID: 99, Action: ReportDismiss}, 6); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown case: %v; want ErrNotFound", err)
	}
	b.Close()

	// A report after the resolution opens a new case.
	again := fileReport(t, s, 7, ReportFiling{Code: "abc1234", Reasons: ReasonMalware, Count: 1, FirstAt: 8000, LastAt: 8000})
	if again.ID != 7 || again.Count != 1 {
		t.Fatalf("report after resolution: %+v; want a new case 7", again)
	}

	// Both survive a reopen of the store.
	closeStore(t, s)
	s = openStore(t, dir)
	open, err := s.Reports(true, false, 0)
	if err != nil || len(open) != 1 || open[0].ID != 7 {
		t.Fatalf("open cases after reopen: %+v, %v", open, err)
	}
	all, err := s.Reports(true, true, 0)
	if err != nil || len(all) != 2 || all[0].ID != 2 || all[0].Action != ReportBlock {
		t.Fatalf("all cases after reopen: %+v, %v", all, err)
	}
	if r, found, err := s.OpenReport("abc1234"); err != nil || !found || r.ID != 7 {
		t.Fatalf("open case of abc1234: %+v, %v, %v", r, found, err)
	}
}

func TestReportOfUnknownCodeWritesNothing(t *testing.T) {
	s := newTestStore(t)
	b := s.NewBatch()
	defer b.Close()
	_, err := b.FileReport(&ReportFiling{Code: "nosuch", Reasons: ReasonSpam, Count: 1}, 1)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v; want ErrNotFound", err)
	}
	if b.b.Count() != 0 {
		t.Fatalf("refused report left %d writes in the batch", b.b.Count())
	}
}

func TestResolveDismissLeavesLinkAndReviewSetsInterstitial(t *testing.T) {
	s := newTestStore(t)
	for i, code := range []string{"aaa", "bbb"} {
		l := sampleLink(code, "o1", uint64(i+1))
		apply(t, s, uint64(i+1), func(b *Batch) error { return b.CreateLink(&l) })
	}
	fileReport(t, s, 3, ReportFiling{Code: "aaa", Reasons: ReasonSpam, Count: 1})
	fileReport(t, s, 4, ReportFiling{Code: "bbb", Reasons: ReasonIllegal, Count: 1})
	for _, tc := range []struct {
		id     uint64
		action ReportAction
		code   string
		want   Status
	}{{3, ReportDismiss, "aaa", StatusActive}, {4, ReportReview, "bbb", StatusReview}} {
		apply(t, s, tc.id+10, func(b *Batch) error {
			_, changed, err := b.ResolveReport(&ReportResolution{ID: tc.id, Action: tc.action}, tc.id+10)
			if (changed == nil) != (tc.action == ReportDismiss) {
				t.Errorf("%s: changed link %+v", tc.action, changed)
			}
			return err
		})
		var l Link
		if _, err := s.GetLink([]byte(tc.code), &l); err != nil || l.Status != tc.want {
			t.Errorf("%s: link status %s, %v; want %s", tc.action, l.Status, err, tc.want)
		}
	}
}

func TestReportFilingChecks(t *testing.T) {
	ok := ReportFiling{Code: "a", Reasons: ReasonSpam, Count: 1}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]ReportFiling{
		"no code":         {Reasons: ReasonSpam, Count: 1},
		"long code":       {Code: strings.Repeat("a", MaxReportCodeLen+1), Reasons: ReasonSpam, Count: 1},
		"no reason":       {Code: "a", Count: 1},
		"unknown reason":  {Code: "a", Reasons: 1 << 6, Count: 1},
		"zero count":      {Code: "a", Reasons: ReasonSpam},
		"last before":     {Code: "a", Reasons: ReasonSpam, Count: 1, FirstAt: 2, LastAt: 1},
		"six details":     {Code: "a", Reasons: ReasonSpam, Count: 1, Details: []string{"1", "2", "3", "4", "5", "6"}},
		"long detail":     {Code: "a", Reasons: ReasonSpam, Count: 1, Details: []string{strings.Repeat("x", MaxReportDetailLen+1)}},
		"empty detail":    {Code: "a", Reasons: ReasonSpam, Count: 1, Details: []string{""}},
		"non-UTF8 detail": {Code: "a", Reasons: ReasonSpam, Count: 1, Details: []string{"\xff"}},
	}
	for name, f := range bad {
		if f.Check() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzDecodeReport(f *testing.F) {
	f.Add(AppendReport(nil, &Report{ID: 1, Code: "abc", Count: 1, Reasons: ReasonSpam}))
	f.Add(AppendReport(nil, &Report{ID: 9, Code: "abc", Count: 3, Reasons: ReasonSpam | ReasonMalware, FirstAt: -1, LastAt: 5,
		Details: []string{"x", "y"}, Action: ReportLegal, ResolvedAt: 7, ResolvedBy: "op", ResolvedReason: "court order"}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Report
		if err := DecodeReport(b, &r); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v; want ErrCorrupt", err)
			}
			return
		}
		if again := AppendReport(nil, &r); !bytes.Equal(again, b) {
			t.Fatalf("one encoding: decode+encode gave %x; want %x", again, b)
		}
	})
}

// TestResolutionIsInTheLinkHistory: a resolution that blocks writes the
// status change with the operator's reason; a dismissal, which changes
// nothing, still leaves a record; both in the resolving entry.
func TestResolutionIsInTheLinkHistory(t *testing.T) {
	s := newTestStore(t)
	for i, code := range []string{"aaa", "bbb"} {
		l := sampleLink(code, "o1", uint64(i+1))
		apply(t, s, uint64(i+1), func(b *Batch) error { return b.CreateLink(&l) })
	}
	fileReport(t, s, 3, ReportFiling{Code: "aaa", Reasons: ReasonPhishing, Count: 1})
	fileReport(t, s, 4, ReportFiling{Code: "bbb", Reasons: ReasonSpam, Count: 1})
	apply(t, s, 5, func(b *Batch) error {
		_, _, err := b.ResolveReport(&ReportResolution{ID: 3, Action: ReportBlock, Reason: "kit", Actor: "ops", At: 50}, 5)
		return err
	})
	apply(t, s, 6, func(b *Batch) error {
		_, _, err := b.ResolveReport(&ReportResolution{ID: 4, Action: ReportDismiss, At: 60}, 6)
		return err
	})
	for _, tc := range []struct {
		code string
		want HistoryEntry
	}{
		{"aaa", HistoryEntry{Code: "aaa", Index: 5, At: 50, Actor: "ops", Action: "report_block", Reason: "report 3: kit",
			Changes: []FieldChange{{Field: "status", Old: "active", New: "blocked"}}}},
		{"bbb", HistoryEntry{Code: "bbb", Index: 6, At: 60, Actor: ActorOperator, Action: "report_dismiss", Reason: "report 4"}},
	} {
		h, err := s.LinkHistory(tc.code, 0)
		if err != nil || len(h) != 2 {
			t.Fatalf("%s: history %+v, %v; want the create and the resolution", tc.code, h, err)
		}
		if got := h[1]; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: resolution record\n got %+v\nwant %+v", tc.code, got, tc.want)
		}
	}
}
