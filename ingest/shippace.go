package ingest

import (
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"syscall"
	"time"
)

// A node that aggregates its own events (`--dev`, or the edge and
// aggregator roles in one process) folds them on the CPUs that serve its
// redirects: under saturation every click then costs its redirect plus
// its aggregation, on the same core. busyGate lets the shipper hold
// sealed segments back while the process is busy serving, so that
// aggregation runs in the time serving leaves, as a database defers its
// compactions behind foreground writes. Nothing is lost or reordered: the
// segments wait on disk, counted in the pending bytes and the ship lag,
// and a hold never lasts longer than Config.DeferShipWhileBusy, after
// which the whole backlog drains before the next hold may start. So the
// stats of a node under sustained saturation lag by at most that long
// plus one drain.
//
// "Busy serving" is both of, over the last sample:
//   - events written at busyMinRate or more: the node is taking traffic,
//     not just draining its own backlog, whose folding would otherwise
//     look like load and hold itself back;
//   - its CPUs saturated: the process used at least busyMinShare of
//     GOMAXPROCS, or half its goroutines waited busyMinLatency or more
//     to run (the Go scheduler's latencies: a core shared with other
//     processes is saturated before the process uses all of it). A big
//     machine with idle cores ships at once.
//
// A hold, once started, lasts while the events keep coming at that rate
// (up to its cap), whatever one sample's CPU figures say; it ends after
// busyQuietSamples samples in a row below the rate.
const (
	busyMinRate    = 2000 // events written a second
	busyMinShare   = 0.5  // of GOMAXPROCS
	busyMinLatency = 50e-6
	busySample     = 100 * time.Millisecond
	// busyStale: figures older than this say nothing about now.
	busyStale     = time.Second
	busyHoldCheck = 100 * time.Millisecond // how often a hold looks again
	// busyQuietSamples below busyMinRate in a row end a hold.
	busyQuietSamples = 3
)

type busyGate struct {
	maxHold time.Duration
	written func() uint64        // events taken in so far (written or queued)
	cpuTime func() time.Duration // the process's user+system time so far
	procs   func() int
	// waits reports the goroutines made to run so far, in all and those
	// that waited busyMinLatency or more (cumulative).
	waits func() (all, slow uint64)
	held  *atomic.Int64 // ns spent holding, for the metric
	log   func(msg string, args ...any)
	holds atomic.Int64 // verdicts that held a round back

	// Used by the shipper goroutine only.
	sampledAt  time.Time
	cpuAt      time.Duration
	writtenAt  uint64
	waitsAt    [2]uint64
	busy       bool
	quiet      int        // samples in a row below busyMinRate
	why        [3]float64 // the last sample's rate, CPU share and share of slow waits
	holdingFor time.Time  // start of the current hold; zero: not holding
	// forced: a hold reached its cap, and the drain it released goes on
	// to the end, busy or not (drained clears it).
	forced bool
}

// drained tells the gate the backlog is shipped: the next hold may start.
func (g *busyGate) drained() {
	if g != nil {
		g.forced = false
	}
}

func newBusyGate(maxHold time.Duration, written func() uint64, held *atomic.Int64, log func(string, ...any)) *busyGate {
	return &busyGate{maxHold: maxHold, written: written, cpuTime: processCPUTime, procs: func() int { return runtime.GOMAXPROCS(0) },
		waits: newSchedWaits().read, held: held, log: log}
}

// hold returns how long the shipper waits before its next round: zero to
// ship now. It is called before every round, so a burst that starts while
// the node drains a backlog (folded in a pause between bursts) holds the
// rest back again; only the drain a capped hold released runs to its end.
func (g *busyGate) hold(now time.Time) time.Duration {
	if g == nil || g.maxHold <= 0 || g.forced {
		return 0
	}
	if !g.sample(now) {
		// No fresh figures (the first call, or the first after a drain
		// or an idle spell): look again over one sample before deciding,
		// so a burst that began meanwhile is not averaged away.
		return busySample
	}
	if !g.busy {
		g.endHold(now)
		return 0
	}
	if g.holdingFor.IsZero() {
		g.holdingFor = now
		g.log("holding sealed segments back while busy serving", "events_per_s", int(g.why[0]),
			"cpu_share", round2(g.why[1]), "slow_waits", round2(g.why[2]), "at_most", g.maxHold)
	}
	if now.Sub(g.holdingFor) >= g.maxHold {
		g.endHold(now)
		g.forced = true
		return 0 // held long enough: this drain goes through busy or not
	}
	g.holds.Add(1)
	return busyHoldCheck
}

func (g *busyGate) endHold(now time.Time) {
	if !g.holdingFor.IsZero() {
		d := now.Sub(g.holdingFor)
		g.held.Add(int64(d))
		g.holdingFor = time.Time{}
		g.log("shipping held segments", "held", d.Round(time.Millisecond), "events_per_s", int(g.why[0]), "cpu_share", round2(g.why[1]))
	}
}

// sample refreshes the verdict once a busySample has passed. It reports
// false when it had no recent baseline (none yet, or older than
// busyStale outside a hold): it took one, and the verdict is unknown.
func (g *busyGate) sample(now time.Time) (fresh bool) {
	wall := now.Sub(g.sampledAt)
	if !g.sampledAt.IsZero() && wall < busySample {
		return true // the last verdict is recent enough
	}
	cpu, written := g.cpuTime(), g.written()
	all, slow := g.waits()
	fresh = !g.sampledAt.IsZero() && wall <= busyStale
	if fresh || (!g.sampledAt.IsZero() && !g.holdingFor.IsZero()) {
		rate := float64(written-g.writtenAt) / wall.Seconds()
		share := float64(cpu-g.cpuAt) / (float64(wall) * float64(max(g.procs(), 1)))
		dAll, dSlow := all-g.waitsAt[0], slow-g.waitsAt[1]
		slowShare := 0.0
		if dAll > 0 {
			slowShare = float64(dSlow) / float64(dAll)
		}
		saturated := share >= busyMinShare || slowShare >= 0.5
		if rate >= busyMinRate {
			g.quiet = 0
		} else {
			g.quiet++
		}
		// Once holding, the hold lasts while the traffic does: a sample
		// in which other processes took the core, or a lull of one
		// sample in a jittery load, is no reason to start folding.
		if g.holdingFor.IsZero() {
			g.busy = rate >= busyMinRate && saturated
		} else {
			g.busy = g.quiet < busyQuietSamples
		}
		g.why = [3]float64{rate, share, slowShare}
	}
	g.sampledAt, g.cpuAt, g.writtenAt, g.waitsAt = now, cpu, written, [2]uint64{all, slow}
	return fresh || !g.holdingFor.IsZero()
}

// schedWaits reads the Go scheduler's latency histogram (the time each
// goroutine spent runnable before it ran).
type schedWaits struct{ s []metrics.Sample }

func newSchedWaits() *schedWaits {
	return &schedWaits{s: []metrics.Sample{{Name: "/sched/latencies:seconds"}}}
}

func (w *schedWaits) read() (all, slow uint64) {
	metrics.Read(w.s)
	if w.s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0, 0
	}
	h := w.s[0].Value.Float64Histogram()
	for i, c := range h.Counts {
		all += c
		if h.Buckets[i] >= busyMinLatency { // the bucket's lower bound
			slow += c
		}
	}
	return all, slow
}

func round2(f float64) float64 { return float64(int(f*100+0.5)) / 100 }

// processCPUTime is the user and system CPU time of this process.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
