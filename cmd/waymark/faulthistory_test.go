package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The fault tier's history: every client operation with its invocation
// and response time, checked by porcupine against a model of one link
// (the link table is a map of independent links, so the history is
// partitioned by alias and each link is checked on its own).

// Operation kinds.
const (
	opCreate   = "create"   // POST /v1/links with an alias
	opEdit     = "edit"     // PATCH /v1/links/{alias} {"url": ...}
	opTakedown = "takedown" // DELETE /v1/links/{alias} (status disabled)
	opRead     = "read"     // GET /v1/links/{alias} on the leader
	opRedirect = "redirect" // GET /{alias} on any node
)

// Outcomes.
const (
	outOK      = "ok"      // acknowledged (2xx)
	outUnknown = "unknown" // timeout or 5xx: may or may not have been applied
	outAbsent  = "absent"  // read: 404
	outPresent = "present" // read: 200
)

type ftInput struct {
	Kind    string `json:"kind"`
	Alias   string `json:"alias"`
	URL     string `json:"url,omitempty"`     // create, edit: the destination written
	Node    string `json:"node"`              // the node the request went to
	Applied uint64 `json:"applied,omitempty"` // redirect: the node's store applied index just before the request
}

type ftOutput struct {
	Outcome  string `json:"outcome"`
	URL      string `json:"url,omitempty"`      // read: the destination shown
	Status   string `json:"status,omitempty"`   // read, edit: the status shown
	Index    uint64 `json:"index,omitempty"`    // writes: Waymark-Index of the answer
	HTTP     int    `json:"http,omitempty"`     // the answer's status code
	Location string `json:"location,omitempty"` // redirect: Location
}

// linkState is the model: one link as the leader path must show it.
type linkState struct {
	exists   bool
	url      string
	disabled bool
}

// linkModel is porcupine's model of one link. Unknown-outcome writes carry
// an infinite return time, so porcupine may place them anywhere after
// their invocation, including after every later operation (not applied).
var linkModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			a := op.Input.(ftInput).Alias
			if _, ok := by[a]; !ok {
				keys = append(keys, a)
			}
			by[a] = append(by[a], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() interface{} { return linkState{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s, in, out := state.(linkState), input.(ftInput), output.(ftOutput)
		switch in.Kind {
		case opCreate:
			if s.exists {
				// Each alias is created once: an acknowledged second create
				// would be a lost alias check; an unknown one had no effect.
				return out.Outcome == outUnknown, s
			}
			return true, linkState{exists: true, url: in.URL}
		case opEdit:
			if !s.exists {
				return out.Outcome == outUnknown, s
			}
			if out.Outcome == outOK && out.Status != statusName(s.disabled) {
				return false, s
			}
			s.url = in.URL
			return true, s
		case opTakedown:
			if !s.exists {
				return out.Outcome == outUnknown, s
			}
			s.disabled = true
			return true, s
		case opRead:
			if out.Outcome == outAbsent {
				return !s.exists, s
			}
			return s.exists && out.URL == s.url && out.Status == statusName(s.disabled), s
		case opRedirect:
			// A node's own replica may lag, so a redirect is only checked
			// against what it has applied (checkReplicas); here it
			// must not show a link that never existed.
			if out.HTTP == 302 {
				return s.exists, s
			}
			return true, s
		}
		panic("BUG: unknown operation kind " + in.Kind)
	},
	Equal: func(a, b interface{}) bool { return a.(linkState) == b.(linkState) },
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(ftInput), output.(ftOutput)
		desc := fmt.Sprintf("%s %s@%s", in.Kind, in.Alias, in.Node)
		if in.URL != "" {
			desc += " " + in.URL
		}
		if in.Kind == opRedirect {
			desc += fmt.Sprintf(" (applied %d)", in.Applied)
		}
		desc += fmt.Sprintf(" -> %s %d", out.Outcome, out.HTTP)
		for _, v := range []string{out.Status, out.URL, out.Location} {
			if v != "" {
				desc += " " + v
			}
		}
		if out.Index != 0 {
			desc += fmt.Sprintf(" index %d", out.Index)
		}
		return desc
	},
	DescribeState: func(state interface{}) string {
		s := state.(linkState)
		if !s.exists {
			return "absent"
		}
		return statusName(s.disabled) + " " + s.url
	},
}

func statusName(disabled bool) string {
	if disabled {
		return "disabled"
	}
	return "active"
}

// history records operations from many client goroutines.
type history struct {
	start   time.Time
	mu      sync.Mutex
	ops     []porcupine.Operation
	applied []appliedSample
}

// appliedSample is one reading of a node's store applied index, true at
// some moment in [Call, Return]. Gen counts the node's restarts.
type appliedSample struct {
	Node   string `json:"node"`
	Gen    int    `json:"gen"`
	Call   int64  `json:"call_ns"`
	Return int64  `json:"return_ns"`
	Value  uint64 `json:"applied"`
}

func (h *history) addSample(s appliedSample) {
	h.mu.Lock()
	h.applied = append(h.applied, s)
	h.mu.Unlock()
}

// checkApplied: a running node's store applied index never goes back. A
// reading that starts after another one ended must not be lower (a store
// emptied while it installs a snapshot reads as 0). A restart may go back
// to what was last flushed: raft applies the rest again, so each process
// is checked on its own.
func checkApplied(samples []appliedSample) []string {
	type key struct {
		node string
		gen  int
	}
	by := map[key][]appliedSample{}
	for _, s := range samples {
		by[key{s.Node, s.Gen}] = append(by[key{s.Node, s.Gen}], s)
	}
	var bad []string
	for k, ss := range by {
		byRet := append([]appliedSample(nil), ss...)
		sort.Slice(byRet, func(i, j int) bool { return byRet[i].Return < byRet[j].Return })
		sort.Slice(ss, func(i, j int) bool { return ss[i].Call < ss[j].Call })
		var best appliedSample // the highest reading that ended before ss[i] began
		j := 0
		for _, s := range ss {
			for ; j < len(byRet) && byRet[j].Return < s.Call; j++ {
				if byRet[j].Value > best.Value {
					best = byRet[j]
				}
			}
			if s.Value < best.Value {
				bad = append(bad, fmt.Sprintf("applied index: %s (process %d) read %d at t=%v after reading %d at t=%v", k.node, k.gen, s.Value, time.Duration(s.Call), best.Value, time.Duration(best.Return)))
				if len(bad) > 50 {
					return bad
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

func newHistory() *history { return &history{start: time.Now()} }

func (h *history) now() int64 { return int64(time.Since(h.start)) }

// add records one finished operation; an unknown outcome gets an infinite
// return time, as porcupine expects for an operation that may take effect
// at any later moment.
func (h *history) add(client int, in ftInput, call int64, out ftOutput) {
	ret := h.now()
	if out.Outcome == outUnknown {
		ret = math.MaxInt64
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

// addAt records an operation whose response time was taken by the caller.
func (h *history) addAt(client int, in ftInput, call int64, out ftOutput, ret int64) {
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

func (h *history) snapshot() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// checkReplicas holds every node to what its store has applied, read
// just before each redirect: once an acknowledged takedown's index is
// applied there, the node must never redirect the link again; once an
// acknowledged create's index is, it must never answer 404 for it (a
// known code lost, as an emptied store would lose it).
//
// Findings are split by whether the redirect was invoked after the write
// was acknowledged; both fail. The early ones once showed that the FSM
// evicted the redirect cache only after a synced commit returned, while
// Pebble had already published the batch (fixed: raft.Config.OnChanging
// fences the codes off in the cache before the commit).
// replicaFindings are checkReplicas' findings by kind; *Early ones were
// invoked before the write's acknowledgement.
type replicaFindings struct {
	takedownAfter, takedownEarly, lostAfter, lostEarly []string
}

func (f replicaFindings) count() int {
	return len(f.takedownAfter) + len(f.takedownEarly) + len(f.lostAfter) + len(f.lostEarly)
}

func checkReplicas(ops []porcupine.Operation) (f replicaFindings) {
	takedowns, creates := map[string][]porcupine.Operation{}, map[string][]porcupine.Operation{}
	for _, op := range ops {
		in, out := op.Input.(ftInput), op.Output.(ftOutput)
		if out.Outcome != outOK || out.Index == 0 {
			continue
		}
		switch in.Kind {
		case opTakedown:
			takedowns[in.Alias] = append(takedowns[in.Alias], op)
		case opCreate:
			creates[in.Alias] = append(creates[in.Alias], op)
		}
	}
	// judge files one finding against the acknowledged write w that the
	// node had applied; a finding after any such write's answer is bad.
	judge := func(op porcupine.Operation, writes []porcupine.Operation, what string, after, early *[]string) {
		in, out := op.Input.(ftInput), op.Output.(ftOutput)
		var first *porcupine.Operation
		acked := false
		for i := range writes {
			w := &writes[i]
			if w.Output.(ftOutput).Index > in.Applied {
				continue
			}
			if first == nil || w.Output.(ftOutput).Index < first.Output.(ftOutput).Index {
				first = w
			}
			acked = acked || w.Return < op.Call
		}
		if first == nil {
			return
		}
		wi := first.Input.(ftInput)
		msg := fmt.Sprintf("%s %s on %s at t=%v (answer %d %s) with its store applied index %d past the %s at index %d (through %s, answered at t=%v)",
			what, in.Alias, in.Node, time.Duration(op.Call), out.HTTP, out.Location, in.Applied, wi.Kind, first.Output.(ftOutput).Index, wi.Node, time.Duration(first.Return))
		if acked {
			*after = append(*after, msg)
		} else {
			*early = append(*early, msg+"; before the acknowledgement")
		}
	}
	for _, op := range ops {
		in, out := op.Input.(ftInput), op.Output.(ftOutput)
		if in.Kind != opRedirect {
			continue
		}
		switch out.HTTP {
		case 302:
			judge(op, takedowns[in.Alias], "takedown: redirect of", &f.takedownAfter, &f.takedownEarly)
		case 404:
			judge(op, creates[in.Alias], "lost code: 404 for", &f.lostAfter, &f.lostEarly)
		}
	}
	return f
}

// verify runs both checks and, on a violation, keeps the history (JSON)
// and porcupine's visualisation in a folder that outlives the test.
func (h *history) verify(t *testing.T, scenario string, seed int64, logs map[string]string) {
	t.Helper()
	ops := h.snapshot()
	counts := map[string]int{}
	for _, op := range ops {
		counts[op.Input.(ftInput).Kind+"/"+op.Output.(ftOutput).Outcome]++
	}
	t.Logf("%s: %d operations: %v", scenario, len(ops), counts)
	if counts[opCreate+"/"+outOK] == 0 || counts[opRead+"/"+outPresent] == 0 || counts[opRedirect+"/"+outOK] == 0 {
		t.Fatalf("%s: the history has no acknowledged create, leader read or redirect; the check would prove nothing: %v", scenario, counts)
	}
	res, info := porcupine.CheckOperationsVerbose(linkModel, ops, 60*time.Second)
	h.mu.Lock()
	samples := append([]appliedSample(nil), h.applied...)
	h.mu.Unlock()
	f := checkReplicas(ops)
	regress := checkApplied(samples)

	// keep writes the evidence once, for whichever check fails first.
	var dir string
	keep := func() string {
		if dir != "" {
			return dir
		}
		d, err := os.MkdirTemp("", "waymark-fault-"+scenario+"-")
		if err != nil {
			return "(not kept: " + err.Error() + ")"
		}
		dir = d
		b, _ := json.MarshalIndent(jsonHistory(ops), "", " ")
		os.WriteFile(filepath.Join(dir, "history.json"), b, 0o644)
		if res == porcupine.Illegal {
			porcupine.VisualizePath(linkModel, info, filepath.Join(dir, "linearizability.html"))
		}
		b, _ = json.Marshal(samples)
		os.WriteFile(filepath.Join(dir, "applied.json"), b, 0o644)
		for name, l := range logs {
			os.WriteFile(filepath.Join(dir, name+".log"), []byte(l), 0o644)
		}
		os.WriteFile(filepath.Join(dir, "start.txt"), []byte(h.start.UTC().Format(time.RFC3339Nano)+"\n"), 0o644)
		return dir
	}
	header := func() string {
		return fmt.Sprintf("%s (seed %d, replay with WAYMARK_FAULT_SEED=%d): history kept in %s\n", scenario, seed, seed, keep())
	}

	t.Run("leader path linearizable", func(t *testing.T) {
		switch res {
		case porcupine.Ok:
			return
		case porcupine.Unknown:
			t.Error(header() + "porcupine: the check timed out")
			return
		}
		var msg strings.Builder
		msg.WriteString(header() + "porcupine: the leader path is not linearizable for these links:\n")
		parts := illegalParts(ops)
		for i, part := range parts {
			if i == 5 {
				fmt.Fprintf(&msg, "  ... and %d more links (all in history.json)\n", len(parts)-i)
				break
			}
			msg.WriteString(part)
		}
		t.Error(msg.String())
	})
	t.Run("no known code lost on a node", func(t *testing.T) {
		bad := append(append(f.lostAfter, f.lostEarly...), regress...)
		if len(bad) > 0 {
			t.Error(header() + listFindings(bad))
		}
	})
	t.Run("no redirect past an applied takedown", func(t *testing.T) {
		if bad := append(f.takedownAfter, f.takedownEarly...); len(bad) > 0 {
			t.Error(header() + listFindings(bad))
		}
	})
}

func listFindings(bad []string) string {
	var msg strings.Builder
	for i, b := range bad {
		if i == 20 {
			fmt.Fprintf(&msg, "... and %d more (all in history.json)\n", len(bad)-i)
			break
		}
		msg.WriteString(b + "\n")
	}
	return msg.String()
}

// illegalParts re-checks each link alone and lists the operations of the
// ones that fail, in invocation order.
func illegalParts(ops []porcupine.Operation) []string {
	var out []string
	for _, part := range linkModel.Partition(ops) {
		if porcupine.CheckOperationsTimeout(linkModel, part, 10*time.Second) != porcupine.Illegal {
			continue
		}
		sort.Slice(part, func(i, j int) bool { return part[i].Call < part[j].Call })
		var b strings.Builder
		fmt.Fprintf(&b, "  link %s:\n", part[0].Input.(ftInput).Alias)
		for _, op := range part {
			ret := "never"
			if op.Return != math.MaxInt64 {
				ret = time.Duration(op.Return).String()
			}
			fmt.Fprintf(&b, "    [%v .. %s] client %d: %s\n", time.Duration(op.Call), ret, op.ClientId, linkModel.DescribeOperation(op.Input, op.Output))
		}
		out = append(out, b.String())
	}
	return out
}

type jsonOp struct {
	Client int      `json:"client"`
	Call   int64    `json:"call_ns"`
	Return int64    `json:"return_ns"` // math.MaxInt64: unknown outcome
	Input  ftInput  `json:"input"`
	Output ftOutput `json:"output"`
}

func jsonHistory(ops []porcupine.Operation) []jsonOp {
	out := make([]jsonOp, len(ops))
	for i, op := range ops {
		out[i] = jsonOp{Client: op.ClientId, Call: op.Call, Return: op.Return, Input: op.Input.(ftInput), Output: op.Output.(ftOutput)}
	}
	return out
}
