package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat. The kernel
// exports them in USER_HZ, which is 100 on every Linux architecture Go
// supports (it is not CONFIG_HZ).
const userHZ = 100

// GroupCPU returns the CPU time (utime + stime, all threads) used so far
// by every live (not zombie) process in process group pgid: a child the harness
// started and everything it forked, such as nginx's workers. The
// resolution is 10 ms; take the difference of two readings around a
// window of seconds.
func GroupCPU(pgid int) (time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("cannot list /proc: %w", err)
	}
	var ticks uint64
	found := false
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited since the listing
		}
		st, err := parseProcStat(b)
		if err != nil || st.pgrp != pgid || st.state == "Z" {
			continue // a zombie has stopped using CPU
		}
		found = true
		ticks += st.utime + st.stime
	}
	if !found {
		return 0, fmt.Errorf("cannot read CPU time: no process in group %d", pgid)
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

type procStat struct {
	state        string
	pgrp         int
	utime, stime uint64
}

// parseProcStat reads fields 5 (pgrp), 14 (utime) and 15 (stime) of a
// /proc/PID/stat line. The command name (field 2) is in parentheses and
// may itself hold spaces and parentheses, so fields are counted from the
// last ')'.
func parseProcStat(b []byte) (procStat, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return procStat{}, errors.New("no command name")
	}
	f := strings.Fields(string(b[end+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return procStat{}, errors.New("short stat line")
	}
	pgrp, err1 := strconv.Atoi(f[5-3])
	ut, err2 := strconv.ParseUint(f[14-3], 10, 64)
	stime, err3 := strconv.ParseUint(f[15-3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procStat{}, err
	}
	return procStat{state: f[0], pgrp: pgrp, utime: ut, stime: stime}, nil
}

// LoadAverage returns the 1, 5 and 15 minute load averages as the kernel
// prints them ("3.20 2.85 2.10"), or "" if they cannot be read.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// ProcessGone reports whether no process with this pid exists any more
// (a zombie still counts as existing until it is reaped).
func ProcessGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// CPUTimes is how long each CPU has been busy (not idle, not waiting for
// I/O) since boot, from /proc/stat, indexed by CPU number.
type CPUTimes map[int]time.Duration

// ReadCPUTimes reads /proc/stat.
func ReadCPUTimes() (CPUTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, fmt.Errorf("cannot read /proc/stat: %w", err)
	}
	out := CPUTimes{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(f[0][3:])
		if err != nil {
			continue
		}
		var busy uint64
		for i, v := range f[1:] {
			x, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				break
			}
			// Fields: user nice system idle iowait irq softirq steal
			// guest guest_nice; guest time is already in user.
			if i == 3 || i == 4 || i >= 8 {
				continue
			}
			busy += x
		}
		out[n] = time.Duration(busy) * time.Second / userHZ
	}
	return out, nil
}

// BusyOn returns how long the CPUs in list (taskset syntax: "0", "1,3",
// "0-1") were busy between two readings.
func BusyOn(before, after CPUTimes, list string) time.Duration {
	var sum time.Duration
	for _, cpu := range parseCPUList(list) {
		sum += after[cpu] - before[cpu]
	}
	return sum
}

func parseCPUList(list string) []int {
	var out []int
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}
