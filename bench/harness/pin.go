package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// pinnedEnv marks a harness that PinSelf has already re-executed under
// taskset; its value is the CPU list.
const pinnedEnv = "WAYMARK_BENCH_PINNED"

// TasksetPath finds taskset(1), which pins a process to CPUs.
func TasksetPath() (string, error) {
	p, err := exec.LookPath("taskset")
	if err != nil {
		return "", errors.New("taskset not found: install the util-linux package")
	}
	return p, nil
}

// PinSelf makes the running benchmark run on cpus only (taskset's list
// syntax). The first call re-executes the binary under `taskset -c cpus`
// with the same arguments and environment plus a marker, and so never
// returns unless that fails; in the re-executed process it checks that
// the affinity took and returns nil. Pinning by re-execution, rather than
// sched_setaffinity, covers every thread the Go runtime has started or
// will start, and the runtime then sizes GOMAXPROCS to the CPUs it has.
func PinSelf(cpus string) error {
	if os.Getenv(pinnedEnv) == cpus {
		got, err := Affinity(0)
		if err != nil {
			return err
		}
		if got != cpus {
			return fmt.Errorf("cannot pin the benchmark to CPU %s: it runs on %s", cpus, got)
		}
		return nil
	}
	taskset, err := TasksetPath()
	if err != nil {
		return fmt.Errorf("cannot pin the benchmark to CPU %s: %w", cpus, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot pin the benchmark: cannot find own executable: %w", err)
	}
	argv := append([]string{"taskset", "-c", cpus, exe}, os.Args[1:]...)
	env := append(os.Environ(), pinnedEnv+"="+cpus)
	if err := syscall.Exec(taskset, argv, env); err != nil {
		return fmt.Errorf("cannot re-execute under taskset -c %s: %w", cpus, err)
	}
	panic("BUG: syscall.Exec returned without an error")
}

// Affinity returns the CPUs process pid may run on, as the kernel lists
// them (Cpus_allowed_list, e.g. "0" or "0-1"); pid 0 is the caller.
func Affinity(pid int) (string, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read the CPU affinity of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("cannot read the CPU affinity of %d: no Cpus_allowed_list in %s", pid, path)
}

// PinSelfOrExit pins the running benchmark to cpus when pin is set (see
// PinSelf), and ends the process with cmd's error when it cannot.
func PinSelfOrExit(cmd string, pin bool, cpus string) {
	if !pin {
		return
	}
	if err := PinSelf(cpus); err != nil {
		fmt.Fprintln(os.Stderr, cmd+":", err)
		os.Exit(1)
	}
}
