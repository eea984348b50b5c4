package rollup

import (
	"net/http"
	"strings"
	"testing"

	"github.com/waymark/waymark/ingest"
)

// TestEmbeddedAggregatorRefusesParts: segment parts come from a node
// that ships to several aggregators; the embedded store is one
// aggregator's, so it refuses them whole (400, nothing stored) and the
// node keeps its segments.
func TestEmbeddedAggregatorRefusesParts(t *testing.T) {
	a := openTest(t, testConfig(t, t.TempDir(), &testClock{now: base}))
	srv := startServer(t, a)
	var sp ingest.Splitter
	subs, err := sp.Split(threeSegments()[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	var bs []ingest.BatchSegment
	for _, s := range subs {
		bs = append(bs, ingest.BatchSegment{Ref: s.Ref, Data: s.Data})
	}
	res := srv.post(t, testToken, "", ingest.AppendBatch(nil, bs))
	if res.status != http.StatusBadRequest {
		t.Fatalf("a batch of parts: %d; want 400", res.status)
	}
	if !strings.Contains(errPartsNeedExternalStore.Error(), "--analytics-store clickhouse") {
		t.Fatalf("the refusal does not say what to do: %v", errPartsNeedExternalStore)
	}
	wantCount(t, a, Filter{}, 0)
	// Whole segments still go in.
	wantAcked(t, srv.ship(t, threeSegments()[0]), refs("edge-1", 1))
}
