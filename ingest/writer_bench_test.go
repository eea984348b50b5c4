package ingest

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

// benchWriter measures the writer's cost per event: enrichment, visitor
// hash, encoding and the write(2) of each batch, for clicks from visitors
// distinct (user agent, address) pairs. Clicks are captured into pending
// events with the timer stopped, a batch at a time, then written as the
// writer goroutine writes them.
//
// geoIP names a city database to enrich with ("" for none); addr gives
// visitor v's address.
func benchWriter(b *testing.B, visitors int, geoIP string, addr func(v int) string) {
	benchWriterBatches(b, visitors, geoIP, addr, 4096, 0)
}

// benchWriterBatches is benchWriter with batches of batch events and,
// when evict > 0, that many bytes read between batches with the timer
// stopped: what the serving goroutines do to the CPU caches in the 2 ms
// the writer lingers between two batches.
func benchWriterBatches(b *testing.B, visitors int, geoIP string, addr func(v int) string, batch, evict int) {
	p, err := newPipeline(Config{
		Dir: b.TempDir(), NodeID: "node-a", Region: "eu",
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		GeoIPPath:      geoIP,
		Logger:         testLogger(b), Metrics: metrics.NewSet(),
	})
	if err != nil {
		b.Fatal(err)
	}
	p.seg.syncer.start()
	defer p.enrich.close()
	defer func() { _ = p.seg.close(); p.seg.syncer.stop() }()
	uas := distinctUAs(visitors)
	ctx := clickCtx("http://wm.example/aB3dE7x?utm_source=news", "127.0.0.1",
		map[string]string{"Referer": "https://news.example.com/story"})
	code := []byte("aB3dE7x")
	junk := make([]byte, evict)
	var junkSum byte
	pes := make([]*pending, batch)
	next := 0
	fill := func(n int) {
		for i := range n {
			v := next % visitors
			next++
			ctx.Request.Header.SetUserAgentBytes(uas[v])
			ctx.Request.Header.Set("X-Forwarded-For", addr(v))
			pe := p.pool.Get().(*pending)
			p.captureInto(pe, ctx, code)
			pes[i] = pe
		}
	}
	// Warm up: every visitor seen once, as after the first seconds of load.
	for done := 0; done < visitors; done += batch {
		n := min(batch, visitors-done)
		fill(n)
		p.writeAll(pes[:n])
		p.handleErr(p.seg.flush())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		n := min(batch, b.N-done)
		b.StopTimer()
		fill(n)
		for i := 0; i < len(junk); i += 64 {
			junk[i]++
			junkSum += junk[i]
		}
		b.StartTimer()
		p.writeAll(pes[:n])
		p.handleErr(p.seg.flush())
	}
	b.StopTimer()
	if junkSum == 1 && evict < 0 { // keeps junkSum
		b.Log(junkSum)
	}
	if p.Dropped(DropIOError) != 0 || p.Dropped(DropDiskCap) != 0 {
		b.Fatalf("dropped events while writing")
	}
}

// benchAddr spreads visitors over 198.18.0.0/15 (a range for benchmarks).
func benchAddr(v int) string { return fmt.Sprintf("198.18.%d.%d", v/250, v%250+1) }

func BenchmarkWriterDistinctVisitors(b *testing.B) { benchWriter(b, 20_000, "", benchAddr) }

// BenchmarkWriterDistinctVisitorsCold is BenchmarkWriterDistinctVisitors
// as a busy edge runs it: batches of 256 events (2 ms at about 128,000
// clicks/s), with 8 MiB read between batches, as the redirects in
// between (100,000 cached links, connection buffers) leave the CPU
// caches. The enricher's user-agent table (1 MiB) is then mostly not in
// them.
func BenchmarkWriterDistinctVisitorsCold(b *testing.B) {
	benchWriterBatches(b, 20_000, "", benchAddr, 256, 8<<20)
}

// BenchmarkWriterOneVisitor is the same load from one visitor, the
// baseline for the ratio.
func BenchmarkWriterOneVisitor(b *testing.B) { benchWriter(b, 1, "", benchAddr) }

// BenchmarkWriterDistinctVisitorsCityDB adds a city database in MaxMind's
// layout: every /24 of the visitors' range is its own record, 40 cities in
// 20 regions of 2 countries.
func BenchmarkWriterDistinctVisitorsCityDB(b *testing.B) {
	var nets []mmdbNet
	for i := range 256 {
		country, sub := "US", fmt.Sprintf("S%d", i%10)
		if i%2 == 1 {
			country = "DE"
		}
		rec := maxmindCity(country, 1, sub, uint32(1000+i%40), fmt.Sprint("City ", i%40))
		rec["postal"] = map[string]any{"code": fmt.Sprint(i)}
		nets = append(nets, mmdbNet{Prefix: fmt.Sprintf("198.18.%d.0/24", i), Record: rec})
	}
	path := filepath.Join(b.TempDir(), "city.mmdb")
	writeFile(b, path, buildMMDB(b, "GeoLite2-City", 6, nets))
	benchWriter(b, 20_000, path, benchAddr)
}

// BenchmarkWriterDistinctVisitorsGeoLite2 uses the real GeoLite2 City
// database (WAYMARK_GEOIP_CITY_DB, as `make geoip` installs it), with the
// visitors spread over the whole unicast IPv4 space: about as many
// distinct records as visitors.
func BenchmarkWriterDistinctVisitorsGeoLite2(b *testing.B) {
	path := os.Getenv("WAYMARK_GEOIP_CITY_DB")
	if path == "" {
		b.Skip("WAYMARK_GEOIP_CITY_DB is not set")
	}
	benchWriter(b, 20_000, path, func(v int) string {
		x := uint32(v+1) * 2654435761
		return fmt.Sprintf("%d.%d.%d.%d", 1+(x>>24)%223, byte(x>>16), byte(x>>8), byte(x))
	})
}
