package ingest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/klauspost/compress/s2"
)

// BenchmarkCaptureStall measures what the writer and the shipper do to
// the goroutines that share their core: an edge pinned to one CPU runs
// with GOMAXPROCS 1, so while the shipper checks, frames and compresses
// a batch without giving the processor up, no redirect is served (Go
// preempts a goroutine only after 10 ms). b.N clicks from 20,000 visitors
// go through capture, the writer and the shipper (default 8 MiB
// segments, 2 s age) to an aggregator in the same process that only
// acknowledges; meanwhile a probe goroutine sleeps 200 µs at a time and
// records how late it wakes, counting only the part of each delay in
// which this process had the CPU (another process taking it is not a
// stall of ours). Reported: the probe's p99 and longest lateness in µs
// (stall-p99-µs, stall-max-µs).
//
//	taskset -c 1 go test ./ingest/ -run '^$' -bench BenchmarkCaptureStall -benchtime 2000000x -count 3
func BenchmarkCaptureStall(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var standIn []byte
	agg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// It stands for another machine: it decompresses in small steps,
		// giving the processor up between them, so that its own work does
		// not show as the edge's stalls.
		if r.Header.Get("Content-Encoding") != "s2" {
			http.Error(w, "unsupported Content-Encoding", http.StatusBadRequest)
			return
		}
		raw := standIn[:0]
		zr := s2.NewReader(r.Body)
		for {
			raw = slices.Grow(raw, 64<<10)
			n, err := zr.Read(raw[len(raw) : len(raw)+64<<10])
			raw = raw[:len(raw)+n]
			runtime.Gosched()
			if err == io.EOF {
				break
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		standIn = raw // the shipper sends one batch at a time
		ack := ShipAck{Acked: []SegmentRef{}}
		if err := ReadBatch(raw, "", 64<<20, func(s BatchSegment) error {
			ack.Acked = append(ack.Acked, s.Ref)
			return nil
		}); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(ack)
	}))
	defer agg.Close()
	p, err := Open(Config{
		Dir: b.TempDir(), NodeID: "bench", Region: "eu",
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		AggregatorURL:  agg.URL, ShipToken: "t",
		Logger: testLogger(b), Metrics: metrics.NewSet(),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(b.Context())
	const visitors = 20_000
	uas := distinctUAs(visitors)
	addrs := make([][]byte, visitors)
	for v := range addrs {
		addrs[v] = []byte(benchAddr(v))
	}
	ctx := clickCtx("http://wm.example/aB3dE7x", "127.0.0.1", nil)
	code := []byte("aB3dE7x")
	click := func(i int) {
		v := (i * 7919) % visitors
		ctx.Request.Header.SetUserAgentBytes(uas[v])
		ctx.Request.Header.SetBytesV("X-Forwarded-For", addrs[v])
		p.CaptureClick(ctx, code)
		if i%64 == 63 {
			runtime.Gosched() // a serving goroutine blocks in read between requests
		}
	}
	for i := range visitors {
		click(i)
	}
	waitShippedAll(b, p)

	var stop atomic.Bool
	lateness := make([]time.Duration, 0, 1<<16)
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		const nap = 200 * time.Microsecond
		for !stop.Load() {
			t0, c0 := time.Now(), processCPU()
			time.Sleep(nap)
			late := time.Since(t0) - nap
			// Only the part of it this process ran: on a shared machine
			// another process may have had the CPU meanwhile.
			own := min(late, max(processCPU()-c0-nap, 0))
			lateness = append(lateness, own)
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		click(i)
	}
	b.StopTimer()
	waitShippedAll(b, p)
	stop.Store(true)
	<-probeDone
	if n := p.Dropped(DropQueueFull); n != 0 {
		b.Fatalf("dropped %d clicks as queue_full", n)
	}
	slices.Sort(lateness)
	if len(lateness) > 0 {
		b.ReportMetric(float64(lateness[len(lateness)*99/100].Microseconds()), "stall-p99-µs")
		b.ReportMetric(float64(lateness[len(lateness)-1].Microseconds()), "stall-max-µs")
	}
}

// waitShippedAll waits, with a deadline, until nothing is queued or
// pending: every captured click written, sealed, shipped and acknowledged.
func waitShippedAll(tb testing.TB, p *Pipeline) {
	deadline := time.Now().Add(60 * time.Second)
	for p.QueueLen() > 0 || p.PendingBytes() > 0 {
		if time.Now().After(deadline) {
			tb.Fatalf("not shipped: %d queued, %d bytes pending", p.QueueLen(), p.PendingBytes())
		}
		time.Sleep(time.Millisecond)
	}
}

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
