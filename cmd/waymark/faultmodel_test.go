package main

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
)

// The checker must reject the histories the fault tier exists to catch,
// worked out by hand, and accept the ones an unknown outcome allows.
func TestFaultModelVerdicts(t *testing.T) {
	op := func(kind, url string, call, ret int64, out ftOutput) porcupine.Operation {
		return porcupine.Operation{Input: ftInput{Kind: kind, Alias: "a", URL: url}, Call: call, Output: out, Return: ret}
	}
	never := int64(math.MaxInt64)
	ok := ftOutput{Outcome: outOK}
	unknown := ftOutput{Outcome: outUnknown}
	absent := ftOutput{Outcome: outAbsent}
	present := func(url, status string) ftOutput { return ftOutput{Outcome: outPresent, URL: url, Status: status} }
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"acknowledged create then absent", []porcupine.Operation{op(opCreate, "u0", 0, 1, ok), op(opRead, "", 2, 3, absent)}, porcupine.Illegal},
		{"create overlapping an absent read", []porcupine.Operation{op(opCreate, "u0", 0, 5, ok), op(opRead, "", 2, 3, absent)}, porcupine.Ok},
		{"unknown create, absent then present", []porcupine.Operation{op(opCreate, "u0", 0, never, unknown), op(opRead, "", 2, 3, absent), op(opRead, "", 4, 5, present("u0", "active"))}, porcupine.Ok},
		{"unknown create, present then absent", []porcupine.Operation{op(opCreate, "u0", 0, never, unknown), op(opRead, "", 2, 3, present("u0", "active")), op(opRead, "", 4, 5, absent)}, porcupine.Illegal},
		{"acknowledged edit then the old url", []porcupine.Operation{op(opCreate, "u0", 0, 1, ok), op(opEdit, "u1", 2, 3, ftOutput{Outcome: outOK, Status: "active"}), op(opRead, "", 4, 5, present("u0", "active"))}, porcupine.Illegal},
		{"acknowledged takedown then active", []porcupine.Operation{op(opCreate, "u0", 0, 1, ok), op(opTakedown, "", 2, 3, ok), op(opRead, "", 4, 5, present("u0", "active"))}, porcupine.Illegal},
		{"unknown takedown, disabled then active", []porcupine.Operation{op(opCreate, "u0", 0, 1, ok), op(opTakedown, "", 2, never, unknown), op(opRead, "", 4, 5, present("u0", "disabled")), op(opRead, "", 6, 7, present("u0", "active"))}, porcupine.Illegal},
		{"redirect of a link never created", []porcupine.Operation{op(opRedirect, "", 0, 1, ftOutput{Outcome: outOK, HTTP: 302})}, porcupine.Illegal},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperationsTimeout(linkModel, c.ops, 0); got != c.want {
			t.Errorf("%s: porcupine says %q; want %q", c.name, got, c.want)
		}
	}

	redirect := func(applied uint64, status int) porcupine.Operation {
		return porcupine.Operation{Input: ftInput{Kind: opRedirect, Alias: "a", Node: "e1", Applied: applied}, Call: 10, Return: 11, Output: ftOutput{Outcome: outOK, HTTP: status}}
	}
	takedown := porcupine.Operation{Input: ftInput{Kind: opTakedown, Alias: "a"}, Call: 2, Return: 3, Output: ftOutput{Outcome: outOK, Index: 40}}
	if f := checkReplicas([]porcupine.Operation{takedown, redirect(40, 302)}); len(f.takedownAfter) != 1 {
		t.Errorf("a redirect on a node that applied the takedown's index, after its answer: %d findings; want 1", len(f.takedownAfter))
	}
	if f := checkReplicas([]porcupine.Operation{takedown, redirect(39, 302), redirect(41, 410)}); f.count() != 0 {
		t.Errorf("a redirect before the takedown's index and a 410 after it: findings %+v; want none", f)
	}
	slow := takedown
	slow.Return = 20 // answered after the redirect below (Call 10)
	if f := checkReplicas([]porcupine.Operation{slow, redirect(40, 302)}); len(f.takedownAfter) != 0 || len(f.takedownEarly) != 1 {
		t.Errorf("a redirect after the node applied the takedown, before its answer: %d after, %d early; want 0 and 1", len(f.takedownAfter), len(f.takedownEarly))
	}
	create := porcupine.Operation{Input: ftInput{Kind: opCreate, Alias: "a", URL: "u0"}, Call: 0, Return: 1, Output: ftOutput{Outcome: outOK, Index: 30}}
	if f := checkReplicas([]porcupine.Operation{create, redirect(30, 404)}); len(f.lostAfter) != 1 {
		t.Errorf("a 404 on a node that applied the create's index: %d findings; want 1", len(f.lostAfter))
	}
	if f := checkReplicas([]porcupine.Operation{create, redirect(29, 404), redirect(31, 302)}); f.count() != 0 {
		t.Errorf("a 404 before the create's index and a redirect after it: findings %+v; want none", f)
	}
	samples := []appliedSample{
		{Node: "e1", Call: 0, Return: 1, Value: 50},
		{Node: "e1", Call: 2, Return: 3, Value: 0},          // emptied: goes back
		{Node: "e1", Call: 0, Return: 5, Value: 40},         // overlaps the first: may be older
		{Node: "e1", Gen: 1, Call: 6, Return: 7, Value: 45}, // a restart may go back
	}
	if bad := checkApplied(samples); len(bad) != 1 {
		t.Errorf("applied index readings 50, then 0, an overlapping 40 and 45 after a restart: findings %v; want exactly the 0", bad)
	}
}
