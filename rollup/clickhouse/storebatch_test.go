package clickhouse

import (
	"errors"
	"testing"

	"github.com/waymark/waymark/ingest"
)

func clicksOf(code string, n int, hour int) []ingest.Event {
	evs := make([]ingest.Event, n)
	for i := range evs {
		evs[i] = click(code, at(0, hour, i, 0, 0), uint64(i+1), false)
	}
	return evs
}

// A shipped batch is stored with three requests (one lookup, one events
// insert, one identity insert) and answers each segment as StoreSegment
// would: stored, duplicate, conflict, damaged; a damaged one costs only
// itself. Hand counts: link b1 gets 1 + 3 + 2 clicks, then 4 more.
func TestStoreBatchAnswersEachSegment(t *testing.T) {
	c := newClient(t, sharedServer(t))
	ctx := testCtx(t)
	sA := segment("e1", 20, clicksOf("b1", 1, 1))
	if res, err := c.StoreSegment(ctx, sA); err != nil || res.Outcome != Stored {
		t.Fatalf("StoreSegment = %+v, %v", res, err)
	}
	s1 := segment("e1", 21, clicksOf("b1", 3, 2))
	s2 := segment("e1", 22, clicksOf("b1", 2, 3))
	reqs := c.m.requests.Get()
	out, errs := c.storeBatch(ctx, [][]byte{s1, s2}, nil)
	for i, want := range []int{3, 2} {
		if errs[i] != nil || out[i].Outcome != Stored || out[i].Events != want {
			t.Errorf("batch 1, segment %d: %+v, %v; want stored with %d events", i, out[i], errs[i], want)
		}
	}
	if got := c.m.requests.Get() - reqs; got != 3 {
		t.Errorf("batch of two segments took %d requests; want 3 (lookup, events, identities)", got)
	}
	wantClicks(t, c, "b1", 6)

	conflict := segment("e1", 20, clicksOf("b1", 2, 4)) // sA's identity, other bytes
	bad := segment("e1", 23, clicksOf("b9", 2, 1))
	bad[len(bad)-20] ^= 0xff
	s3 := segment("e1", 24, clicksOf("b1", 4, 5))
	batch := [][]byte{sA, s1, conflict, bad, s3}
	for round, want := range [][]Outcome{{Duplicate, Duplicate, 0, 0, Stored}, {Duplicate, Duplicate, 0, 0, Duplicate}} {
		out, errs = c.storeBatch(ctx, batch, nil)
		for i := range batch {
			switch i {
			case 2:
				if !errors.Is(errs[i], ErrConflict) {
					t.Errorf("round %d: conflicting segment: %v; want ErrConflict", round, errs[i])
				}
			case 3:
				if !errors.Is(errs[i], ingest.ErrCorruptSegment) {
					t.Errorf("round %d: damaged segment: %v; want ErrCorruptSegment", round, errs[i])
				}
			default:
				if errs[i] != nil || out[i].Outcome != want[i] {
					t.Errorf("round %d, segment %d: %+v, %v; want %v", round, i, out[i], errs[i], want[i])
				}
			}
		}
		wantClicks(t, c, "b1", 10)
	}
	if r, err := c.Query(ctx, "SELECT count() FROM events WHERE code = 'b9'"); err != nil || string(r.Data[0][0]) != `"0"` {
		t.Errorf("rows of the damaged segment: %v, %v; want none", r, err)
	}
}

func wantClicks(t *testing.T, c *Client, code string, n int64) {
	t.Helper()
	st, err := c.LinkStats(testCtx(t), code, dec1, dec1.AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if st.Totals.Clicks != n {
		t.Errorf("clicks of %s = %d; want %d", code, st.Totals.Clicks, n)
	}
}
