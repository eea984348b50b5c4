package ingest

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"
)

// segmentWithTallies is a sealed segment of three events and two tallies.
func segmentWithTallies() []byte {
	b := appendSegmentHeader(nil, "node-a", 3, 8, time.UnixMilli(1_780_000_000_000))
	evs := threeEvents()
	b = appendRecord(b, AppendEvent(nil, &evs[0]))
	b = appendRecord(b, AppendDropTally(nil, &DropTally{Scope: ScopeLink, Name: "abc", Hour: 494_444, Count: 7}))
	b = appendRecord(b, AppendEvent(nil, &evs[1]))
	b = appendRecord(b, AppendDropTally(nil, &DropTally{Scope: ScopeUnknown, Hour: 494_444, Count: 2}))
	b = appendRecord(b, AppendEvent(nil, &evs[2]))
	return appendFooter(b, 5)
}

func TestSegmentTalliesAreReadApart(t *testing.T) {
	seg := segmentWithTallies()
	var events int
	var tallies []DropTally
	if _, err := ReadSegmentParts(seg, func(_ []byte, ev *Event) error {
		events++
		return nil
	}, func(dt *DropTally) error {
		tallies = append(tallies, *dt)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []DropTally{{Scope: ScopeLink, Name: "abc", Hour: 494_444, Count: 7}, {Scope: ScopeUnknown, Hour: 494_444, Count: 2}}
	if events != 3 || len(tallies) != 2 || tallies[0] != want[0] || tallies[1] != want[1] {
		t.Fatalf("got %d events and tallies %+v; want 3 and %+v", events, tallies, want)
	}
	// Readers that know nothing of tallies see the events alone.
	n := 0
	if _, err := ReadSegment(seg, func(ev *Event) error { n++; return nil }); err != nil || n != 3 {
		t.Fatalf("ReadSegment: %d events, %v; want 3", n, err)
	}
	if _, _, _, err := checkSegment(seg); err != nil {
		t.Fatalf("checkSegment: %v", err)
	}
}

func TestDecodeDropTallyRefuses(t *testing.T) {
	good := AppendDropTally(nil, &DropTally{Scope: ScopeSite, Name: "s1", Hour: 10, Count: 3})
	cases := map[string][]byte{
		"empty":         {},
		"event version": {eventVersion4, 1},
		"scope":         {tallyVersion, 9, 20, 3, 2, 's', '1'},
		"zero count":    {tallyVersion, byte(ScopeSite), 20, 0, 2, 's', '1'},
		"no name":       {tallyVersion, byte(ScopeSite), 20, 3, 0},
		"unknown named": {tallyVersion, byte(ScopeUnknown), 20, 3, 1, 'x'},
		"negative hour": {tallyVersion, byte(ScopeSite), 1, 3, 2, 's', '1'},
		"trailing":      append(append([]byte(nil), good...), 0),
		"truncated":     good[:len(good)-1],
		"long name":     append(binary.AppendUvarint([]byte{tallyVersion, byte(ScopeLink), 20, 3}, maxTallyName+1), make([]byte, maxTallyName+1)...),
	}
	for name, b := range cases {
		var dt DropTally
		if err := DecodeDropTally(b, &dt); !errors.Is(err, ErrCorruptEvent) {
			t.Errorf("%s: got %v; want ErrCorruptEvent", name, err)
		}
	}
	var dt DropTally
	if err := DecodeDropTally(good, &dt); err != nil || dt != (DropTally{Scope: ScopeSite, Name: "s1", Hour: 10, Count: 3}) {
		t.Fatalf("good: %+v, %v", dt, err)
	}
}

func FuzzDecodeDropTally(f *testing.F) {
	f.Add(AppendDropTally(nil, &DropTally{Scope: ScopeLink, Name: "abc", Hour: 494_444, Count: 7}))
	f.Add(AppendDropTally(nil, &DropTally{Scope: ScopeUnknown, Hour: 1, Count: 1}))
	f.Add([]byte{tallyVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		var dt, check DropTally
		err := DecodeDropTally(b, &dt)
		if vErr := decodeDropTally(b, &check, true); (err == nil) != (vErr == nil) {
			t.Fatalf("decode %v, validate %v", err, vErr)
		}
		if err != nil {
			if !errors.Is(err, ErrCorruptEvent) {
				t.Fatalf("got %v; want ErrCorruptEvent", err)
			}
			return
		}
		if again := AppendDropTally(nil, &dt); string(again) != string(b) {
			t.Fatalf("re-encoding %+v gives %x; want %x", dt, again, b)
		}
	})
}

// readTallies returns every tally in the sealed segments of dir, summed
// by scope and name, and the events beside them.
func readTallies(t *testing.T, dir string) (map[string]uint64, int) {
	t.Helper()
	sums := map[string]uint64{}
	events := 0
	for _, f := range sealedFiles(t, dir) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSegmentParts(b, func(_ []byte, _ *Event) error {
			events++
			return nil
		}, func(dt *DropTally) error {
			sums[[...]string{"unknown", "link", "site"}[dt.Scope]+":"+dt.Name] += dt.Count
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return sums, events
}

func TestQueueFullDropsAreTallied(t *testing.T) {
	clock := newFakeClock()
	p, err := newPipeline(Config{Dir: t.TempDir(), NodeID: "node-a", QueueSize: 4, Now: clock.Now, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := clickCtx("http://wm.example/a", "203.0.113.7", nil)
	// The writer is not running: the queue takes four, the rest drop.
	for range 10 {
		p.CaptureClick(ctx, []byte("a"))
	}
	for range 5 {
		p.CaptureClick(ctx, []byte("b"))
	}
	p.start()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	sums, events := readTallies(t, p.cfg.Dir)
	if events != 4 || sums["link:a"] != 6 || sums["link:b"] != 5 || len(sums) != 2 {
		t.Fatalf("got %d events and tallies %v; want 4 events, link:a 6 and link:b 5", events, sums)
	}
	if got := p.Dropped(DropQueueFull); got != 11 {
		t.Fatalf("counted %d queue_full drops; want 11", got)
	}
}

func TestDiskCapDropsAreTalliedAtClose(t *testing.T) {
	p := openTestPipeline(t, func(c *Config) {
		c.MaxPendingBytes = 2048
		c.SegmentMaxBytes = 1024
		c.QueueSize = 16
	})
	ctx := clickCtx("http://wm.example/c", "203.0.113.7", nil)
	const n = 200
	for i := range n {
		p.CaptureClick(ctx, []byte("c"))
		if i%8 == 0 {
			waitFor(t, "the queue to drain", func() bool { return p.queue.Len() == 0 })
		}
	}
	waitFor(t, "every event written or dropped", func() bool {
		return p.m.written.Get()+p.Dropped(DropDiskCap)+p.Dropped(DropQueueFull) == n
	})
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	sums, events := readTallies(t, p.cfg.Dir)
	dropped := p.Dropped(DropDiskCap) + p.Dropped(DropQueueFull)
	if dropped == 0 || sums["link:c"] != dropped || uint64(events) != p.m.written.Get() {
		t.Fatalf("tallies %v, %d events; want link:c = the %d dropped and the %d written", sums, events, dropped, p.m.written.Get())
	}
}
