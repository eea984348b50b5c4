//go:build unix && !linux

package harness

import "syscall"

// childSysProcAttr puts the child in its own process group, so Stop can
// signal everything it spawned. Without Pdeathsig, a harness killed with
// SIGKILL may leave children behind; the baseline still exits when its stdin
// closes.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
