package plausible

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// benchSource hands out pointers into its slice, as a store iterator
// would hand out its decode buffer.
type benchSource struct{ events []Event }

func (s *benchSource) ScanSite(_ string, from, to int64, fn func(*Event) error) error {
	for i := range s.events {
		if t := s.events[i].Time; t >= from && t < to {
			if err := fn(&s.events[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// genEvents makes n events over the 30 days before now: visitors with
// visits of 1-6 pageviews a minute or two apart, some custom and
// engagement events, in roughly time order as the store keeps them.
func genEvents(n int) []Event {
	r := rand.New(rand.NewPCG(1, 2))
	paths := make([]string, 300)
	for i := range paths {
		paths[i] = fmt.Sprintf("/docs/section-%d/page-%d", i%17, i)
	}
	refs := []string{"", "", "www.google.com", "news.ycombinator.com", "t.co", "duckduckgo.com", "github.com"}
	browsers := []string{"Chrome", "Firefox", "Safari", "Edge"}
	devices := []string{"desktop", "mobile", "tablet"}
	countries := []string{"EE", "DE", "US", "FR", "JP", ""}
	start := now.Add(-30 * 24 * time.Hour).UnixMilli()
	span := int64(30 * 24 * time.Hour / time.Millisecond)
	events := make([]Event, 0, n+8)
	for len(events) < n {
		hash := r.Uint64()
		t := start + r.Int64N(span)
		base := Event{
			Hash: hash, Hostname: "example.com", ReferrerHost: refs[r.IntN(len(refs))],
			Browser: browsers[r.IntN(len(browsers))], BrowserVersion: "120.0", OS: "Linux", OSVersion: "6.1",
			Device: devices[r.IntN(len(devices))], Country: countries[r.IntN(len(countries))], Interactive: true,
			ScrollDepth: ScrollDepthMissing,
		}
		for k := 1 + r.IntN(6); k > 0 && len(events) < n; k-- {
			e := base
			e.Time, e.Kind, e.Path = t, Pageview, paths[r.IntN(len(paths))]
			events = append(events, e)
			if r.IntN(4) == 0 {
				g := e
				g.Kind, g.Time, g.EngagedMS, g.ScrollDepth = Engagement, t+5000, uint32(r.IntN(60000)), uint8(r.IntN(101))
				events = append(events, g)
			}
			if r.IntN(10) == 0 {
				c := e
				c.Kind, c.Name, c.Time = Custom, "Signup", t+7000
				events = append(events, c)
			}
			t += 30000 + r.Int64N(90000)
		}
	}
	// Blocks are roughly time ordered: sort by a coarse minute bucket.
	sortByMinute(events)
	return events
}

func sortByMinute(events []Event) {
	buckets := map[int64][]Event{}
	var keys []int64
	for _, e := range events {
		k := e.Time / 60000
		if _, ok := buckets[k]; !ok {
			keys = append(keys, k)
		}
		buckets[k] = append(buckets[k], e)
	}
	slicesSortInt64(keys)
	events = events[:0]
	for _, k := range keys {
		events = append(events, buckets[k]...)
	}
}

func slicesSortInt64(a []int64) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

var benchEvents []Event

func benchQuery(b *testing.B, body string) {
	if benchEvents == nil {
		benchEvents = genEvents(1_000_000)
	}
	q, err := Parse([]byte(body), testSite(), now)
	if err != nil {
		b.Fatal(err)
	}
	src := &benchSource{events: benchEvents}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if _, err := Evaluate(q, src, Config{}); err != nil {
			b.Fatal(err)
		}
	}
	reportRates(b, float64(len(benchEvents))*float64(b.N), cpuTime()-cpu0)
}

// reportRates gives events per wall second and per second of this
// process's CPU time (user+system, GC included): on a shared machine the
// second is the per-core figure.
func reportRates(b *testing.B, events float64, cpu time.Duration) {
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(events/cpu.Seconds(), "events/cpu-s")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAggregate: scanning and sessionising 1 M events for the simple
// aggregates.
func BenchmarkAggregate(b *testing.B) {
	benchQuery(b, `{"site_id":"example.com","metrics":["visitors","visits","pageviews","bounce_rate","visit_duration","views_per_visit"],"date_range":"30d"}`)
}

func BenchmarkVisitorsOnly(b *testing.B) {
	benchQuery(b, `{"site_id":"example.com","metrics":["visitors"],"date_range":"30d"}`)
}

func BenchmarkPageBreakdown(b *testing.B) {
	benchQuery(b, `{"site_id":"example.com","metrics":["visitors","pageviews","bounce_rate","time_on_page"],"date_range":"30d","dimensions":["event:page"]}`)
}

func BenchmarkFilteredBySource(b *testing.B) {
	benchQuery(b, `{"site_id":"example.com","metrics":["visitors","pageviews","bounce_rate"],"date_range":"30d","dimensions":["time:day"],"filters":[["is","visit:source",["google.com"]],["contains","event:page",["section-3"]]]}`)
}

// BenchmarkBareScan is the baseline: the source handing out the same 1 M
// events to a callback that only counts them.
func BenchmarkBareScan(b *testing.B) {
	if benchEvents == nil {
		benchEvents = genEvents(1_000_000)
	}
	src := &benchSource{events: benchEvents}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	n := 0
	for i := 0; i < b.N; i++ {
		_ = src.ScanSite("site-1", 0, 1<<62, func(*Event) error { n++; return nil })
	}
	reportRates(b, float64(n), cpuTime()-cpu0)
}
