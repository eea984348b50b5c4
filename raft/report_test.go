package raft

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/waymark/waymark/store"
)

// A report and its resolution through a real raft node: the resolution is
// one entry that closes the case and blocks the link, the code is evicted
// like an update_link's, and both survive a restart of raft.
func TestReportFileAndResolveThroughTheLog(t *testing.T) {
	tn := newTestNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, _, err := tn.n.CreateLink(ctx, testLink("rep0001"), nil); err != nil {
		t.Fatal(err)
	}
	first, err := tn.n.FileReport(ctx, &store.ReportFiling{Code: "rep0001", Reasons: store.ReasonPhishing, Count: 1, FirstAt: 10, LastAt: 10, Details: []string{"login page"}})
	if err != nil {
		t.Fatalf("file report: %v", err)
	}
	second, err := tn.n.FileReport(ctx, &store.ReportFiling{Code: "rep0001", Reasons: store.ReasonMalware, Count: 3, FirstAt: 20, LastAt: 30})
	if err != nil {
		t.Fatalf("file coalesced report: %v", err)
	}
	if second.ID != first.ID || second.Count != 4 || second.Reasons != store.ReasonPhishing|store.ReasonMalware || second.FirstAt != 10 || second.LastAt != 30 {
		t.Fatalf("case after 1+3 reports: %+v (first %+v)", second, first)
	}
	if _, err := tn.n.FileReport(ctx, &store.ReportFiling{Code: "nosuch1", Reasons: store.ReasonSpam, Count: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("report of an unknown code: %v; want ErrNotFound", err)
	}
	if _, err := tn.n.FileReport(ctx, &store.ReportFiling{Code: "rep0001", Count: 1}); err == nil {
		t.Fatal("report without a reason was accepted")
	}
	changes := tn.ev.changeCount("rep0001")
	res, err := tn.n.ResolveReport(ctx, &store.ReportResolution{ID: first.ID, Action: store.ReportBlock, Reason: "kit", At: 40})
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if res.Action != store.ReportBlock || res.ResolvedReason != "kit" || res.ResolvedAt != 40 {
		t.Fatalf("resolved case: %+v", res)
	}
	if got := tn.ev.changeCount("rep0001"); got != changes+1 {
		t.Errorf("OnChange calls for the resolved code: got %d; want %d (evicted like update_link)", got, changes+1)
	}
	l := mustGetLink(t, tn.st, "rep0001")
	if l.Status != store.StatusBlocked {
		t.Fatalf("link after resolve --action block: %s", l.Status)
	}
	// The link change and the case closing are one entry.
	r, _, _ := tn.st.Report(first.ID)
	if applied, _ := tn.st.AppliedIndex(); l.Index != applied {
		t.Errorf("link index %d; want the resolve entry %d", l.Index, applied)
	}
	if r.Open() {
		t.Fatal("case still open after resolve")
	}
	if _, err := tn.n.ResolveReport(ctx, &store.ReportResolution{ID: first.ID, Action: store.ReportDismiss}); !errors.Is(err, store.ErrReportResolved) {
		t.Errorf("second resolve: %v; want ErrReportResolved", err)
	}

	tn.restart()
	got, found, err := tn.st.Report(first.ID)
	if err != nil || !found || got.Count != 4 || got.Action != store.ReportBlock {
		t.Fatalf("case after restart: %+v, %v, %v", got, found, err)
	}
	if got := tn.ev.changeCount("rep0001"); got != 0 {
		t.Errorf("OnChange after restart: %d; want 0 (nothing re-applied)", got)
	}
}

// A forwarded report comes back with its case, and a forwarded refusal of
// a closed case keeps its identity.
func TestReportResultsCrossTheWire(t *testing.T) {
	rep := &store.Report{ID: 5, Code: "abc", Count: 2, Reasons: store.ReasonSpam, FirstAt: 1, LastAt: 2, Details: []string{"x"}}
	res, err := decodeResult(appendResult(nil, &applyResult{Index: 5, Report: rep}))
	if err != nil || res.Report == nil || res.Report.Count != 2 || res.Report.Details[0] != "x" {
		t.Fatalf("decoded %+v, %v", res, err)
	}
	res, err = decodeResult(appendResult(nil, &applyResult{Index: 6, Err: store.ErrReportResolved}))
	if err != nil || !errors.Is(res.Err, store.ErrReportResolved) {
		t.Fatalf("decoded error %v, %v; want ErrReportResolved", res.Err, err)
	}
}

// The leader takes both report commands forwarded from another node, and
// the answer carries the case back.
func TestReportCommandsAreForwardable(t *testing.T) {
	tn := newTestNode(t, nil)
	ctx := testCtx(t)
	if _, _, err := tn.n.CreateLink(ctx, testLink("fwdrep1"), nil); err != nil {
		t.Fatal(err)
	}
	ans, err := tn.n.ApplyForwarded(ctx, appendFileReport(nil, &store.ReportFiling{Code: "fwdrep1", Reasons: store.ReasonSpam, Count: 2, FirstAt: 1, LastAt: 2}))
	if err != nil {
		t.Fatalf("forwarded file_report: %v", err)
	}
	res, err := decodeResult(ans)
	if err != nil || res.Err != nil || res.Report == nil || res.Report.ID != res.Index || res.Report.Count != 2 {
		t.Fatalf("forwarded file_report answer: %+v, %v", res, err)
	}
	ans, err = tn.n.ApplyForwarded(ctx, appendResolveReport(nil, &store.ReportResolution{ID: res.Report.ID, Action: store.ReportReview, At: 3}))
	if err != nil {
		t.Fatalf("forwarded resolve_report: %v", err)
	}
	res, err = decodeResult(ans)
	if err != nil || res.Err != nil || res.Report == nil || res.Report.Action != store.ReportReview || res.Link.Status != store.StatusReview {
		t.Fatalf("forwarded resolve_report answer: %+v, %v", res, err)
	}
}
