package raft

import (
	"testing"

	hraft "github.com/hashicorp/raft"
)

func TestStoreBehindSnapshot(t *testing.T) {
	logs := hraft.NewInmemStore()
	err := logs.StoreLogs([]*hraft.Log{
		{Index: 2, Term: 1, Type: hraft.LogCommand},
		{Index: 3, Term: 2, Type: hraft.LogNoop},
		{Index: 4, Term: 2, Type: hraft.LogBarrier},
	}) // index 1 is compacted away
	if err != nil {
		t.Fatal(err)
	}
	snaps := hraft.NewInmemSnapshotStore()
	if behind, _, err := storeBehindSnapshot(0, snaps, logs); err != nil || behind {
		t.Errorf("no snapshot: got behind %v err %v; want false", behind, err)
	}
	sink, err := snaps.Create(hraft.SnapshotVersionMax, 4, 2, hraft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		applied uint64
		want    bool
	}{
		{0, true},  // entry 1 is gone from the log
		{1, true},  // a command lies between the store and the snapshot
		{2, false}, // only a no-op and a barrier lie between
		{4, false},
		{9, false},
	} {
		behind, snapIndex, err := storeBehindSnapshot(tc.applied, snaps, logs)
		if err != nil || behind != tc.want || snapIndex != 4 {
			t.Errorf("applied %d: got behind %v index %d err %v; want %v, 4", tc.applied, behind, snapIndex, err, tc.want)
		}
	}
}
