package harness

import (
	"context"
	"time"
)

// IdleConfig says when a set of servers counts as idle: together they
// used less than MaxShare of one CPU over one Sample.
type IdleConfig struct {
	Groups   []int         // process groups (children's pids)
	MaxShare float64       // e.g. 0.05: 5 % of one CPU; zero means 0.05
	Sample   time.Duration // zero means 1 s
	Timeout  time.Duration // zero means 3 min
}

// WaitIdle waits until the groups are idle, so a measurement does not
// carry work left over from the one before (a node still aggregating the
// clicks of its last round, an edge still shipping). It returns how long
// it waited and whether they became idle before the timeout; a group
// that is gone counts as idle. Only ctx ending is an error.
func WaitIdle(ctx context.Context, cfg IdleConfig) (time.Duration, bool, error) {
	if cfg.MaxShare <= 0 {
		cfg.MaxShare = 0.05
	}
	if cfg.Sample <= 0 {
		cfg.Sample = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 3 * time.Minute
	}
	start := time.Now()
	for {
		before := groupsCPU(cfg.Groups)
		t0 := time.Now()
		select {
		case <-ctx.Done():
			return time.Since(start), false, context.Cause(ctx)
		case <-time.After(cfg.Sample):
		}
		after := groupsCPU(cfg.Groups)
		var used time.Duration
		for i := range after {
			if after[i] >= 0 && before[i] >= 0 {
				used += after[i] - before[i]
			}
		}
		if share := used.Seconds() / time.Since(t0).Seconds(); share < cfg.MaxShare {
			return time.Since(start), true, nil
		}
		if time.Since(start) >= cfg.Timeout {
			return time.Since(start), false, nil
		}
	}
}

// groupsCPU reads each group's CPU time; -1 marks a group that is gone.
func groupsCPU(groups []int) []time.Duration {
	out := make([]time.Duration, len(groups))
	for i, g := range groups {
		d, err := GroupCPU(g)
		if err != nil {
			d = -1
		}
		out[i] = d
	}
	return out
}
