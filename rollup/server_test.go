package rollup

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/ingest"
)

// testServer serves the current aggregator's SegmentsHandler on a
// loopback listener; swapping the aggregator models a restart behind the
// same address.
type testServer struct {
	url string
	agg atomic.Pointer[Aggregator]
}

func startServer(t *testing.T, a *Aggregator) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &testServer{url: "http://" + ln.Addr().String()}
	s.agg.Store(a)
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if string(ctx.Path()) != ingest.ShipPath {
				ctx.NotFound()
				return
			}
			s.agg.Load().SegmentsHandler()(ctx)
		},
		MaxRequestBodySize: 64 << 20,
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return s
}

// batch encodes segments the way the shipper does, each under the
// identity its header names.
func batch(t *testing.T, segs ...[]byte) []byte {
	t.Helper()
	var bs []ingest.BatchSegment
	for _, raw := range segs {
		bs = append(bs, ingest.BatchSegment{Ref: segmentRef(raw), Data: raw})
	}
	return encodeBatch(t, bs)
}

type postResult struct {
	status   int
	acked    []ingest.SegmentRef
	rejected []ingest.SegmentRejection
}

// post sends a batch body with a token ("" sends no Authorization).
func (s *testServer) post(t *testing.T, token, encoding string, body []byte) postResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+ingest.ShipPath, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.Header.Set("Content-Type", ingest.ShipContentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	res := postResult{status: resp.StatusCode}
	if resp.StatusCode == http.StatusOK {
		var ack ingest.ShipAck
		if err := json.Unmarshal(data, &ack); err != nil {
			t.Fatalf("decode ack %q: %v", data, err)
		}
		res.acked, res.rejected = ack.Acked, ack.Rejected
	}
	return res
}

// ship posts segments as one zstd batch with the right token and wants 200.
func (s *testServer) ship(t *testing.T, segs ...[]byte) []ingest.SegmentRef {
	t.Helper()
	res := s.post(t, testToken, "zstd", batch(t, segs...))
	if res.status != http.StatusOK {
		t.Fatalf("ship: got status %d; want 200", res.status)
	}
	return res.acked
}
