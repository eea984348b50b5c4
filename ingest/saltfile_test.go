package ingest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func openSaltFile(t *testing.T, path string, clock *fakeClock) *LocalSalts {
	t.Helper()
	s, err := OpenLocalSalts(SaltOptions{Path: path, Now: clock.Now, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// saltFileDays returns the days in the salt file, checking its mode and
// that no temporary copy is left next to it.
func saltFileDays(t *testing.T, path string) map[int64]DaySalt {
	t.Helper()
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp")); len(left) != 0 {
		t.Fatalf("temporary salt files left: %v", left)
	}
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[int64]DaySalt{}
	}
	if err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("salt file mode %v; want 0600", info.Mode().Perm())
	}
	salts, err := parseSaltFile(b)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]DaySalt{}
	for _, ds := range salts {
		out[ds.Day] = ds
	}
	return out
}

// A restart on the same day keeps the salt, so the same visitor hashes
// the same.
func TestSaltFileKeepsSaltAcrossRestart(t *testing.T) {
	clock := newFakeClock()
	path := filepath.Join(t.TempDir(), "visitor-salts")
	first := openSaltFile(t, path, clock).Salt(clock.Now())
	clock.Advance(3 * time.Hour)
	if again := openSaltFile(t, path, clock).Salt(clock.Now()); again != first {
		t.Fatal("salt changed across a restart on the same day")
	}
	if days := saltFileDays(t, path); len(days) != 1 || days[dayNumber(clock.Now())].Salt != first {
		t.Fatalf("salt file holds %v; want only today's", days)
	}
}

// No day older than yesterday survives anywhere: not in memory, not in the
// file, not in a temporary copy, whether the node is busy or idle.
func TestSaltFileForgetsAfterTwoDays(t *testing.T) {
	clock := newFakeClock()
	dir := t.TempDir()
	path := filepath.Join(dir, "visitor-salts")
	s := openSaltFile(t, path, clock)
	d0 := dayNumber(clock.Now())
	s.Salt(clock.Now())
	clock.Advance(24 * time.Hour)
	s.Salt(clock.Now())
	if days := saltFileDays(t, path); len(days) != 2 {
		t.Fatalf("day 1: file holds %d days; want today and yesterday", len(days))
	}
	clock.Advance(24 * time.Hour) // idle: nothing asks for a salt
	s.Prune()
	days := saltFileDays(t, path)
	if _, ok := days[d0]; ok || len(days) != 1 {
		t.Fatalf("day 2: file holds days %v; want only yesterday (%d), not %d", keys(days), d0+1, d0)
	}
	for _, ds := range s.Known() {
		if ds.Day < dayNumber(clock.Now())-1 {
			t.Fatalf("memory holds day %d, older than yesterday", ds.Day)
		}
	}
	// Down for three days: a restart finds nothing to keep and removes
	// the file.
	clock.Advance(72 * time.Hour)
	openSaltFile(t, path, clock)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("salt file after three idle days: %v; want it removed", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("left in the folder: %v", entries)
	}
}

func keys(m map[int64]DaySalt) []int64 {
	var out []int64
	for d := range m {
		out = append(out, d)
	}
	return out
}

func TestSaltFileDamagedIsRemoved(t *testing.T) {
	clock := newFakeClock()
	path := filepath.Join(t.TempDir(), "visitor-salts")
	before := openSaltFile(t, path, clock).Salt(clock.Now())
	b, _ := os.ReadFile(path)
	b[len(b)-1] ^= 1
	writeFile(t, path, b)
	writeFile(t, path+".tmp", b) // a crash mid-write left this
	s := openSaltFile(t, path, clock)
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("leftover temporary salt file kept: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("damaged salt file kept: %v", err)
	}
	if s.Salt(clock.Now()) == before {
		t.Fatal("a damaged file's salt was used")
	}
}

// The vote: the salt made first wins, ties by value; a fresh salt never
// replaces an older one.
func TestSaltMergeOldestWins(t *testing.T) {
	clock := newFakeClock()
	s := NewLocalSalts(clock.Now)
	today := dayNumber(clock.Now())
	mine := s.Salt(clock.Now()) // made now
	fresh := DaySalt{Day: today, Created: clock.Now().Add(time.Minute).UnixMilli(), Salt: [16]byte{}}
	if s.Merge(fresh) || s.Salt(clock.Now()) != mine {
		t.Fatal("a salt made later (even with the lowest value) replaced the one in use")
	}
	old := DaySalt{Day: today, Created: clock.Now().Add(-time.Hour).UnixMilli(), Salt: [16]byte{0xff}}
	if !s.Merge(old) || s.Salt(clock.Now()) != old.Salt {
		t.Fatal("a salt made earlier did not win")
	}
	tie := old
	tie.Salt[0] = 0x01
	if !s.Merge(tie) || s.Salt(clock.Now()) != tie.Salt {
		t.Fatal("same creation time: the lower value did not win")
	}
	if s.Merge(DaySalt{Day: today - 2, Created: 1, Salt: [16]byte{1}}) {
		t.Fatal("merged a salt of a day older than yesterday")
	}
}

// While holding, Salt waits for the cluster's salt instead of making one,
// and Ensure makes none; the hold ends when today's salt arrives, or when
// it runs out.
func TestSaltHoldForPeers(t *testing.T) {
	clock := newFakeClock()
	s := NewLocalSalts(clock.Now)
	if !s.HoldForPeers(10 * time.Second) {
		t.Fatal("no salt for today, but HoldForPeers did not hold")
	}
	s.Ensure(clock.Now())
	if len(s.Known()) != 0 {
		t.Fatal("Ensure made a salt while holding")
	}
	got := make(chan [16]byte, 1)
	go func() { got <- s.Salt(clock.Now()) }()
	select {
	case <-got:
		t.Fatal("Salt returned while holding, before the cluster's salt came")
	case <-time.After(50 * time.Millisecond):
	}
	cluster := DaySalt{Day: dayNumber(clock.Now()), Created: clock.Now().Add(-5 * time.Hour).UnixMilli(), Salt: [16]byte{42}}
	s.Merge(cluster)
	select {
	case salt := <-got:
		if salt != cluster.Salt {
			t.Fatal("Salt after the hold did not return the cluster's salt")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Salt still waiting after the cluster's salt arrived")
	}
	if s.Holding() {
		t.Fatal("still holding after today's salt arrived")
	}

	// The wait runs out: a fresh salt.
	s2 := NewLocalSalts(clock.Now)
	s2.HoldForPeers(30 * time.Millisecond)
	start := time.Now()
	if salt := s2.Salt(clock.Now()); salt == ([16]byte{}) || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("after the wait ran out: salt %x after %v; want a fresh salt after 30ms", salt, time.Since(start))
	}
	// A node with today's salt does not hold.
	if s2.HoldForPeers(time.Second) {
		t.Fatal("held although today's salt is known")
	}
}

// The pipeline's visitor hash of the same (IP, user agent) is the same
// after a restart that reopens the salt file.
func TestVisitorHashSurvivesRestart(t *testing.T) {
	clock := newFakeClock()
	dir := t.TempDir()
	path := filepath.Join(t.TempDir(), "visitor-salts")
	hashOnce := func() uint64 {
		salts := openSaltFile(t, path, clock)
		p := openTestPipeline(t, func(c *Config) { c.Dir, c.Salts, c.Now = dir, salts, clock.Now })
		before := len(readSealed(t, dir))
		captureN(p, 1)
		waitFor(t, "event written", func() bool { return p.m.written.Get() == 1 })
		if err := p.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		evs := readSealed(t, dir)
		if len(evs) != before+1 {
			t.Fatalf("got %d events; want %d", len(evs), before+1)
		}
		return evs[len(evs)-1].VisitorHash
	}
	a := hashOnce()
	clock.Advance(time.Hour)
	if b := hashOnce(); b != a {
		t.Fatalf("visitor hash after a restart: %x; want %x", b, a)
	}
}
