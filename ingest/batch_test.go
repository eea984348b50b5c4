package ingest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestReadBatchRoundTrip(t *testing.T) {
	segs := []BatchSegment{
		{Ref: SegmentRef{Node: "node-a", Seq: 7}, Data: buildSegment(threeEvents(), true)},
		{Ref: SegmentRef{Node: "node-a", Seq: 8}, Data: buildSegment(nil, true)},
	}
	raw := AppendBatch(nil, segs)
	enc, _ := zstd.NewWriter(nil)
	zst := enc.EncodeAll(raw, nil)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	for enc, body := range map[string][]byte{"": raw, "zstd": zst, "gzip": gz.Bytes()} {
		var got []SegmentRef
		err := ReadBatch(body, enc, 1<<20, func(s BatchSegment) error {
			got = append(got, s.Ref)
			if _, err := ReadSegment(s.Data, func(*Event) error { return nil }); err != nil {
				t.Errorf("%q: segment %v: %v", enc, s.Ref, err)
			}
			return nil
		})
		if err != nil || len(got) != 2 || got[0] != segs[0].Ref || got[1] != segs[1].Ref {
			t.Errorf("%q: got %v, %v; want both refs", enc, got, err)
		}
	}
	if err := ReadBatch(zst, "zstd", 10, func(BatchSegment) error { return nil }); !errors.Is(err, ErrCorruptSegment) {
		t.Errorf("over the size limit: got %v; want ErrCorruptSegment", err)
	}
	for n := range len(raw) - 1 {
		calls := 0
		err := ReadBatch(raw[:n], "", 1<<20, func(BatchSegment) error { calls++; return nil })
		if n > 5 && err == nil {
			// A cut exactly between frames is a shorter valid batch; each
			// segment's own footer catches a cut inside one.
			continue
		}
		if err != nil && calls != 0 {
			t.Errorf("truncated at %d: delivered %d segments before failing", n, calls)
		}
	}
}

func FuzzReadBatch(f *testing.F) {
	f.Add(AppendBatch(nil, []BatchSegment{{Ref: SegmentRef{Node: "n", Seq: 1}, Data: buildSegment(threeEvents(), true)}}))
	f.Add([]byte("WMSB\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		calls := 0
		err := ReadBatch(b, "", 1<<20, func(BatchSegment) error { calls++; return nil })
		if err != nil && calls != 0 {
			t.Fatalf("delivered %d segments, then failed: %v", calls, err)
		}
	})
}
