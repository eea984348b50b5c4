package sources

import "testing"

// Referrer hosts and tags in the mix a site sees: search, social, unknown,
// tagged, direct. The same slices feed the baseline.
var (
	benchHosts = []string{
		"www.google.com", "www.google.co.uk", "m.facebook.com", "t.co", "duckduckgo.com",
		"www.bing.com", "l.instagram.com", "news.ycombinator.com", "blog.example.com",
		"www.markosaric.com", "en.m.wikipedia.org", "chatgpt.com", "", "",
	}
	benchUTM = []string{"", "", "", "", "", "google", "Newsletter", "fb-ads", "", "", "", "", "", "twitter"}
	benchTag = []UTM{
		{}, {}, {}, {}, {}, {Source: "google", Medium: "cpc"}, {Source: "Newsletter", Medium: "email"},
		{Source: "fb-ads", Medium: "paid_social", Campaign: "spring-shop"}, {}, {}, {}, {}, {}, {Source: "twitter"},
	}
	sinkString string
)

// BenchmarkBaselineMapLookup is one lookup in a Go map of the same size
// as the host table: the floor the others are measured against.
func BenchmarkBaselineMapLookup(b *testing.B) {
	m := load().hosts
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkString = m[benchHosts[i%len(benchHosts)]]
	}
}

func BenchmarkSource(b *testing.B) {
	load()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		j := i % len(benchHosts)
		sinkString = Source(benchHosts[j], benchUTM[j])
	}
}

func BenchmarkSourceUnknownHost(b *testing.B) {
	load()
	b.ReportAllocs()
	for b.Loop() {
		sinkString = Source("static.assets.cdn.some-unknown-blog.example.org", "")
	}
}

func BenchmarkChannel(b *testing.B) {
	sources := make([]string, len(benchHosts))
	for j := range benchHosts {
		sources[j] = Source(benchHosts[j], benchUTM[j])
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		j := i % len(sources)
		sinkString = Channel(sources[j], benchTag[j], "")
	}
}

// BenchmarkSourceAndChannel is the per-visit cost at fold time.
func BenchmarkSourceAndChannel(b *testing.B) {
	load()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		j := i % len(benchHosts)
		sinkString = Channel(Source(benchHosts[j], benchUTM[j]), benchTag[j], "")
	}
}

// BenchmarkBuild is the one-time cost of the first call.
func BenchmarkBuild(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := build(referersTxt, overridesTxt); err != nil {
			b.Fatal(err)
		}
	}
}
