package main

import (
	"io"
	"testing"
	"time"

	"github.com/waymark/waymark/bench/harness"
)

func TestAccount(t *testing.T) {
	before := snapshot{Written: 100, Dropped: map[string]float64{"queue_full": 5}}
	after := snapshot{Written: 1100, Dropped: map[string]float64{"queue_full": 7, "disk_cap": 0, "io_error": 1}}
	var r Report
	r.account(before, after, 1002)
	// By hand: written 1000, dropped 2 + 1 = 3, taken 1003, 3/1003.
	if r.Written != 1000 || r.Dropped != 3 || r.Offered != 1003 || r.Answered != 1002 {
		t.Errorf("got written %d, dropped %d, offered %d, answered %d; want 1000, 3, 1003, 1002", r.Written, r.Dropped, r.Offered, r.Answered)
	}
	if want := 3.0 / 1003; r.DropShare != want {
		t.Errorf("drop share %v; want %v", r.DropShare, want)
	}
	if len(r.DroppedByReason) != 2 || r.DroppedByReason["queue_full"] != 2 || r.DroppedByReason["io_error"] != 1 {
		t.Errorf("by reason %v; want queue_full 2, io_error 1", r.DroppedByReason)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-links", "0"}, {"-visitors", "0"}, {"-visitors", "200000"}, {"-loadgen", "x"},
		{"-server-cpu", "0", "-load-cpu", "0"}, {"-max-drop", "-1"}, {"stray"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded; want an error", args)
		}
	}
}

// TestRunAgainstRealNode runs the whole check, shortened, against the
// real binary with wrk, and checks the accounting closes.
func TestRunAgainstRealNode(t *testing.T) {
	bin := harness.BuildWaymark(t)
	if _, err := harness.FindWrk(""); err != nil {
		t.Fatal(err)
	}
	args := []string{"-waymark", bin, "-links", "10", "-visitors", "200", "-conns", "4", "-duration", "1s", "-settle-timeout", "60s"}
	var rep Report
	harness.RunCommand(t, args, 2*time.Minute, parseFlags, run, &rep)
	if rep.Written == 0 || rep.Offered != rep.Written+rep.Dropped {
		t.Errorf("written %d, dropped %d, offered %d; want clicks written and offered = written + dropped", rep.Written, rep.Dropped, rep.Offered)
	}
	if rep.Stored != rep.Written || rep.StatsClicks != rep.Written || rep.SettleTimedOut {
		t.Errorf("stored %d, in stats %d, written %d (timed out %v); want every written click stored and in the stats", rep.Stored, rep.StatsClicks, rep.Written, rep.SettleTimedOut)
	}
	if rep.StatsDropped != rep.tallied() {
		t.Errorf("the stats say %d clicks were dropped; the node tallied %d", rep.StatsDropped, rep.tallied())
	}
	if d := int64(rep.Offered) - int64(rep.Answered); d < 0 || d > int64(rep.Conns) {
		t.Errorf("node took %d clicks, wrk counted %d; want them apart by at most the %d in flight", rep.Offered, rep.Answered, rep.Conns)
	}
	if rep.Errors != 0 || rep.RPS <= 0 {
		t.Errorf("%d errors at %.0f req/s; want none", rep.Errors, rep.RPS)
	}
	if !harness.ProcessGone(rep.NodePid) {
		t.Errorf("node %d still exists after the run", rep.NodePid)
	}
}
