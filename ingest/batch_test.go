package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

func TestReadBatchRoundTrip(t *testing.T) {
	segs := []BatchSegment{
		{Ref: SegmentRef{Node: "node-a", Inc: 3, Seq: 7}, Data: buildSegment(threeEvents(), true)},
		{Ref: SegmentRef{Node: "node-a", Inc: 3, Seq: 8}, Data: buildSegment(nil, true)},
	}
	raw := AppendBatch(nil, segs)
	enc, _ := zstd.NewWriter(nil)
	zst := enc.EncodeAll(raw, nil)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	for enc, body := range map[string][]byte{"": raw, "s2": s2Stream(raw), "zstd": zst, "gzip": gz.Bytes()} {
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
	for enc, body := range map[string][]byte{"zstd": zst, "s2": s2Stream(raw)} {
		if err := ReadBatch(body, enc, 10, func(BatchSegment) error { return nil }); !errors.Is(err, ErrCorruptSegment) {
			t.Errorf("%s over the size limit: got %v; want ErrCorruptSegment", enc, err)
		}
	}
	damaged := s2Stream(raw)
	damaged[len(damaged)/2] ^= 0x10 // inside the block: its CRC32C fails
	if err := ReadBatch(damaged, "s2", 1<<20, func(BatchSegment) error { return nil }); !errors.Is(err, ErrCorruptSegment) {
		t.Errorf("damaged s2 body: got %v; want ErrCorruptSegment", err)
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

// zstdBomb is 8 KB at most of zstd frames that together declare and
// decompress to 248 MiB of zeros: almost eight times the batch cap.
func zstdBomb(t testing.TB) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderCRC(false))
	if err != nil {
		t.Fatal(err)
	}
	frame := enc.EncodeAll(make([]byte, 62<<20), nil)
	bomb := bytes.Repeat(frame, 4)
	if len(bomb) > 8<<10 {
		t.Fatalf("bomb is %d bytes; want at most 8 KB", len(bomb))
	}
	return bomb
}

// A few KB of zstd that decompress to far more than the batch cap are
// refused, and reading them allocates a small multiple of the cap, not
// what the frames declare.
func TestReadBatchZstdBomb(t *testing.T) {
	bomb := zstdBomb(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	calls := 0
	err := ReadBatch(bomb, "zstd", DefaultMaxBatchBytes, func(BatchSegment) error { calls++; return nil })
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorruptSegment) || calls != 0 {
		t.Fatalf("bomb of %d bytes: got %v after %d segments; want a corrupt-segment refusal", len(bomb), err, calls)
	}
	// A real batch is at most a 4 MiB batch or one segment a little past
	// the 8 MiB rotation size; reading anything may cost a few times that,
	// never what a bomb declares.
	budget := uint64(128 << 20)
	if raceEnabled {
		// The race detector's sync.Pool drops what is put back, so the
		// decoder's buffers are allocated again; the unbounded read this
		// guards against took 620 MiB.
		budget *= 2
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > budget {
		t.Fatalf("refusing a %d-byte bomb allocated %d MiB; want at most %d MiB (cap %d MiB)",
			len(bomb), alloc>>20, budget>>20, DefaultMaxBatchBytes>>20)
	}
}

func FuzzReadBatch(f *testing.F) {
	plain := AppendBatch(nil, []BatchSegment{{Ref: SegmentRef{Node: "n", Inc: 3, Seq: 1}, Data: buildSegment(threeEvents(), true)}})
	f.Add(plain, uint8(0))
	var sp Splitter
	if subs, err := sp.Split(buildSegment(threeEvents(), true), nil); err == nil {
		var parts []BatchSegment
		for _, sub := range subs {
			parts = append(parts, BatchSegment{Ref: sub.Ref, Data: sub.Data})
		}
		f.Add(AppendBatch(nil, parts), uint8(0)) // version 3: parts
	}
	f.Add([]byte("WMSB\x01"), uint8(0))
	f.Add([]byte("WMSB\x01\x01n\x00\x00\x00\x00\x00\x00\x00\x01\x00"), uint8(0))
	f.Add([]byte{}, uint8(0))
	enc, _ := zstd.NewWriter(nil)
	f.Add(enc.EncodeAll(plain, nil), uint8(2))
	f.Add(zstdBomb(f), uint8(2))
	f.Add(s2.EncodeBetter(nil, plain), uint8(1))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(make([]byte, 4<<20))
	zw.Close()
	f.Add(gz.Bytes(), uint8(3))
	encodings := []string{"", "s2", "zstd", "gzip"}
	f.Fuzz(func(t *testing.T, b []byte, enc uint8) {
		const limit = 1 << 20
		calls := 0
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := ReadBatch(b, encodings[int(enc)%len(encodings)], limit, func(BatchSegment) error { calls++; return nil })
		runtime.ReadMemStats(&after)
		if err != nil && calls != 0 {
			t.Fatalf("delivered %d segments, then failed: %v", calls, err)
		}
		// Decoding stays within a small multiple of the limit (plus the
		// decoders' fixed buffers), whatever the input declares.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16*limit+uint64(16*len(b)) {
			t.Fatalf("%s input of %d bytes allocated %d KiB with a %d KiB limit", encodings[int(enc)%len(encodings)], len(b), alloc>>10, limit>>10)
		}
	})
}

// A version 1 batch (no incarnation in the framing) is still read, with
// incarnation 0.
func TestReadBatchVersion1(t *testing.T) {
	data := buildSegment(nil, true)
	raw := append([]byte(batchMagic), batchVersion1)
	raw = appendString(raw, "node-a")
	raw = binary.BigEndian.AppendUint64(raw, 7)
	raw = binary.AppendUvarint(raw, uint64(len(data)))
	raw = append(raw, data...)
	var got []SegmentRef
	err := ReadBatch(raw, "", 1<<20, func(s BatchSegment) error {
		got = append(got, s.Ref)
		if !bytes.Equal(s.Data, data) {
			t.Errorf("segment bytes changed")
		}
		return nil
	})
	if err != nil || len(got) != 1 || got[0] != (SegmentRef{Node: "node-a", Seq: 7}) {
		t.Fatalf("got %v, %v; want node-a incarnation 0 seq 7", got, err)
	}
}

// The ack's JSON names the fields as DESIGN.md documents them.
func TestShipAckJSON(t *testing.T) {
	var ack ShipAck
	body := `{"acked":[{"node":"a","inc":5,"seq":1}],"rejected":[{"node":"a","inc":5,"seq":2,"reason":"conflict"}]}`
	if err := json.Unmarshal([]byte(body), &ack); err != nil {
		t.Fatal(err)
	}
	if len(ack.Acked) != 1 || ack.Acked[0] != (SegmentRef{Node: "a", Inc: 5, Seq: 1}) ||
		len(ack.Rejected) != 1 || ack.Rejected[0].SegmentRef != (SegmentRef{Node: "a", Inc: 5, Seq: 2}) || ack.Rejected[0].Reason != RejectConflict {
		t.Fatalf("decoded %+v", ack)
	}
	out, _ := json.Marshal(ShipAck{Acked: []SegmentRef{{Node: "a", Inc: 5, Seq: 1}}})
	if string(out) != `{"acked":[{"node":"a","inc":5,"seq":1}]}` {
		t.Fatalf("encoded %s", out)
	}
}

// s2Stream compresses b as the shipper does: s2's framed stream format.
func s2Stream(b []byte) []byte {
	var out bytes.Buffer
	w := s2.NewWriter(&out, s2.WriterConcurrency(1))
	_ = w.EncodeBuffer(b)
	_ = w.Close()
	return out.Bytes()
}
