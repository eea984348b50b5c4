package main

import (
	"fmt"
	"io"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

// CoreUse is where the servers' core went over the timed repetitions: a
// node's CPU over the window per request bounds what a query costs it
// (its background work, such as compactions, is in it too); ClickHouse's
// share serves its own SQL and a ClickHouse-backed node's questions
// alike; the rest of the core's busy time (anything else on the machine
// that ran there) is time a request may have waited for the core, which
// the client-side latencies include.
type CoreUse struct {
	Seconds        float64        `json:"seconds"`
	Processes      []ProcessShare `json:"processes"`
	OtherBusyShare float64        `json:"other_busy_share"` // the core's busy time used by none of them
}

// ProcessShare is one server process over the window.
type ProcessShare struct {
	Name      string  `json:"name"`
	Pid       int     `json:"pid"`
	BusyShare float64 `json:"busy_share"` // of the window
	// Nodes: CPU per request they answered (Requests of them).
	Requests        int     `json:"requests,omitempty"`
	CPUMicrosPerReq float64 `json:"cpu_us_per_request,omitempty"`
	isNode          bool
	cpu0            time.Duration
}

type coreMeter struct {
	cpus  string
	procs []ProcessShare
	t0    time.Time
	busy0 harness.CPUTimes
	fail  bool
}

// startCoreMeter reads the nodes' and ClickHouse's CPU times (ch nil: no
// ClickHouse) and the core's busy time. Without pinning (cpus "") the
// other processes' share is not kept.
func startCoreMeter(cpus string, servers []ServerInfo, ch *harness.ClickHouse) *coreMeter {
	m := &coreMeter{cpus: cpus, t0: time.Now()}
	for _, s := range servers {
		if s.Name != sqlName {
			m.procs = append(m.procs, ProcessShare{Name: s.Name, Pid: s.Pid, isNode: true})
		}
	}
	if ch != nil {
		m.procs = append(m.procs, ProcessShare{Name: "clickhouse-server", Pid: ch.Pid()})
	}
	var err error
	for i := range m.procs {
		if m.procs[i].cpu0, err = harness.GroupCPU(m.procs[i].Pid); err != nil {
			m.fail = true
		}
	}
	if m.busy0, err = harness.ReadCPUTimes(); err != nil {
		m.fail = true
	}
	return m
}

// finish ends the window; requests is how many timed requests each
// server (by name) answered in it.
func (m *coreMeter) finish(requests map[string]int) (CoreUse, error) {
	if m.fail {
		return CoreUse{}, fmt.Errorf("cannot read CPU times from /proc")
	}
	win := time.Since(m.t0)
	u := CoreUse{Seconds: win.Seconds()}
	var ours time.Duration
	for _, p := range m.procs {
		c, err := harness.GroupCPU(p.Pid)
		if err != nil {
			return CoreUse{}, err
		}
		cpu := c - p.cpu0
		ours += cpu
		p.BusyShare = cpu.Seconds() / win.Seconds()
		if n := requests[p.Name]; p.isNode && n > 0 {
			p.Requests = n
			p.CPUMicrosPerReq = harness.Micros(cpu / time.Duration(n))
		}
		u.Processes = append(u.Processes, p)
	}
	busy1, err := harness.ReadCPUTimes()
	if err != nil {
		return CoreUse{}, err
	}
	if m.cpus != "" {
		u.OtherBusyShare = max(0, (harness.BusyOn(m.busy0, busy1, m.cpus)-ours).Seconds()/win.Seconds())
	}
	return u, nil
}

func (u CoreUse) print(w io.Writer) {
	fmt.Fprintf(w, "server core over the %.0f s of timed repetitions:", u.Seconds)
	for _, p := range u.Processes {
		fmt.Fprintf(w, " %s %.1f%%", p.Name, 100*p.BusyShare)
		if p.Requests > 0 {
			fmt.Fprintf(w, " (%.0f µs of CPU per request at most: its background work is in it, %d requests)", p.CPUMicrosPerReq, p.Requests)
		}
		fmt.Fprint(w, ",")
	}
	fmt.Fprintf(w, " other processes %.1f%%\n", 100*u.OtherBusyShare)
}
