package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
)

func BenchmarkPermute(b *testing.B) {
	p := newPermuter(b, testKey)
	var id, sink uint64
	b.ReportAllocs()
	for b.Loop() {
		sink ^= p.Permute(id)
		id = (id + 7919) % IDSpace
	}
	_ = sink
}

func BenchmarkUnpermute(b *testing.B) {
	p := newPermuter(b, testKey)
	var v, sink uint64
	b.ReportAllocs()
	for b.Loop() {
		sink ^= p.Unpermute(v)
		v = (v + 7919) % IDSpace
	}
	_ = sink
}

func BenchmarkAppendCode(b *testing.B) {
	buf := make([]byte, 0, CodeLen)
	var id uint64
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendCode(buf[:0], id)
		id = (id + 7919) % IDSpace
	}
}

func BenchmarkAppendCodeFor(b *testing.B) {
	p := newPermuter(b, testKey)
	buf := make([]byte, 0, CodeLen)
	var id uint64
	b.ReportAllocs()
	for b.Loop() {
		buf = p.AppendCodeFor(buf[:0], id)
		id++
	}
}

func BenchmarkParseCode(b *testing.B) {
	code := []byte("aB3xY9q")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseCode(code); err != nil {
			b.Fatal(err)
		}
	}
}

// The code scheme sits on the create path and the redirect path; neither
// may allocate.
func TestCodeSchemeDoesNotAllocate(t *testing.T) {
	p := newPermuter(t, testKey)
	buf := make([]byte, 0, CodeLen)
	code := []byte("aB3xY9q")
	for name, fn := range map[string]func(){
		"AppendCode":    func() { buf = AppendCode(buf[:0], 123456789) },
		"AppendCodeFor": func() { buf = p.AppendCodeFor(buf[:0], 123456789) },
		"ParseCode":     func() { _, _ = ParseCode(code) },
		"IDOf":          func() { _, _ = p.IDOf(code) },
	} {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s allocates %.0f times per call; want 0", name, n)
		}
	}
}

func BenchmarkAppendLink(b *testing.B) {
	l := sampleLink("aB3xY9q", "own_0123456789", 123456)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendLink(buf[:0], &l)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodeLink(b *testing.B) {
	l := sampleLink("aB3xY9q", "own_0123456789", 123456)
	rec := AppendLink(nil, &l)
	var out Link
	b.ReportAllocs()
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if err := DecodeLink(rec, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// benchStore returns a store holding n generated links, flushed to sstables
// as a long-running replica's would be, and their codes. It uses the default
// 64 MiB block cache, which holds the whole set, as production would.
func benchStore(b *testing.B, n int) (*Store, [][]byte) {
	b.Helper()
	s, err := Open(b.TempDir(), Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	p := newPermuter(b, testKey)
	codes := make([][]byte, n)
	const perBatch = 10_000
	for start := 0; start < n; start += perBatch {
		batch := s.NewBatch()
		for i := start; i < min(start+perBatch, n); i++ {
			codes[i] = p.AppendCodeFor(nil, uint64(i))
			l := sampleLink(string(codes[i]), fmt.Sprintf("own_%d", i%100), uint64(i+1))
			if err := batch.CreateLink(&l); err != nil {
				b.Fatal(err)
			}
		}
		if err := batch.Commit(uint64(start + perBatch)); err != nil {
			b.Fatal(err)
		}
		batch.Close()
	}
	// Settle into one sorted level, as on a replica that has been running.
	if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false); err != nil {
		b.Fatal(err)
	}
	return s, codes
}

func BenchmarkGetLink(b *testing.B) {
	s, codes := benchStore(b, 100_000)
	var l Link
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		found, err := s.GetLink(codes[i%len(codes)], &l)
		if err != nil || !found {
			b.Fatalf("GetLink(%q) = %v, %v", codes[i%len(codes)], found, err)
		}
		i += 7919
	}
}

func BenchmarkGetLinkMiss(b *testing.B) {
	s, _ := benchStore(b, 100_000)
	p := newPermuter(b, testKey)
	missing := make([][]byte, 1024)
	for i := range missing {
		missing[i] = p.AppendCodeFor(nil, uint64(1_000_000+i))
	}
	var l Link
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if found, err := s.GetLink(missing[i%len(missing)], &l); err != nil || found {
			b.Fatalf("GetLink(missing) = %v, %v", found, err)
		}
		i++
	}
}

// BenchmarkApplyCreates commits batches of 100 creates, the shape of a busy
// Raft batch; ns/op is per batch.
func BenchmarkApplyCreates(b *testing.B) {
	s := newTestStore(b)
	p := newPermuter(b, testKey)
	var id uint64
	b.ReportAllocs()
	for b.Loop() {
		batch := s.NewBatch()
		for range 100 {
			l := sampleLink(string(p.AppendCodeFor(nil, id)), "own_1", id+1)
			if err := batch.CreateLink(&l); err != nil {
				b.Fatal(err)
			}
			id++
		}
		if err := batch.Commit(id); err != nil {
			b.Fatal(err)
		}
		batch.Close()
	}
}

func BenchmarkListLinks(b *testing.B) {
	s, _ := benchStore(b, 100_000) // 1,000 links for each of 100 owners
	b.ReportAllocs()
	for b.Loop() {
		links, _, err := s.ListLinks("own_42", "", 50)
		if err != nil || len(links) != 50 {
			b.Fatalf("ListLinks = %d links, %v", len(links), err)
		}
	}
}

func BenchmarkSnapshot(b *testing.B) {
	src, _ := benchStore(b, 100_000)
	var buf bytes.Buffer
	v := src.View()
	if _, err := v.WriteTo(&buf); err != nil {
		b.Fatal(err)
	}
	v.Release()
	snap := buf.Bytes()

	b.Run("WriteTo", func(b *testing.B) {
		b.SetBytes(int64(len(snap)))
		b.ReportAllocs()
		for b.Loop() {
			v := src.View()
			if _, err := v.WriteTo(io.Discard); err != nil {
				b.Fatal(err)
			}
			v.Release()
		}
		b.ReportMetric(float64(len(snap))/100_000, "B/link")
	})
	b.Run("Restore", func(b *testing.B) {
		dst := newTestStore(b)
		b.SetBytes(int64(len(snap)))
		b.ReportAllocs()
		for b.Loop() {
			if err := dst.Restore(bytes.NewReader(snap)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSipHash24 is one Feistel round's cost; Permute is about 10 of them
// (8 rounds times 1.25 cycle-walk passes).
func BenchmarkSipHash24(b *testing.B) {
	k0, k1 := sipKey(testKey)
	var m, sink uint64
	b.ReportAllocs()
	for b.Loop() {
		sink ^= sipHash24(k0, k1, m)
		m++
	}
	_ = sink
}
