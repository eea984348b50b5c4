package harness

import (
	"context"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// comm with a space and a ')' in it; pgrp 4242, utime 1234, stime 56.
	line := "99 (we (ird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 56 0 0 20 0 3 0 12345 1000 10 18446744073709551615\n"
	st, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatalf("parseProcStat: %v", err)
	}
	if st.pgrp != 4242 || st.utime != 1234 || st.stime != 56 {
		t.Errorf("got %+v; want pgrp 4242, utime 1234, stime 56", st)
	}
	if _, err := parseProcStat([]byte("1 (x) S 1 2")); err == nil {
		t.Error("short line parsed; want an error")
	}
}

func TestGroupCPUCountsABusyChildAndItsChildren(t *testing.T) {
	// Two busy loops: the shell and a background child of it, both in the
	// child's process group.
	c, err := StartChild(ChildConfig{Name: "spin", Path: "/bin/sh", Args: []string{"-c", "(while :; do :; done) & while :; do :; done"}, StopGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := GroupCPU(c.Pid())
		if err != nil {
			t.Fatalf("GroupCPU: %v", err)
		}
		if d >= 200*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GroupCPU stayed at %v after 20 s of two busy loops", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.Stop()
	// The killed background loop may linger until init reaps it.
	for {
		if _, err := GroupCPU(c.Pid()); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("GroupCPU of a stopped group still succeeds; want an error")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWaitIdle(t *testing.T) {
	idle, err := StartChild(ChildConfig{Name: "sleep", Path: "/bin/sh", Args: []string{"-c", "sleep 60"}, StopGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Stop()
	ctx := context.Background()
	if _, ok, err := WaitIdle(ctx, IdleConfig{Groups: []int{idle.Pid()}, Sample: 200 * time.Millisecond, Timeout: 5 * time.Second}); err != nil || !ok {
		t.Errorf("WaitIdle(sleeping child) = %v, %v; want idle", ok, err)
	}
	busy, err := StartChild(ChildConfig{Name: "spin", Path: "/bin/sh", Args: []string{"-c", "while :; do :; done"}, StopGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Stop()
	// A share of 0.2 % of a CPU: a spinning loop gets far more than that on
	// a loaded machine too (the scheduler's fair share), so only a broken
	// measurement calls it idle.
	waited, ok, err := WaitIdle(ctx, IdleConfig{Groups: []int{idle.Pid(), busy.Pid()}, MaxShare: 0.002, Sample: 200 * time.Millisecond, Timeout: 600 * time.Millisecond})
	if err != nil || ok || waited < 600*time.Millisecond {
		t.Errorf("WaitIdle(busy child) = %v after %v, %v; want not idle after the timeout", ok, waited, err)
	}
}

func TestStartChildPinned(t *testing.T) {
	if _, err := TasksetPath(); err != nil {
		t.Fatal(err)
	}
	c, err := StartChild(ChildConfig{Name: "pinned", Path: "/bin/sh", Args: []string{"-c", "echo 'level=INFO msg=\"pinned listening\" addr=127.0.0.1:1'; sleep 60"}, CPUs: "0", StopGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Once the line is out, taskset has exec'd the shell in place.
	if _, err := c.WaitForAddr(ctx, "pinned listening"); err != nil {
		t.Fatal(err)
	}
	got, err := Affinity(c.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if got != "0" {
		t.Errorf("affinity of the pinned child = %q; want \"0\"", got)
	}
	if la := LoadAverage(); la == "" {
		t.Error("LoadAverage is empty")
	}
}

func TestCPUTimesSeeABusyPinnedChild(t *testing.T) {
	if _, err := TasksetPath(); err != nil {
		t.Fatal(err)
	}
	before, err := ReadCPUTimes()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := before[0]; !ok {
		t.Fatalf("no cpu0 in /proc/stat: %v", before)
	}
	c, err := StartChild(ChildConfig{Name: "spin", Path: "/bin/sh", Args: []string{"-c", "while :; do :; done"}, CPUs: "0", StopGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	// Wait until the loop has run 100 ms (on a loaded machine that takes
	// longer than 100 ms of wall time).
	var spun time.Duration
	for deadline := time.Now().Add(30 * time.Second); spun < 100*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("the pinned loop used only %v in 30 s", spun)
		}
		time.Sleep(20 * time.Millisecond)
		spun, _ = GroupCPU(c.Pid())
	}
	after, _ := ReadCPUTimes()
	spun, _ = GroupCPU(c.Pid())
	// CPU 0 was at least as busy as the loop pinned to it.
	if busy := BusyOn(before, after, "0"); busy+20*time.Millisecond < spun || spun < 100*time.Millisecond {
		t.Errorf("CPU 0 busy %v while a loop pinned to it used %v", busy, spun)
	}
	if got := parseCPUList("0-2,5"); len(got) != 4 || got[3] != 5 {
		t.Errorf("parseCPUList(0-2,5) = %v", got)
	}
}
