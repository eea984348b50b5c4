package store

import (
	"errors"
	"reflect"
	"testing"
)

// applyErr runs fn in one batch, commits it at index and returns fn's
// error (the batch commits either way, as the FSM commits refused
// commands' neighbours).
func applyErr(t *testing.T, s *Store, index uint64, fn func(b *Batch) error) error {
	t.Helper()
	b := s.NewBatch()
	defer b.Close()
	err := fn(b)
	if cerr := b.Commit(index); cerr != nil {
		t.Fatalf("Commit(%d): %v", index, cerr)
	}
	return err
}

// Every change to a link leaves one record, in its own batch, naming who,
// when, what and why; a refused change leaves none. The expected records
// are written out by hand from the sequence of changes.
func TestLinkHistoryRecordsEveryChange(t *testing.T) {
	s := newTestStore(t)
	l := sampleLink("hist001", "own_1", 1)
	l.CreatedAt = 1_000
	apply(t, s, 1, func(b *Batch) error { return b.CreateLink(&l) })
	patch := func(index uint64, p LinkPatch) error {
		p.Code = l.Code
		return applyErr(t, s, index, func(b *Batch) error { _, err := b.UpdateLink(&p, index); return err })
	}
	if err := patch(2, LinkPatch{Owner: "own_1", UpdatedAt: 2_000, SetURL: true, URL: "https://example.com/new", ReviewUntil: 3_000}); err != nil {
		t.Fatal(err)
	}
	if err := patch(3, LinkPatch{UpdatedAt: 4_000, SetStatus: true, Status: StatusBlocked, Reason: "phishing"}); err != nil {
		t.Fatal(err)
	}
	// The owner cannot lift the block, and the refusal is not recorded.
	if err := patch(4, LinkPatch{Owner: "own_1", UpdatedAt: 5_000, SetStatus: true, Status: StatusActive}); !errors.Is(err, ErrLinkLocked) {
		t.Fatalf("owner lifting a block: %v; want ErrLinkLocked", err)
	}
	if err := patch(5, LinkPatch{Owner: "own_1", UpdatedAt: 5_500, SetStatus: true, Status: StatusDisabled}); !errors.Is(err, ErrLinkLocked) {
		t.Fatalf("owner deleting a blocked link: %v; want ErrLinkLocked", err)
	}
	// The click-limit hook only takes active links out of service.
	if err := patch(6, LinkPatch{Actor: ActorSystem, UpdatedAt: 6_000, SetStatus: true, Status: StatusLimited, OnlyFrom: MaskOf(StatusActive)}); !errors.Is(err, ErrStatusChanged) {
		t.Fatalf("click limit over a block: %v; want ErrStatusChanged", err)
	}
	if err := patch(7, LinkPatch{UpdatedAt: 7_000, SetStatus: true, Status: StatusActive, ClearReview: true, OnlyFrom: OperatorStatuses, Reason: "false positive"}); err != nil {
		t.Fatal(err)
	}
	// A no-op edit records nothing.
	if err := patch(8, LinkPatch{Owner: "own_1", UpdatedAt: 8_000, SetURL: true, URL: "https://example.com/new"}); err != nil {
		t.Fatal(err)
	}
	if err := patch(9, LinkPatch{Owner: "own_1", UpdatedAt: 9_000, SetStatus: true, Status: StatusDisabled}); err != nil {
		t.Fatal(err)
	}

	got, err := s.LinkHistory(l.Code, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []HistoryEntry{
		{Code: l.Code, Index: 1, At: 1_000, Actor: "own_1", Action: "create", Changes: []FieldChange{
			{"url", "", "https://example.com/hist001"}, {"status", "", "active"}, {"redirect", "", "302"}}},
		{Code: l.Code, Index: 2, At: 2_000, Actor: "own_1", Action: "edit", Changes: []FieldChange{
			{"url", "https://example.com/hist001", "https://example.com/new"}, {"review_until", "", "1970-01-01T00:00:03Z"}}},
		{Code: l.Code, Index: 3, At: 4_000, Actor: "operator", Action: "block", Reason: "phishing", Changes: []FieldChange{
			{"status", "active", "blocked"}}},
		{Code: l.Code, Index: 7, At: 7_000, Actor: "operator", Action: "restore", Reason: "false positive", Changes: []FieldChange{
			{"status", "blocked", "active"}, {"review_until", "1970-01-01T00:00:03Z", ""}}},
		{Code: l.Code, Index: 9, At: 9_000, Actor: "own_1", Action: "delete", Changes: []FieldChange{
			{"status", "active", "disabled"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("history:\n got %+v\nwant %+v", got, want)
	}
	if last, _ := s.LinkHistory(l.Code, 2); len(last) != 2 || last[0].Index != 7 || last[1].Index != 9 {
		t.Fatalf("newest 2 records: %+v; want indexes 7 and 9", last)
	}
	if other, err := s.LinkHistory("hist00", 0); err != nil || len(other) != 0 {
		t.Fatalf("history of a prefix of the code: %+v, %v; want none", other, err)
	}
}

// The review window opens only when the destination really changes.
func TestReviewWindowOnDestinationChange(t *testing.T) {
	s := newTestStore(t)
	l := sampleLink("rev0001", "own_1", 1)
	apply(t, s, 1, func(b *Batch) error { return b.CreateLink(&l) })
	var got Link
	apply(t, s, 2, func(b *Batch) error {
		var err error
		got, err = b.UpdateLink(&LinkPatch{Code: l.Code, Owner: "own_1", UpdatedAt: 10, SetURL: true, URL: l.URL, ReviewUntil: 99}, 2)
		return err
	})
	if got.ReviewUntil != 0 {
		t.Fatalf("same destination opened a window until %d", got.ReviewUntil)
	}
	apply(t, s, 3, func(b *Batch) error {
		var err error
		got, err = b.UpdateLink(&LinkPatch{Code: l.Code, Owner: "own_1", UpdatedAt: 10, SetURL: true, URL: "https://other.example/", ReviewUntil: 99}, 3)
		return err
	})
	if got.ReviewUntil != 99 || !got.InReview(98) || got.InReview(99) {
		t.Fatalf("new destination: ReviewUntil %d; want 99, in review before and not at 99", got.ReviewUntil)
	}
	var stored Link
	if found, err := s.GetLink([]byte(l.Code), &stored); err != nil || !found || stored.ReviewUntil != 99 {
		t.Fatalf("stored link: %+v found %v err %v; want ReviewUntil 99", stored, found, err)
	}
}

// Two records of one link in one log entry (a report resolution adding
// its own beside the status change) both stay.
func TestAddHistoryTwiceInOneEntry(t *testing.T) {
	s := newTestStore(t)
	apply(t, s, 5, func(b *Batch) error {
		for _, a := range []string{"report_resolved", "block"} {
			if err := b.AddHistory(&HistoryEntry{Code: "abc", Index: 5, At: 1, Actor: ActorOperator, Action: a}); err != nil {
				return err
			}
		}
		return nil
	})
	got, err := s.LinkHistory("abc", 0)
	if err != nil || len(got) != 2 || got[0].Action != "report_resolved" || got[1].Action != "block" {
		t.Fatalf("history: %+v, %v; want report_resolved then block", got, err)
	}
	b := s.NewBatch()
	defer b.Close()
	if err := b.AddHistory(&HistoryEntry{Code: "abc", Index: 6, Actor: "", Action: "x"}); !errors.Is(err, ErrHistoryInvalid) {
		t.Fatalf("entry without actor: %v; want ErrHistoryInvalid", err)
	}
}
