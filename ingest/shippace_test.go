package ingest

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// fakeLoad drives a busyGate's inputs by hand.
type fakeLoad struct {
	written          uint64
	cpu              time.Duration
	procs            int
	waits, slowWaits uint64
}

func newTestGate(t *testing.T, maxHold time.Duration, l *fakeLoad) (*busyGate, *atomic.Int64) {
	held := new(atomic.Int64)
	g := newBusyGate(maxHold, func() uint64 { return l.written }, held, func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) })
	g.cpuTime = func() time.Duration { return l.cpu }
	g.procs = func() int { return l.procs }
	g.waits = func() (uint64, uint64) { return l.waits, l.slowWaits }
	return g, held
}

// advance moves the fake clock by d with the given event rate and CPU
// share of all procs.
func (l *fakeLoad) advance(now *time.Time, d time.Duration, rate float64, share float64) {
	*now = now.Add(d)
	l.written += uint64(rate * d.Seconds())
	l.cpu += time.Duration(share * float64(d) * float64(l.procs))
}

func TestBusyGateHoldsOnlyWhileServingSaturates(t *testing.T) {
	l := &fakeLoad{procs: 1}
	g, held := newTestGate(t, 30*time.Second, l)
	now := time.Unix(1_700_000_000, 0)
	if d := g.hold(now); d != busySample {
		t.Fatalf("first call (no sample yet) waits %v; want one sample, %v, before deciding", d, busySample)
	}
	cases := []struct {
		name     string
		rate     float64
		share    float64
		wantHold bool
	}{
		{"saturated serving", 50_000, 0.95, true},
		{"many events but idle CPU (a big machine)", 50_000, 0.3, false},
		{"busy CPU, few events (draining its own backlog)", 500, 1.0, false},
		{"both at the thresholds", busyMinRate, busyMinShare, true},
		{"idle", 0, 0.01, false},
	}
	for _, c := range cases {
		for range busyQuietSamples { // each case starts without a hold
			l.advance(&now, 200*time.Millisecond, 0, 0)
			g.hold(now)
		}
		l.advance(&now, 200*time.Millisecond, c.rate, c.share)
		got := g.hold(now) > 0
		if got != c.wantHold {
			t.Errorf("%s: held %v; want %v", c.name, got, c.wantHold)
		}
	}
	if held.Load() == 0 {
		t.Error("holding time not accounted after the holds ended")
	}
}

func TestBusyGateReleasesAfterMaxHold(t *testing.T) {
	l := &fakeLoad{procs: 2}
	g, held := newTestGate(t, 3*time.Second, l)
	now := time.Unix(1_700_000_000, 0)
	g.hold(now)
	var heldFor time.Duration
	for i := 0; i < 100; i++ {
		l.advance(&now, 100*time.Millisecond, 80_000, 0.9)
		if g.hold(now) == 0 {
			break
		}
		heldFor += 100 * time.Millisecond
	}
	// The hold starts at the first busy verdict (100 ms in) and ends when
	// it has lasted 3 s: 30 checks of 100 ms, the 31st ships.
	if heldFor != 3*time.Second {
		t.Fatalf("held for %v under sustained saturation; want exactly the 3s cap", heldFor)
	}
	if got := time.Duration(held.Load()); got != 3*time.Second {
		t.Fatalf("held metric %v; want 3s", got)
	}
	// The drain the cap released runs to its end, busy or not...
	l.advance(&now, 100*time.Millisecond, 80_000, 0.9)
	if g.hold(now) != 0 {
		t.Fatal("the drain a capped hold released was held again before it ended")
	}
	// ...and once it has, the next drain may be held again, for at most
	// the cap again.
	g.drained()
	l.advance(&now, 100*time.Millisecond, 80_000, 0.9)
	if g.hold(now) == 0 {
		t.Fatal("a new hold did not start after the drain")
	}
}

func TestBusyGateOffNeverHolds(t *testing.T) {
	var g *busyGate
	if g.hold(time.Now()) != 0 {
		t.Fatal("a nil gate held")
	}
	l := &fakeLoad{procs: 1}
	g, _ = newTestGate(t, 0, l)
	now := time.Now()
	g.hold(now)
	l.advance(&now, 100*time.Millisecond, 1e6, 1)
	if g.hold(now) != 0 {
		t.Fatal("a gate with no hold time held")
	}
}

// switchableLoad is a probe for a running pipeline's gate: busy makes it
// report saturated serving (a million events a second, every CPU used),
// otherwise no events and no CPU.
type switchableLoad struct {
	busy    atomic.Bool
	mu      sync.Mutex
	last    time.Time
	cpu     time.Duration
	written uint64
}

func (l *switchableLoad) step() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.last.IsZero() && l.busy.Load() {
		d := now.Sub(l.last)
		l.cpu += d * time.Duration(runtime.GOMAXPROCS(0))
		l.written += uint64(d.Microseconds())
	}
	l.last = now
}

// pacedPipeline is shipPipeline with a gate driven by load.
func pacedPipeline(t *testing.T, agg *fakeAggregator, maxHold time.Duration, load *switchableLoad) *Pipeline {
	p, err := newPipeline(Config{
		Dir: t.TempDir(), NodeID: "node-a", Region: "eu", SyncInterval: 10 * time.Millisecond,
		Logger: testLogger(t), Metrics: metrics.NewSet(),
		AggregatorURL: agg.srv.URL, ShipToken: "s3cret", SegmentMaxBytes: 1024,
		SegmentMaxAge: 20 * time.Millisecond, ShipBatchMaxBytes: 3000, ShipMaxBackoff: 20 * time.Millisecond,
		DeferShipWhileBusy: maxHold,
	})
	if err != nil {
		t.Fatal(err)
	}
	g := p.ship.gate
	g.cpuTime = func() time.Duration { load.step(); load.mu.Lock(); defer load.mu.Unlock(); return load.cpu }
	g.written = func() uint64 { load.mu.Lock(); defer load.mu.Unlock(); return load.written }
	// The load was already there when the pipeline opened: the gate's
	// last sample saw it.
	g.sample(time.Now())
	g.busy = load.busy.Load()
	p.start()
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// TestShipperHoldsWhileBusyThenShipsAll: while the node is busy serving,
// sealed segments stay on disk and nothing is posted; when the load ends
// every event arrives, once.
func TestShipperHoldsWhileBusyThenShipsAll(t *testing.T) {
	agg := newFakeAggregator(t, "ack")
	load := new(switchableLoad)
	load.busy.Store(true)
	p := pacedPipeline(t, agg, time.Hour, load)
	captureN(p, 200)
	waitFor(t, "segments sealed and the gate holding", func() bool {
		return len(sealedFiles(t, p.cfg.Dir)) >= 3 && p.ship.gate.holds.Load() >= 5
	})
	agg.mu.Lock()
	posts := agg.posts
	agg.mu.Unlock()
	if posts != 0 {
		t.Fatalf("%d posts reached the aggregator while the node was busy; want none", posts)
	}
	load.busy.Store(false)
	waitFor(t, "all events at the aggregator", func() bool { return agg.events() == 200 })
	waitFor(t, "shipped segments deleted", func() bool { return p.PendingBytes() == 0 })
	if agg.resent != 0 {
		t.Errorf("%d segments sent twice", agg.resent)
	}
	if p.ship.heldNs.Load() == 0 {
		t.Error("held time not accounted")
	}
}

// TestShipperHoldIsBounded: under saturation that never ends, the
// backlog still drains once each hold reaches its cap.
func TestShipperHoldIsBounded(t *testing.T) {
	agg := newFakeAggregator(t, "ack")
	load := new(switchableLoad)
	load.busy.Store(true)
	p := pacedPipeline(t, agg, 300*time.Millisecond, load)
	captureN(p, 200)
	waitFor(t, "all events at the aggregator though busy", func() bool { return agg.events() == 200 })
	if got := time.Duration(p.ship.heldNs.Load()); got < 300*time.Millisecond {
		t.Errorf("held %v before the drain; want at least the 300ms cap", got)
	}
}

// TestBusyGateSeesACoreSharedWithOthers: another process takes half the
// core, so this one uses only 40 % of it, but its goroutines queue to
// run: that is saturation too.
func TestBusyGateSeesACoreSharedWithOthers(t *testing.T) {
	l := &fakeLoad{procs: 1}
	g, _ := newTestGate(t, 30*time.Second, l)
	now := time.Unix(1_700_000_000, 0)
	g.hold(now)
	step := func(slowShare float64) bool {
		l.advance(&now, 200*time.Millisecond, 40_000, 0.4)
		l.waits += 1000
		l.slowWaits += uint64(slowShare * 1000)
		return g.hold(now) > 0
	}
	if !step(0.8) {
		t.Error("not held with 80% of goroutines waiting 50µs or more to run")
	}
	for range busyQuietSamples { // the traffic pauses: the hold ends
		l.advance(&now, 200*time.Millisecond, 0, 0)
		g.hold(now)
	}
	if step(0.1) {
		t.Error("held with 40% CPU and 10% of goroutines waiting: the core has room")
	}
}

// TestSchedWaitsReadsTheRuntime: the real histogram counts the goroutines
// this test makes run.
func TestSchedWaitsReadsTheRuntime(t *testing.T) {
	w := newSchedWaits()
	before, _ := w.read()
	done := make(chan struct{})
	for range 100 {
		go func() { done <- struct{}{} }()
		<-done
	}
	after, slow := w.read()
	// The runtime records the latency of a sample of the runs (1 in 8).
	if after < before+100/16 {
		t.Fatalf("scheduler latencies counted %d of 100 new runs; want a sample of them", after-before)
	}
	if slow > after {
		t.Fatalf("slow %d > all %d", slow, after)
	}
}

// TestBusyGateHoldLastsWhileTrafficDoes: a sample with little CPU (others
// took the core) does not end a hold while the events keep coming; the
// traffic stopping does.
func TestBusyGateHoldLastsWhileTrafficDoes(t *testing.T) {
	l := &fakeLoad{procs: 1}
	g, _ := newTestGate(t, 30*time.Second, l)
	now := time.Unix(1_700_000_000, 0)
	g.hold(now)
	l.advance(&now, 200*time.Millisecond, 40_000, 0.9)
	if g.hold(now) == 0 {
		t.Fatal("saturated serving not held")
	}
	l.advance(&now, 200*time.Millisecond, 40_000, 0.2)
	if g.hold(now) == 0 {
		t.Fatal("hold ended on one sample of low CPU while the traffic goes on")
	}
	l.advance(&now, 200*time.Millisecond, 100, 0.9)
	if g.hold(now) == 0 {
		t.Fatal("hold ended on one quiet sample")
	}
	for range busyQuietSamples - 1 {
		l.advance(&now, 200*time.Millisecond, 100, 0.9)
		g.hold(now)
	}
	if g.hold(now) != 0 {
		t.Fatal("hold went on after the traffic stopped")
	}
	l.advance(&now, 200*time.Millisecond, 40_000, 0.2)
	if g.hold(now) != 0 {
		t.Fatal("a new hold started without the CPUs saturated")
	}
}

// TestBusyGateStaleFiguresWaitOneSample: after an idle spell (or a long
// drain) the old baseline would average a burst that just began away, so
// the gate takes a fresh 100 ms sample before deciding.
func TestBusyGateStaleFiguresWaitOneSample(t *testing.T) {
	l := &fakeLoad{procs: 1}
	g, _ := newTestGate(t, 30*time.Second, l)
	now := time.Unix(1_700_000_000, 0)
	g.hold(now)
	l.advance(&now, 10*time.Second, 0, 0)              // idle for long
	l.advance(&now, 100*time.Millisecond, 50_000, 1.0) // a burst begins
	if d := g.hold(now); d != busySample {
		t.Fatalf("stale figures: waited %v; want one fresh sample", d)
	}
	l.advance(&now, 100*time.Millisecond, 50_000, 1.0)
	if g.hold(now) == 0 {
		t.Fatal("the burst was not held after a fresh sample")
	}
}
