package store

import (
	"fmt"
	"strings"
	"testing"
)

// benchSearchStore holds 20,000 links of one owner, every tenth tagged
// "spring" and every hundredth pointing at /promo.
func benchSearchStore(b *testing.B) *Store {
	s := newTestStore(b)
	const n, perBatch = 20_000, 1000
	for start := 0; start < n; start += perBatch {
		apply(b, s, uint64(start+perBatch), func(bt *Batch) error {
			for i := start; i < start+perBatch; i++ {
				l := sampleLink(fmt.Sprintf("b%06d", i), "own", uint64(i+1))
				if i%10 == 0 {
					l.Tags = "spring"
				}
				if i%100 == 0 {
					l.URL = "https://example.com/promo/" + l.Code
				}
				if err := bt.CreateLink(&l); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := s.Flush(); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkSearchLinks reads one page of 50: plain, by tag (the index:
// 50 entries read), and by substring (every link read until 50 match: 5,000
// here).
func BenchmarkSearchLinks(b *testing.B) {
	s := benchSearchStore(b)
	promo := func(l *Link) bool { return strings.Contains(strings.ToLower(l.URL), "promo") }
	for _, c := range []struct {
		name string
		q    LinkQuery
	}{
		{"plain", LinkQuery{Owner: "own", Limit: 50}},
		{"tag", LinkQuery{Owner: "own", Tag: "spring", Limit: 50}},
		{"q", LinkQuery{Owner: "own", Match: promo, Limit: 50}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				links, _, err := s.SearchLinks(c.q)
				if err != nil || len(links) != 50 {
					b.Fatalf("got %d links, %v", len(links), err)
				}
			}
		})
	}
}
