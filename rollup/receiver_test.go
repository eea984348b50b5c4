package rollup

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
)

// threeSegments are two edges' worth of clicks and pageviews at base:
// 4 clicks on "abc" (1 bot), 2 on "xyz", 3 pageviews of site "s1" (1 bot).
func threeSegments() [][]byte {
	t := base.Add(-time.Minute)
	return [][]byte{
		segmentBytes("edge-1", 1,
			click("a", 1, "abc", t, false), click("a", 2, "abc", t, false),
			click("a", 3, "abc", t, true), click("a", 4, "xyz", t, false)),
		segmentBytes("edge-1", 2,
			click("a", 5, "abc", t, false), click("a", 6, "xyz", t, false)),
		segmentBytes("edge-2", 1,
			pageview("b", 1, "s1", t, false), pageview("b", 2, "s1", t, false),
			pageview("b", 3, "s1", t, true)),
	}
}

func refs(pairs ...any) []ingest.SegmentRef {
	var out []ingest.SegmentRef
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, ingest.SegmentRef{Node: pairs[i].(string), Seq: uint64(pairs[i+1].(int))})
	}
	return out
}

func wantAcked(t *testing.T, got, want []ingest.SegmentRef) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("acked: got %v; want %v", got, want)
	}
}

func TestBatchStoredAndAcked(t *testing.T) {
	clock := &testClock{now: base}
	a := openTest(t, testConfig(t, t.TempDir(), clock))
	srv := startServer(t, a)

	wantAcked(t, srv.ship(t, threeSegments()...), refs("edge-1", 1, "edge-1", 2, "edge-2", 1))
	wantCount(t, a, Filter{}, 9)
	if got := a.m.segmentsApplied.Get(); got != 3 {
		t.Errorf("segments applied: got %d; want 3", got)
	}
	if got := a.m.eventsStored.Get(); got != 9 {
		t.Errorf("events stored: got %d; want 9", got)
	}
	if got := a.m.rawDays.Get(); got != 1 {
		t.Errorf("raw days gauge: got %v; want 1", got)
	}

	// The same batch again: all acked, nothing applied again.
	wantAcked(t, srv.ship(t, threeSegments()...), refs("edge-1", 1, "edge-1", 2, "edge-2", 1))
	wantCount(t, a, Filter{}, 9)
	wantCount(t, a, Filter{Code: "abc"}, 4)
	if got := a.m.segmentsDuplicate.Get(); got != 3 {
		t.Errorf("segments duplicate: got %d; want 3", got)
	}
	if got := a.m.eventsStored.Get(); got != 9 {
		t.Errorf("events stored after resend: got %d; want 9", got)
	}
}

func TestIdentityEncodingAndRepeatWithinBatch(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	segs := threeSegments()
	// The same segment twice in one uncompressed batch.
	var bs []ingest.BatchSegment
	for _, raw := range [][]byte{segs[0], segs[0]} {
		bs = append(bs, ingest.BatchSegment{Ref: ingest.SegmentRef{Node: "edge-1", Seq: 1}, Data: raw})
	}
	res := srv.post(t, testToken, "", ingest.AppendBatch(nil, bs))
	if res.status != http.StatusOK {
		t.Fatalf("status: got %d; want 200", res.status)
	}
	wantAcked(t, res.acked, refs("edge-1", 1, "edge-1", 1))
	wantCount(t, a, Filter{}, 4)
}

func TestCorruptSegmentRejectedOthersStored(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	segs := threeSegments()
	bad := corrupt(segs[1])

	wantAcked(t, srv.ship(t, segs[0], bad, segs[2]), refs("edge-1", 1, "edge-2", 1))
	wantCount(t, a, Filter{}, 7)
	wantCount(t, a, Filter{Code: "xyz"}, 1) // the damaged segment's xyz click is not there
	if got := a.m.segmentsRejected.Get(); got != 1 {
		t.Errorf("segments rejected: got %d; want 1", got)
	}

	// A segment whose header does not match the ref it was sent under.
	liar := []ingest.BatchSegment{{Ref: ingest.SegmentRef{Node: "edge-1", Seq: 99}, Data: segs[1]}}
	res := srv.post(t, testToken, "zstd", encodeBatch(t, liar))
	if res.status != http.StatusOK || len(res.acked) != 0 {
		t.Errorf("mismatched ref: got status %d acked %v; want 200 and none", res.status, res.acked)
	}
	wantCount(t, a, Filter{}, 7)

	// A segment cut short at a record boundary (no footer) and one with
	// its header damaged.
	cut := segs[1][:len(segs[1])-13]
	badHeader := append([]byte(nil), segs[1]...)
	badHeader[7] ^= 1
	res = srv.post(t, testToken, "zstd", encodeBatch(t, []ingest.BatchSegment{
		{Ref: segmentRef(segs[1]), Data: cut},
		{Ref: segmentRef(segs[1]), Data: badHeader},
	}))
	if res.status != http.StatusOK || len(res.acked) != 0 {
		t.Errorf("cut and bad header: got status %d acked %v; want 200 and none", res.status, res.acked)
	}
	if got := a.m.segmentsRejected.Get(); got != 4 {
		t.Errorf("segments rejected: got %d; want 4", got)
	}
	wantCount(t, a, Filter{}, 7)

	// The edge resends the segment undamaged: now it is stored.
	wantAcked(t, srv.ship(t, segs[1]), refs("edge-1", 2))
	wantCount(t, a, Filter{}, 9)
}

func TestBadRequestsStoreNothing(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	good := batch(t, threeSegments()...)

	cases := []struct {
		name, token, encoding string
		body                  []byte
		want                  int
	}{
		{"no token", "", "zstd", good, http.StatusUnauthorized},
		{"wrong token", "not-the-token", "zstd", good, http.StatusUnauthorized},
		{"token prefix", testToken[:4], "zstd", good, http.StatusUnauthorized},
		{"not zstd", testToken, "zstd", []byte("hello"), http.StatusBadRequest},
		{"wrong encoding", testToken, "br", good, http.StatusBadRequest},
		{"bad magic", testToken, "", []byte("XXXX\x01"), http.StatusBadRequest},
		{"truncated framing", testToken, "", ingest.AppendBatch(nil, []ingest.BatchSegment{{Ref: ingest.SegmentRef{Node: "n", Seq: 1}, Data: threeSegments()[0]}})[:40], http.StatusBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := srv.post(t, c.token, c.encoding, c.body)
			if res.status != c.want {
				t.Errorf("status: got %d; want %d", res.status, c.want)
			}
			wantCount(t, a, Filter{}, 0)
		})
	}
	if got := a.m.requestsUnauthorized.Get(); got != 3 {
		t.Errorf("unauthorized requests: got %d; want 3", got)
	}

	req, _ := http.NewRequest(http.MethodGet, srv.url+ingest.ShipPath, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: got %d; want 405", resp.StatusCode)
	}
}

// TestEventIDsAreNotDeduplicated: exactly-once holds by segment identity
// (an event is in one segment, and a segment is applied once); the same
// event id in two different segments is two events, as documented in
// rollup/DESIGN.md (the edge mints ids, so a lookup could not catch a
// client's retry anyway).
func TestEventIDsAreNotDeduplicated(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	srv.ship(t,
		segmentBytes("edge-1", 1, click("dup", 1, "abc", base.Add(-time.Hour), false)),
		segmentBytes("edge-2", 1, click("dup", 1, "abc", base.Add(-time.Hour), false)),
	)
	wantCount(t, a, Filter{Code: "abc"}, 2)
}

// TestSegmentIdentityConflictRefused: a segment whose identity was already
// stored with other bytes (an edge restored from a snapshot reusing its
// sequence numbers) is never acknowledged and never applied; it is listed
// as rejected with reason "conflict". The same bytes again are a plain
// retry, acknowledged.
func TestSegmentIdentityConflictRefused(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	first := segmentBytes("edge-1", 5, click("c", 1, "abc", base.Add(-time.Hour), false))
	other := segmentBytes("edge-1", 5, click("c", 2, "abc", base.Add(-time.Minute), false), click("c", 3, "abc", base, false))
	srv.ship(t, first)
	res := srv.post(t, testToken, "zstd", batch(t, other))
	if res.status != http.StatusOK || len(res.acked) != 0 || len(res.rejected) != 1 ||
		res.rejected[0].Reason != ingest.RejectConflict || res.rejected[0].Seq != 5 {
		t.Fatalf("conflicting segment: got %+v; want 200, nothing acked, one rejected as conflict", res)
	}
	wantCount(t, a, Filter{Code: "abc"}, 1)
	if got := a.m.segmentsConflict.Get(); got != 1 {
		t.Errorf("conflicts counted: got %d; want 1", got)
	}
	if acked := srv.ship(t, first); len(acked) != 1 {
		t.Errorf("retry of the stored segment: acked %v; want it", acked)
	}
	wantCount(t, a, Filter{Code: "abc"}, 1)
}

func TestConcurrentSameSegmentStoredOnce(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	body := batch(t, threeSegments()...)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if res := srv.post(t, testToken, "zstd", body); res.status != http.StatusOK || len(res.acked) != 3 {
				t.Errorf("got status %d acked %v; want 200 and 3", res.status, res.acked)
			}
		})
	}
	wg.Wait()
	wantCount(t, a, Filter{}, 9)
}

func TestRestartKeepsCountsAndSegmentRecords(t *testing.T) {
	dir := t.TempDir()
	clock := &testClock{now: base}
	cfg := testConfig(t, dir, clock)
	a, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	srv := startServer(t, a)
	segs := threeSegments()
	srv.ship(t, segs...)
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if res := srv.post(t, testToken, "zstd", batch(t, segs[0])); res.status != http.StatusServiceUnavailable {
		t.Errorf("after Close: got %d; want 503", res.status)
	}

	b := openTest(t, cfg)
	srv.agg.Store(b)
	for _, f := range []Filter{{}, {BotsOnly: true}, {Code: "abc"}, {SiteID: "s1"}} {
		want := map[Filter]uint64{{}: 9, {BotsOnly: true}: 2, {Code: "abc"}: 4, {SiteID: "s1"}: 3}[f]
		wantCount(t, b, f, want)
	}
	if got := b.m.rawDays.Get(); got != 1 {
		t.Errorf("raw days after restart: got %v; want 1", got)
	}
	wantAcked(t, srv.ship(t, segs...), refs("edge-1", 1, "edge-1", 2, "edge-2", 1))
	wantCount(t, b, Filter{}, 9)
}

func TestExpiredAndFutureEventsDropped(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	srv.ship(t, segmentBytes("edge-1", 1,
		click("t", 1, "abc", base.Add(-DefaultRetention-24*time.Hour), false),
		click("t", 2, "abc", base.Add(-DefaultRetention+24*time.Hour), false),
		click("t", 3, "abc", base.Add(2*futureSlack), false),
		click("t", 4, "abc", base.Add(time.Minute), false)))
	wantCount(t, a, Filter{}, 2)
	if got := a.m.eventsExpired.Get(); got != 1 {
		t.Errorf("expired: got %d; want 1", got)
	}
	if got := a.m.eventsFuture.Get(); got != 1 {
		t.Errorf("future: got %d; want 1", got)
	}
}

// TestSameSeqOtherIncarnationStoredTwice: a wiped edge data folder starts
// a new incarnation, and its segments 1..n are new segments, not retries.
func TestSameSeqOtherIncarnationStoredTwice(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	seg := func(inc uint64, n int) ingest.BatchSegment {
		raw := ingest.BuildSegment(ingest.SegmentRef{Node: "edge-1", Inc: inc, Seq: 1}, base, []ingest.Event{click("i", n, "abc", base, false)})
		return ingest.BatchSegment{Ref: ingest.SegmentRef{Node: "edge-1", Inc: inc, Seq: 1}, Data: raw}
	}
	for _, bs := range []ingest.BatchSegment{seg(11, 1), seg(22, 2)} {
		res := srv.post(t, testToken, "zstd", encodeBatch(t, []ingest.BatchSegment{bs}))
		if res.status != http.StatusOK || len(res.acked) != 1 || res.acked[0] != bs.Ref {
			t.Fatalf("incarnation %d: got %+v; want it acknowledged", bs.Ref.Inc, res)
		}
	}
	wantCount(t, a, Filter{Code: "abc"}, 2)
}
