package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh folder, unmounted at
// the end of the test (after the processes started later are stopped).
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small-disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+fmtInt(size)); err != nil {
		t.Skipf("cannot mount a %d-byte tmpfs (needs root; CI runs as root): %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("cannot unmount %s: %v", dir, err)
		}
	})
	return dir
}

func fmtInt(n int64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// fill writes a ballast file in dir until at most leave bytes are free
// (leave 0: until the file system refuses).
func fill(t *testing.T, path string, leave int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 256<<10)
	for {
		free := freeBytes(t, filepath.Dir(path))
		if free <= leave {
			return
		}
		n := int64(len(chunk))
		if leave > 0 && free-leave < n {
			n = free - leave
		}
		if _, err := f.Write(chunk[:n]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// TestE2EDiskFull runs a voter on a 64 MiB tmpfs and fills the disk under
// it. Below --min-free-disk the node refuses writes with a 503
// storage-full problem and fails readiness, but keeps redirecting; with
// the disk filled to the last byte it stays up; once space is freed it
// takes writes again by itself. Every acknowledged create survives it all,
// and a SIGKILL and restart afterwards.
func TestE2EDiskFull(t *testing.T) {
	disk := mountTmpfs(t, 64<<20)
	dataDir := filepath.Join(disk, "data")
	out, _, code := runCLI(t, nil, "keygen")
	if code != 0 {
		t.Fatal("keygen failed")
	}
	keyFile := filepath.Join(t.TempDir(), "cluster-key")
	if err := os.WriteFile(keyFile, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	const minFree = 16 << 20
	args := []string{"--name", "v1", "--region", "us", "--role", "voter", "--bootstrap-expect", "1", "--cluster-key-file", keyFile,
		"--min-free-disk", fmtInt(minFree), "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}
	p := startNode(t, dataDir, args...)
	waitFor(t, "ready", 60*time.Second, func() bool { return ready(t, p) })
	env := []string{"WAYMARK_ADMIN_ADDR=" + p.admin, "WAYMARK_TOKEN=" + readKey(t, filepath.Join(dataDir, "operator-token"))}
	key, _, code := runCLI(t, env, "owners", "create", "alice")
	key = strings.TrimSpace(key)
	if code != 0 {
		t.Fatalf("owners create: exit %d", code)
	}
	base := "http://" + p.http
	acked := map[string]string{}
	create := func(dest string) response {
		r := do(t, "POST", base+"/v1/links", key, `{"url":"`+dest+`"}`)
		if r.status == 201 {
			acked[r.json(t)["code"].(string)] = dest
		}
		return r
	}
	for i := 0; i < 20; i++ {
		if r := create("https://dest.example/before/" + fmtInt(int64(i))); r.status != 201 {
			t.Fatalf("create %d: got %d %s", i, r.status, r.body)
		}
	}
	allResolve := func(p *proc) bool {
		for c, dest := range acked {
			if !resolves(t, p, c, dest) {
				return false
			}
		}
		return true
	}

	// Below the reserve: writes refused, not ready, redirects served.
	ballast := filepath.Join(disk, "ballast")
	fill(t, ballast, minFree/2)
	waitFor(t, "storage-full mode", 10*time.Second, func() bool { return !ready(t, p) })
	r := create("https://dest.example/refused")
	pr := expectProblem(t, "create on a full disk", r.status, r.header.Get("Content-Type"), r.body, 503, "storage-full", "Storage full")
	if r.header.Get("Retry-After") == "" || pr.Instance != "/v1/links" {
		t.Errorf("storage-full problem: Retry-After %q, instance %q", r.header.Get("Retry-After"), pr.Instance)
	}
	if _, errOut, code := runCLI(t, env, "owners", "create", "bob"); code == 0 || !strings.Contains(errOut, "storage full") {
		t.Errorf("owners create on a full disk: exit %d %q; want a storage-full error", code, errOut)
	}
	rd := do(t, "GET", base+"/readyz", "", "")
	if rd.status != 503 || !strings.Contains(string(rd.body), "disk") {
		t.Errorf("/readyz on a full disk: got %d %q; want 503 naming the disk", rd.status, rd.body)
	}
	if !allResolve(p) {
		t.Fatal("acknowledged links stopped redirecting on a full disk")
	}

	// To the last byte: still up, still redirecting (clicks are dropped
	// and counted, never a crash).
	fill(t, ballast, 0)
	for i := 0; i < 3; i++ {
		if !allResolve(p) {
			t.Fatal("acknowledged links stopped redirecting on a disk with no byte free")
		}
	}
	select {
	case <-p.done:
		t.Fatalf("node exited on a full disk:\n%s", p.logs())
	default:
	}

	// Space back: writes again, without an operator.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ready again after space is freed", 15*time.Second, func() bool { return ready(t, p) })
	for i := 0; i < 5; i++ {
		if r := create("https://dest.example/after/" + fmtInt(int64(i))); r.status != 201 {
			t.Fatalf("create after recovery %d: got %d %s", i, r.status, r.body)
		}
	}
	if !allResolve(p) {
		t.Fatal("acknowledged links missing after recovery")
	}

	// Nothing acknowledged is lost across a crash either.
	httpAddr, admin, raftAddr, gossip := p.http, p.admin, p.raft, p.gossip
	p.kill()
	for i := range args {
		switch args[i] {
		case "--http-addr":
			args[i+1] = httpAddr
		case "--admin-addr":
			args[i+1] = admin
		case "--raft-addr":
			args[i+1] = raftAddr
		case "--gossip-addr":
			args[i+1] = gossip
		}
	}
	p = startNode(t, dataDir, args...)
	waitFor(t, "ready after restart", 60*time.Second, func() bool { return ready(t, p) })
	if !allResolve(p) {
		t.Fatalf("acknowledged links missing after a restart (%d acknowledged)", len(acked))
	}
	t.Logf("%d acknowledged links survived the full disk and a restart", len(acked))
	p.stop(t)
}
