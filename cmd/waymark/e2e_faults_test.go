package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// devNode starts a --dev node (every role, shipping to itself) with a
// fixed name, and returns it with its API key.
func devNode(t *testing.T, dir string, extra ...string) (*proc, string) {
	t.Helper()
	args := append([]string{"--dev", "--name", "edge-1", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
		"--ingest-ip-rate", "100000"}, extra...)
	p := startNode(t, dir, args...)
	base := "http://" + p.http
	waitFor(t, "ready", 30*time.Second, func() bool { return do(t, "GET", base+"/readyz", "", "").status == 200 })
	var key string
	waitFor(t, "dev key", 30*time.Second, func() bool { key = readKeyMaybe(filepath.Join(dir, "dev-api-key")); return key != "" })
	return p, key
}

func clickN(t *testing.T, base, code string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if r := do(t, "GET", base+"/"+code, "", "", "User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"); r.status != 302 {
			t.Fatalf("redirect %d: got %d; want 302", i, r.status)
		}
	}
}

// TestE2EWipedSegmentFolder: a node whose segment folder is wiped starts
// its sequence numbers again at 1 under the same name. Those are new
// segments (a new incarnation), so every click is stored, none taken for
// a duplicate of a segment the aggregator saw before the wipe.
func TestE2EWipedSegmentFolder(t *testing.T) {
	dir := t.TempDir()
	p, key := devNode(t, dir)
	base := "http://" + p.http
	code := do(t, "POST", base+"/v1/links", key, `{"url":"https://dest.example/"}`).json(t)["code"].(string)
	const N, M = 23, 17
	clickN(t, base, code, N)
	waitFor(t, "first clicks stored", 30*time.Second, func() bool { return eventsCount(t, p, "--link", code) == N })
	waitFor(t, "everything shipped", 30*time.Second, func() bool { return shippedAll(t, base) })
	p.stop(t)

	if err := os.RemoveAll(filepath.Join(dir, "segments")); err != nil {
		t.Fatal(err)
	}
	p, _ = devNode(t, dir)
	base = "http://" + p.http
	clickN(t, base, code, M)
	waitFor(t, "restarted node shipped everything", 30*time.Second, func() bool {
		return metric(t, base, "waymark_ingest_shipped_events_total") == M
	})
	if got := eventsCount(t, p, "--link", code); got != N+M {
		t.Fatalf("after wiping the segment folder: %d clicks stored; want %d", got, N+M)
	}
}
