package ingest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// BenchmarkShipEncode compresses a ship batch of eight 5,000-event
// segments (varied ids, times, visitors, codes and pages, as real traffic)
// with s2 (what the shipper sends) and the zstd levels it could use; the
// shipper runs on the edge's serving core, so its cost per event is part
// of a redirect's.
func BenchmarkShipEncode(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var batch []BatchSegment
	for s := range 8 {
		events := make([]Event, 0, 5000)
		for i := range 5000 {
			ev := sampleClick()
			if i%2 == 1 {
				ev = sampleSiteEvent()
				ev.Path = fmt.Sprintf("/p/%d", rng.IntN(500))
			}
			for j := range ev.ID {
				ev.ID[j] = byte(rng.Uint32())
			}
			ev.Time += int64(s*5000+i) * 7
			ev.VisitorHash = rng.Uint64() % 100_000
			ev.Code = fmt.Sprintf("c%06d", rng.IntN(2000))
			events = append(events, ev)
		}
		batch = append(batch, BatchSegment{Ref: SegmentRef{Node: "node-a", Seq: uint64(s)}, Data: buildSegment(events, true)})
	}
	raw := AppendBatch(nil, batch)
	b.Run("s2", func(b *testing.B) { // the framed stream format, as the shipper sends it
		var out bytes.Buffer
		w := s2.NewWriter(&out, s2.WriterConcurrency(1))
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			out.Reset()
			w.Reset(&out)
			if err := w.EncodeBuffer(raw); err != nil {
				b.Fatal(err)
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/40_000, "ns/event")
		b.ReportMetric(float64(len(raw))/float64(out.Len()), "ratio")
	})
	for _, level := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault} {
		b.Run(level.String(), func(b *testing.B) {
			enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(1))
			var out []byte
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				out = enc.EncodeAll(raw, out[:0])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/40_000, "ns/event")
			b.ReportMetric(float64(len(raw))/float64(len(out)), "ratio")
		})
	}
}
