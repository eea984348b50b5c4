package rollup

import (
	"bytes"
	"net"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/ingest"
)

// FuzzSegmentsHandlerBody feeds arbitrary bodies to the handler: it must
// never panic, and a request that does not answer 200 must store nothing.
func FuzzSegmentsHandlerBody(f *testing.F) {
	segs := threeSegments()
	good := ingest.AppendBatch(nil, []ingest.BatchSegment{
		{Ref: segmentRef(segs[0]), Data: segs[0]},
		{Ref: segmentRef(segs[2]), Data: segs[2]},
	})
	withBad := ingest.AppendBatch(nil, []ingest.BatchSegment{
		{Ref: segmentRef(segs[1]), Data: corrupt(segs[1])},
		{Ref: segmentRef(segs[1]), Data: segs[1]},
	})
	f.Add(good, uint8(0))
	f.Add(withBad, uint8(0))
	f.Add(encodeBatch(f, []ingest.BatchSegment{{Ref: segmentRef(segs[0]), Data: segs[0]}}), uint8(1))
	f.Add(good[:len(good)/2], uint8(0))
	f.Add([]byte("WMSB\x01"), uint8(0))
	f.Add([]byte("WMSB\x02"), uint8(0))
	f.Add([]byte{}, uint8(2))
	f.Add([]byte("\x28\xb5\x2f\xfd garbage"), uint8(1))
	f.Add(s2Framed(f, ingest.AppendBatch(nil, []ingest.BatchSegment{{Ref: segmentRef(segs[0]), Data: segs[0]}})), uint8(4))

	clock := &testClock{now: base}
	cfg := testConfig(&testing.T{}, f.TempDir(), clock)
	a, err := Open(cfg)
	if err != nil {
		f.Fatalf("Open: %v", err)
	}
	f.Cleanup(func() { a.Close() })
	handler := a.SegmentsHandler()
	encodings := []string{"", "zstd", "gzip", "identity", "s2"}

	f.Fuzz(func(t *testing.T, body []byte, enc uint8) {
		before := mustCount(t, a, Filter{})
		var req fasthttp.Request
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI(ingest.ShipPath)
		req.Header.Set("Authorization", "Bearer "+testToken)
		if e := encodings[int(enc)%len(encodings)]; e != "" {
			req.Header.Set("Content-Encoding", e)
		}
		req.SetBody(body)
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
		handler(&ctx)

		after := mustCount(t, a, Filter{})
		status := ctx.Response.StatusCode()
		if status != fasthttp.StatusOK && after != before {
			t.Fatalf("status %d but count went from %d to %d", status, before, after)
		}
		if status == fasthttp.StatusOK && after < before {
			t.Fatalf("count went down from %d to %d", before, after)
		}
	})
}

// s2Framed compresses b the way the shipper does for Content-Encoding s2.
func s2Framed(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := s2.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatalf("s2: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("s2: %v", err)
	}
	return buf.Bytes()
}
