package store

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// powerLoss returns the file system as a machine losing power now would
// leave it: exactly what was synced (pebble's crash clone with no unsynced
// data kept), and closes s on the old one, whose later syncs are moot.
func powerLoss(t *testing.T, fs *vfs.MemFS, s *Store) *vfs.MemFS {
	t.Helper()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = s.Close()
	s.db = nil
	return crashed
}

func openMem(t *testing.T, fs *vfs.MemFS) *Store {
	t.Helper()
	s, err := Open("db", Options{FS: fs, BlockCacheBytes: 8 << 20, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if s.db != nil {
			s.Close()
		}
	})
	return s
}

// An acknowledged takedown survives a power loss: the batch that changes a
// link's status is synced. Other edits stay unsynced (raft replays them
// from its fsynced log), which the second half shows is a real loss under
// this simulation, so the first half is not passing by accident.
func TestStatusChangeSurvivesPowerLoss(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := openMem(t, fs)
	l := sampleLink("take001", "own_1", 1)
	apply(t, s, 1, func(b *Batch) error { return b.CreateLink(&l) })
	if err := s.Flush(); err != nil { // as the snapshot before a log compaction does
		t.Fatal(err)
	}
	var durable bool
	apply(t, s, 2, func(b *Batch) error {
		_, err := b.UpdateLink(&LinkPatch{Code: l.Code, UpdatedAt: 2, SetStatus: true, Status: StatusBlocked}, 2)
		durable = b.Durable()
		return err
	})
	if !durable {
		t.Errorf("a batch that blocks a link is not marked durable")
	}
	fs = powerLoss(t, fs, s)

	s = openMem(t, fs)
	var got Link
	if found, err := s.GetLink([]byte(l.Code), &got); err != nil || !found {
		t.Fatalf("GetLink after power loss: found %v, err %v", found, err)
	}
	if got.Status != StatusBlocked {
		t.Fatalf("status after power loss = %v; want %v (an acknowledged takedown came back as a live link)", got.Status, StatusBlocked)
	}
	if idx, err := s.AppliedIndex(); err != nil || idx != 2 {
		t.Fatalf("AppliedIndex after power loss = %d, %v; want 2", idx, err)
	}

	// An edit that leaves the status alone is not synced, and is lost.
	apply(t, s, 3, func(b *Batch) error {
		_, err := b.UpdateLink(&LinkPatch{Code: l.Code, UpdatedAt: 3, SetClickLimit: true, ClickLimit: 10}, 3)
		durable = b.Durable()
		return err
	})
	if durable {
		t.Errorf("a click-limit edit is marked durable")
	}
	fs = powerLoss(t, fs, s)
	s = openMem(t, fs)
	if idx, err := s.AppliedIndex(); err != nil || idx != 2 {
		t.Fatalf("AppliedIndex after losing an unsynced edit = %d, %v; want 2 (the simulation does not drop unsynced writes)", idx, err)
	}
}
