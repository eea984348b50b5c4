package harness

import "syscall"

// childSysProcAttr puts the child in its own process group, so Stop can
// signal everything it spawned and a terminal's Ctrl-C reaches only the
// harness (which then stops its children in order). Pdeathsig kills the
// child if the harness itself is killed without a chance to clean up.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
