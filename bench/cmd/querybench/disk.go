package main

import (
	"fmt"
	"slices"
	"syscall"
)

// Bytes of disk a loaded event takes at most, by what holds it: about
// twice what this machine's 30M run measured after its load (the
// embedded node's folder 2.8 GiB, about 100 bytes an event with raw
// events, rollups and sketches; ClickHouse's 4.3 GiB for both its copies,
// about 75 bytes an event), for the parts not merged yet while it loads.
const (
	diskPerEventPebble     = 200
	diskPerEventClickHouse = 150 // a --analytics-store clickhouse node's events
	diskPerEventRawTable   = 150 // the raw table of ClickHouse's own SQL
)

// DiskCheck is the free space where the run keeps its data, against what
// it will need.
type DiskCheck struct {
	Dir       string `json:"dir"`
	FreeBytes uint64 `json:"free_bytes"`
	NeedBytes uint64 `json:"need_bytes"` // an upper estimate
}

func (d DiskCheck) String() string {
	return fmt.Sprintf("disk: %.1f GiB free in %s; this run needs about %.1f GiB", gib(d.FreeBytes), d.Dir, gib(d.NeedBytes))
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }

// checkDisk fails the run before it starts when the folder's file system
// has less room than the load will take.
func checkDisk(dir string, cfg config, events int) (DiskCheck, error) {
	var per uint64
	if slices.Contains(cfg.Backends, backendPebble) {
		per += diskPerEventPebble
	}
	if slices.Contains(cfg.Backends, backendClickHouse) {
		per += diskPerEventClickHouse
	}
	if cfg.WithClickHouse {
		per += diskPerEventRawTable
	}
	d := DiskCheck{Dir: dir, NeedBytes: per * uint64(events)}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return d, fmt.Errorf("cannot read the free space of %s: %w", dir, err)
	}
	d.FreeBytes = st.Bavail * uint64(st.Bsize)
	if d.FreeBytes < d.NeedBytes {
		return d, fmt.Errorf("not enough disk: %s", d)
	}
	return d, nil
}
