package raft

import (
	"context"
	"testing"

	hraft "github.com/hashicorp/raft"

	"github.com/waymark/waymark/store"
)

// BenchmarkCreateLink measures acknowledged creates (NewCode + CreateLink)
// from parallel callers against one single-voter node over real TCP raft,
// bolt fsync included. 16 callers per CPU stand in for concurrent HTTP
// requests; raft batches their entries into shared disk writes.
func BenchmarkCreateLink(b *testing.B) {
	tn := newTestNode(b, nil)
	n, ctx := tn.n, context.Background()
	benchCreates(ctx, b, n)
}

// BenchmarkFSMApplyBatch measures the FSM alone: one op is a raft batch of
// 64 CreateLink entries applied through one Pebble batch.
func BenchmarkFSMApplyBatch(b *testing.B) {
	const batch = 64
	f, _, _ := newTestFSM(b)
	var perm [store.CodeLen]byte
	logs := make([]*hraft.Log, batch)
	for i := range logs {
		logs[i] = &hraft.Log{Term: 1, Type: hraft.LogCommand}
	}
	l := store.Link{URL: "https://example.com/landing", Owner: "o1", CreatedAt: 1700000000000, Redirect: 302}
	var index uint64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for _, lg := range logs {
			index++
			l.Code = string(store.AppendCode(perm[:0], index))
			lg.Index = index
			lg.Data = appendCreateLink(lg.Data[:0], &l, nil)
		}
		for _, r := range f.ApplyBatch(logs) {
			if res := r.(*applyResult); res.Err != nil {
				b.Fatal(res.Err)
			}
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkForwardedCreate measures acknowledged creates (NewCode +
// CreateLink) made through a non-voter edge: each create is encoded on the
// edge, handed to the leader's ApplyForwarded (in-process here; the node
// adds an HTTP hop), committed, and answered back. Block refills are
// forwarded too.
func BenchmarkForwardedCreate(b *testing.B) {
	c := newCluster(b, nil)
	v1 := c.add("v1", "us")
	c.bootstrap(v1)
	e1 := c.add("e1", "eu")
	c.onLeader("add e1", func(n *Node) error { return n.AddNonvoter("e1", e1.node().Addr()) })
	c.leader()
	n, ctx := e1.node(), context.Background()
	benchCreates(ctx, b, n)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

// benchCreates runs parallel NewCode + CreateLink calls through n.
func benchCreates(ctx context.Context, b *testing.B, n *Node) {
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		l := store.Link{URL: "https://example.com/landing?utm_source=bench", Owner: "o1", CreatedAt: 1700000000000}
		for pb.Next() {
			code, err := n.NewCode(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			l.Code = code
			if _, _, err := n.CreateLink(ctx, &l, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
