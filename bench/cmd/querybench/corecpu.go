package main

import (
	"fmt"
	"io"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// CoreUse is where the servers' core went over the timed repetitions: the
// node's CPU over the window per request bounds what a query costs it
// (its background work, such as compactions, is in it too); the rest of the
// core's busy time (ClickHouse, and anything else on the machine that ran
// there) is time a node request may have waited for the core, which the
// client-side latencies include.
type CoreUse struct {
	Seconds             float64 `json:"seconds"`
	NodeRequests        int     `json:"node_requests"`
	NodeCPUMicrosPerReq float64 `json:"node_cpu_us_per_request"`
	NodeBusyShare       float64 `json:"node_busy_share"`       // of the window
	ClickHouseBusyShare float64 `json:"clickhouse_busy_share"` // of the window
	OtherBusyShare      float64 `json:"other_busy_share"`      // the core's busy time used by neither server
}

type coreMeter struct {
	cpus       string
	node, ch   int
	t0         time.Time
	node0, ch0 time.Duration
	busy0      harness.CPUTimes
	fail       bool
}

// startCoreMeter reads the servers' CPU times and the core's busy time;
// ch is 0 when ClickHouse is not running. Without pinning (cpus "") only
// the node's CPU is kept.
func startCoreMeter(cpus string, node, ch int) *coreMeter {
	m := &coreMeter{cpus: cpus, node: node, ch: ch, t0: time.Now()}
	var err error
	if m.node0, err = harness.GroupCPU(node); err != nil {
		m.fail = true
	}
	if ch != 0 {
		if m.ch0, err = harness.GroupCPU(ch); err != nil {
			m.fail = true
		}
	}
	if m.busy0, err = harness.ReadCPUTimes(); err != nil {
		m.fail = true
	}
	return m
}

func (m *coreMeter) finish(requests int) (CoreUse, error) {
	if m.fail {
		return CoreUse{}, fmt.Errorf("cannot read CPU times from /proc")
	}
	win := time.Since(m.t0)
	node1, err := harness.GroupCPU(m.node)
	if err != nil {
		return CoreUse{}, err
	}
	var ch1 time.Duration
	if m.ch != 0 {
		if ch1, err = harness.GroupCPU(m.ch); err != nil {
			return CoreUse{}, err
		}
	}
	busy1, err := harness.ReadCPUTimes()
	if err != nil {
		return CoreUse{}, err
	}
	u := CoreUse{Seconds: win.Seconds(), NodeRequests: requests}
	nodeCPU, chCPU := node1-m.node0, ch1-m.ch0
	if requests > 0 {
		u.NodeCPUMicrosPerReq = harness.Micros(nodeCPU / time.Duration(requests))
	}
	u.NodeBusyShare = nodeCPU.Seconds() / win.Seconds()
	u.ClickHouseBusyShare = chCPU.Seconds() / win.Seconds()
	if m.cpus != "" {
		u.OtherBusyShare = max(0, (harness.BusyOn(m.busy0, busy1, m.cpus)-nodeCPU-chCPU).Seconds()/win.Seconds())
	}
	return u, nil
}

func (u CoreUse) print(w io.Writer) {
	fmt.Fprintf(w, "server core over the %.0f s of timed repetitions: node %.1f%% (%.0f µs of CPU per request at most: its background work is in it, %d requests), ClickHouse %.1f%%, other processes %.1f%%\n",
		u.Seconds, 100*u.NodeBusyShare, u.NodeCPUMicrosPerReq, u.NodeRequests, 100*u.ClickHouseBusyShare, 100*u.OtherBusyShare)
}
