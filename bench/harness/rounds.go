package harness

import (
	"fmt"
	"time"
)

// RunPair measures two targets once each in round r (counting from 0):
// measure(0) then measure(1), swapped in odd rounds so drift in the
// machine's load over time falls on both sides equally.
func RunPair(r int, measure func(side int) error) error {
	order := [2]int{0, 1}
	if r%2 == 1 {
		order = [2]int{1, 0}
	}
	for _, side := range order {
		if err := measure(side); err != nil {
			return err
		}
	}
	return nil
}

// IsClosed reports whether ch is closed, without blocking; a nil channel
// (a server the harness did not start) is never closed.
func IsClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ExitNote says why a child died: its exit status and its last output.
func (c *Child) ExitNote() string {
	return fmt.Sprintf("%v; last output: %q", c.ExitErr(), c.Tail())
}

// CPUTime is the user and system time the process used over its whole
// life, once it has exited and been reaped (Exited is closed); before
// that it is 0. Unlike GroupCPU it does not need the process to exist.
func (c *Child) CPUTime() time.Duration {
	if !IsClosed(c.exited) || c.cmd.ProcessState == nil {
		return 0
	}
	return c.cmd.ProcessState.UserTime() + c.cmd.ProcessState.SystemTime()
}
