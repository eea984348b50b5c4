package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// wrkScript drives wrk from a file of requests built before the run (one
// line per request: path, and optionally User-Agent and X-Forwarded-For,
// tab-separated), cycled in order from a random start, so a request costs
// wrk a table lookup, not a string build. It prints wrkReadyLine when the
// thread is about to connect (the harness then reads the server's CPU
// time) and the result as one JSON line at the end.
const wrkScript = `-- written by the Waymark benchmark harness
local reqs, n, i = {}, 0, 0
init = function(args)
  local host = args[2] or ""
  for line in io.lines(args[1]) do
    local path, ua, xff = line:match("^([^\t]*)\t?([^\t]*)\t?([^\t]*)$")
    local headers = {}
    if host ~= "" then headers["Host"] = host end
    if ua ~= "" then headers["User-Agent"] = ua end
    if xff ~= "" then headers["X-Forwarded-For"] = xff end
    n = n + 1
    reqs[n] = wrk.format("GET", path, headers)
  end
  i = math.random(n) - 1
  io.write("` + wrkReadyLine + `\n")
  io.flush()
end
request = function()
  i = i % n + 1
  return reqs[i]
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('` + wrkResultPrefix + `{"requests":%d,"duration_us":%d,"status_errors":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
  io.flush()
end
`

const (
	wrkReadyLine    = "waymark-wrk-ready"
	wrkResultPrefix = "waymark-wrk-result "
)

// FindWrk returns the wrk binary, or an error that says which package to
// install.
func FindWrk(binary string) (string, error) {
	if binary == "" {
		binary = "wrk"
	}
	p, err := exec.LookPath(binary)
	if err != nil {
		return "", fmt.Errorf("cannot find %s: install the wrk package (Debian)", binary)
	}
	return p, nil
}

// WrkRequests writes the request file wrk cycles through: count requests,
// each a path and (when visitors are given) a visitor, both picked at
// random from seed.
func WrkRequests(path string, paths [][]byte, visitors []Visitor, count int, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cannot write wrk requests: %w", err)
	}
	w := bufio.NewWriter(f)
	rng := rand.New(rand.NewPCG(seed, 0x77726b))
	for range count {
		w.Write(paths[rng.IntN(len(paths))])
		if len(visitors) > 0 {
			v := &visitors[rng.IntN(len(visitors))]
			w.WriteByte('\t')
			w.Write(v.UserAgent)
			w.WriteByte('\t')
			w.Write(v.ForwardedFor)
		}
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("cannot write wrk requests: %w", err)
	}
	return f.Close()
}

// WrkConfig describes one wrk run against one server.
type WrkConfig struct {
	Binary   string // empty means wrk on PATH
	Dir      string // for the script; the requests file is RequestsFile
	Addr     string // host:port, loopback only
	Requests string // a file written by WrkRequests
	Host     string // the Host header of every request; empty: the address
	Conns    int
	Duration time.Duration
	Timeout  time.Duration // per request; zero means 5 s
	CPUs     string        // taskset CPU list for wrk, or empty
	Echo     io.Writer
	// AtStart is called when wrk has read its requests and is about to
	// connect, AtEnd when it has printed its result: the edges of its
	// measured window, as near as the harness can see them.
	AtStart, AtEnd func()
}

// WrkResult is what wrk measured. wrk counts an answer with a status of
// 400 or more as a status error; any other answer (302 included) as fine.
type WrkResult struct {
	Requests      uint64  `json:"requests"` // answers, status errors included
	DurationMicro uint64  `json:"duration_us"`
	StatusErrors  uint64  `json:"status_errors"`
	ConnectErrors uint64  `json:"connect_errors"`
	ReadErrors    uint64  `json:"read_errors"`
	WriteErrors   uint64  `json:"write_errors"`
	Timeouts      uint64  `json:"timeouts"`
	P50Micros     float64 `json:"p50_us"`
	P99Micros     float64 `json:"p99_us"`
	MaxMicros     float64 `json:"max_us"`
	// CPU is wrk's own CPU time between its ready line and its result
	// (read by the harness, not by wrk).
	CPU time.Duration `json:"-"`
}

// Elapsed is wrk's measured window.
func (r *WrkResult) Elapsed() time.Duration { return time.Duration(r.DurationMicro) * time.Microsecond }

// OK is the answers below status 400.
func (r *WrkResult) OK() uint64 { return r.Requests - r.StatusErrors }

// Errors is every failed request: bad statuses and socket errors.
func (r *WrkResult) Errors() uint64 {
	return r.StatusErrors + r.ConnectErrors + r.ReadErrors + r.WriteErrors + r.Timeouts
}

// RPS is OK answers per second of wrk's window.
func (r *WrkResult) RPS() float64 {
	if r.DurationMicro == 0 {
		return 0
	}
	return float64(r.OK()) / r.Elapsed().Seconds()
}

// Figures converts the result to the reports' shared figures.
func (r *WrkResult) Figures() RunFigures {
	f := RunFigures{
		P50Micros: r.P50Micros, P99Micros: r.P99Micros, MaxMicros: r.MaxMicros,
		OK: r.OK(), Errors: r.Errors(), Statuses: map[string]uint64{},
	}
	if r.StatusErrors > 0 {
		f.Statuses["4xx/5xx"] = r.StatusErrors
		f.FirstError = fmt.Sprintf("%d answers with status >= 400", r.StatusErrors)
	}
	if n := r.Errors() - r.StatusErrors; n > 0 {
		f.Statuses["transport"] = n
		if f.FirstError == "" {
			f.FirstError = fmt.Sprintf("%d connect/read/write errors or timeouts", n)
		}
	}
	return f
}

// wrkSeconds rounds d up to whole seconds, the only unit wrk takes.
func wrkSeconds(d time.Duration) string {
	return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10) + "s"
}

// RunWrk runs `wrk -t1 -cConns -dDuration --timeout T -s SCRIPT
// http://Addr -- REQUESTS` (under taskset when CPUs is set) and returns its
// result. One thread: the load generator gets one core, as the server
// does. wrk takes whole seconds only: Duration and Timeout are rounded
// up. Ending ctx stops wrk and returns an error.
func RunWrk(ctx context.Context, cfg WrkConfig) (*WrkResult, error) {
	bin, err := FindWrk(cfg.Binary)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Conns <= 0 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("cannot run wrk: conns %d and duration %v must be positive", cfg.Conns, cfg.Duration)
	}
	script := filepath.Join(cfg.Dir, "waymark-requests.lua")
	if err := os.WriteFile(script, []byte(wrkScript), 0o644); err != nil {
		return nil, fmt.Errorf("cannot write the wrk script: %w", err)
	}
	child, err := StartChild(ChildConfig{
		Name: "wrk", Path: bin, CPUs: cfg.CPUs, Echo: cfg.Echo, StopGrace: time.Second,
		Args: []string{"-t1", "-c" + strconv.Itoa(cfg.Conns),
			"-d" + wrkSeconds(cfg.Duration), "--timeout", wrkSeconds(cfg.Timeout),
			"-s", script, "http://" + cfg.Addr, "--", cfg.Requests, cfg.Host},
	})
	if err != nil {
		return nil, err
	}
	defer child.Stop()
	// Requests files of a few MB load in well under a minute.
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := child.WaitForLine(startCtx, "wrk's ready line", func(l string) (string, bool) { return "", l == wrkReadyLine }); err != nil {
		return nil, err
	}
	cpu0, _ := GroupCPU(child.Pid())
	if cfg.AtStart != nil {
		cfg.AtStart()
	}
	endCtx, cancel2 := context.WithTimeout(ctx, cfg.Duration+cfg.Timeout+time.Minute)
	defer cancel2()
	line, err := child.WaitForLine(endCtx, "wrk's result", func(l string) (string, bool) {
		v, ok := strings.CutPrefix(l, wrkResultPrefix)
		return v, ok
	})
	if err != nil {
		return nil, err
	}
	if cfg.AtEnd != nil {
		cfg.AtEnd()
	}
	var res WrkResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return nil, fmt.Errorf("cannot read wrk's result %q: %w", line, err)
	}
	// wrk exits right after its result; its whole-life CPU time, less
	// what it had used when it got ready, is its load's cost.
	select {
	case <-child.Exited():
		res.CPU = child.CPUTime() - cpu0
	case <-time.After(5 * time.Second):
		return nil, fmt.Errorf("wrk did not exit after printing its result%s", child.tailNote())
	}
	return &res, nil
}
