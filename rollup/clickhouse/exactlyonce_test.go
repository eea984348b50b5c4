package clickhouse

import (
	"context"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/internal/chserver"
)

// burst is a segment of n clicks of link code: the first 60 % on Dec 1,
// the rest on Dec 2 (two partitions), by visitors i % 500.
func burst(code string, seq uint64, n int) []byte {
	evs := make([]ingest.Event, n)
	for i := range evs {
		day := 0
		if i >= n*6/10 {
			day = 1
		}
		evs[i] = click(code, at(day, 0, 0, 0, 0)+int64(i)*1000, uint64(i%500)+1, false)
		evs[i].ID[14] = byte(i >> 8)
	}
	return segment("e1", seq, evs)
}

// rawRows counts the rows of a link as stored, duplicates included.
func rawRows(t *testing.T, c *Client, code string) int64 {
	t.Helper()
	r, err := c.Query(testCtx(t), "SELECT count() FROM events WHERE code = "+String(code))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := rawValue(r.Data[0][0]).int()
	return n
}

func segmentRows(t *testing.T, c *Client) int64 {
	t.Helper()
	r, err := c.Query(testCtx(t), "SELECT count() FROM segments")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := rawValue(r.Data[0][0]).int()
	return n
}

// waitRows polls until more than zero rows of code are stored.
func waitRows(t *testing.T, c *Client, code string) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n := rawRows(t, c, code); n > 0 {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatal("no row of the stalled insert reached ClickHouse in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkBurst asserts the link's numbers as burst builds them, by hand:
// 60 % of n clicks on Dec 1, 40 % on Dec 2, 500 visitors on each day.
func checkBurst(t *testing.T, c *Client, code string, n int) {
	t.Helper()
	st, err := c.LinkStats(testCtx(t), code, dec1, dec1.AddDate(0, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	d1, d2 := int64(n*6/10), int64(n-n*6/10)
	if st.Series[0].Clicks != d1 || st.Series[1].Clicks != d2 || st.Totals.Clicks != int64(n) {
		t.Errorf("clicks of %s: %d + %d = %d; want %d + %d = %d", code,
			st.Series[0].Clicks, st.Series[1].Clicks, st.Totals.Clicks, d1, d2, n)
	}
	if st.Totals.Visitors != 500 {
		t.Errorf("visitors of %s = %d; want 500", code, st.Totals.Visitors)
	}
}

// An inserting process SIGKILLed half-way through its insert leaves some
// of the segment's rows in ClickHouse and no identity; the retry stores
// the whole segment, and every click counts once.
func TestExactlyOnceThroughInserterKill(t *testing.T) {
	srv := sharedServer(t)
	c := newClient(t, srv)
	const n = 20000
	seg := burst("burst", 1, n)
	// Stall at about 70 % of the body (rows are ~110 bytes).
	child := startInserter(t, srv.URL(), c.Database(), seg, n*110*7/10)
	child.waitLine(t, "stalled", time.Minute)
	partial := waitRows(t, c, "burst")
	child.kill(t)
	partial = rawRows(t, c, "burst")
	t.Logf("the killed insert left %d of %d rows", partial, n)
	if partial <= 0 || partial >= n {
		t.Fatalf("the killed insert left %d rows; the test needs a partial insert (0 < rows < %d)", partial, n)
	}
	if got := segmentRows(t, c); got != 0 {
		t.Fatalf("%d segment identities recorded by the killed insert; want none", got)
	}
	res, err := c.StoreSegment(testCtx(t), seg)
	if err != nil || res.Outcome != Stored || res.Events != n {
		t.Fatalf("retry: %+v, %v; want all %d events stored", res, err, n)
	}
	if raw := rawRows(t, c, "burst"); raw < int64(n) {
		t.Errorf("%d rows after the retry; want at least %d", raw, n)
	}
	checkBurst(t, c, "burst", n)
	// A merge removes the duplicates for good; the answers stay the same.
	// OPTIMIZE does nothing while a background merge holds the parts, so
	// it is repeated until the rows are down to n.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := c.Exec(testCtx(t), "OPTIMIZE TABLE events FINAL"); err != nil {
			t.Fatal(err)
		}
		raw := rawRows(t, c, "burst")
		if raw == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows after 30 s of OPTIMIZE FINAL; want %d", raw, n)
		}
	}
	if res, err := c.StoreSegment(testCtx(t), seg); err != nil || res.Outcome != Duplicate {
		t.Fatalf("second retry: %+v, %v; want Duplicate", res, err)
	}
	checkBurst(t, c, "burst", n)
}

// A clickhouse-server SIGKILLed while an insert streams: after its
// restart a stored segment is still stored (a retry is Duplicate), the
// cut one is stored whole by its retry, and every click counts once.
func TestExactlyOnceThroughServerRestart(t *testing.T) {
	chserver.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := chserver.Start(ctx, chserver.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c := newClient(t, srv)
	const n = 20000
	segA, segB := burst("a", 1, 3000), burst("b", 2, n)
	if res, err := c.StoreSegment(ctx, segA); err != nil || res.Outcome != Stored {
		t.Fatalf("store a: %+v, %v", res, err)
	}
	child := startInserter(t, srv.URL(), c.Database(), segB, n*110*7/10)
	child.waitLine(t, "stalled", time.Minute)
	waitRows(t, c, "b")
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	child.kill(t) // it would wait on its stalled body for good
	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	partial := rawRows(t, c, "b")
	t.Logf("after the restart %d of %d rows of the cut insert are there", partial, n)
	if partial >= n {
		t.Fatalf("%d rows of the cut insert; want fewer than %d", partial, n)
	}
	if res, err := c.StoreSegment(ctx, segA); err != nil || res.Outcome != Duplicate {
		t.Fatalf("retry of a after the restart: %+v, %v; want Duplicate", res, err)
	}
	if res, err := c.StoreSegment(ctx, segB); err != nil || res.Outcome != Stored {
		t.Fatalf("retry of b after the restart: %+v, %v; want Stored", res, err)
	}
	checkBurst(t, c, "a", 3000)
	checkBurst(t, c, "b", n)
}
