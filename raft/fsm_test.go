package raft

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	hraft "github.com/hashicorp/raft"

	"github.com/waymark/waymark/store"
)

// newTestFSM is an FSM over a fresh store, outside raft.
func newTestFSM(t testing.TB) (*fsm, *store.Store, *events) {
	t.Helper()
	st := openStore(t, filepath.Join(t.TempDir(), "store"))
	t.Cleanup(func() { st.Close() })
	ev := newEvents()
	cfg := Config{Logger: testLogger()}
	ev.hook(&cfg)
	return newFSM(st, cfg, newNodeMetrics(metrics.NewSet())), st, ev
}

// logsOf numbers commands as consecutive command entries from first.
func logsOf(first uint64, cmds ...[]byte) []*hraft.Log {
	logs := make([]*hraft.Log, len(cmds))
	for i, c := range cmds {
		logs[i] = &hraft.Log{Index: first + uint64(i), Term: 1, Type: hraft.LogCommand, Data: c}
	}
	return logs
}

func result(t testing.TB, resp any) *applyResult {
	t.Helper()
	res, ok := resp.(*applyResult)
	if !ok {
		t.Fatalf("got response %T; want *applyResult", resp)
	}
	return res
}

func appliedIndex(t testing.TB, st *store.Store) uint64 {
	t.Helper()
	idx, err := st.AppliedIndex()
	if err != nil {
		t.Fatalf("applied index: %v", err)
	}
	return idx
}

func TestFSMReplayIsIdempotent(t *testing.T) {
	f, st, ev := newTestFSM(t)
	idem := &store.IdempotencyWrite{Owner: "o1", Key: "k", Record: store.Idempotency{Status: 201, CreatedAt: 1}}
	logs := []*hraft.Log{{Index: 1, Term: 1, Type: hraft.LogConfiguration, Data: hraft.EncodeConfiguration(hraft.Configuration{})}}
	logs = append(logs, logsOf(2,
		appendSetSecret(nil, []byte("0123456789abcdef")),
		appendCreateOwner(nil, &store.Owner{ID: "o1", Name: "Ada"}, store.HashAPIKey([]byte("k1"))),
		appendCreateLink(nil, testLink("aaaaaaa"), nil),
		appendCreateLink(nil, testLink("bbbbbbb"), idem),
		appendUpdateLink(nil, &store.LinkPatch{Code: "aaaaaaa", Owner: "o1", SetStatus: true, Status: store.StatusDisabled}),
		appendCreateSite(nil, &store.Site{ID: "s1", Domain: "example.com", Owner: "o1"}),
		appendAllocBlockV1(nil, "us", 16), // version 1 claims its region
	)...)
	for i, r := range f.ApplyBatch(logs) {
		if res := result(t, r); res.Err != nil || res.Skipped {
			t.Fatalf("first apply of entry %d: got err %v skipped %v; want applied", i+1, res.Err, res.Skipped)
		}
	}
	before := dump(t, st)
	changes := ev.totalChanges()
	if got := appliedIndex(t, st); got != 8 {
		t.Fatalf("applied index: got %d; want 8", got)
	}

	// A restart replays the same entries: all must be skipped.
	for i, r := range f.ApplyBatch(logs) {
		if res := result(t, r); !res.Skipped || res.Err != nil {
			t.Errorf("replay of entry %d: got skipped %v err %v; want skipped", i+1, res.Skipped, res.Err)
		}
	}
	if after := dump(t, st); !bytes.Equal(before, after) {
		t.Errorf("store changed on replay")
	}
	if got := ev.totalChanges(); got != changes {
		t.Errorf("OnChange calls after replay: got %d; want %d", got, changes)
	}
	if len(ev.sites) != 1 {
		t.Errorf("OnSite calls: got %d; want 1", len(ev.sites))
	}

	// A batch that straddles the applied index applies only the new part.
	mixed := append(logs[6:], logsOf(9, appendCreateLink(nil, testLink("ccccccc"), nil))...)
	resps := f.ApplyBatch(mixed)
	if !result(t, resps[0]).Skipped || result(t, resps[2]).Skipped || result(t, resps[2]).Err != nil {
		t.Errorf("straddling batch: got %+v %+v; want old skipped, new applied", resps[0], resps[2])
	}
	mustGetLink(t, st, "ccccccc")
	if got := appliedIndex(t, st); got != 9 {
		t.Errorf("applied index: got %d; want 9", got)
	}
}

func TestFSMErrorDoesNotPoisonBatch(t *testing.T) {
	f, st, ev := newTestFSM(t)
	resps := f.ApplyBatch(logsOf(1,
		appendCreateLink(nil, testLink("aaaaaaa"), nil),
		appendCreateLink(nil, &store.Link{Code: "aaaaaaa", URL: "https://other", Owner: "o2", Redirect: 302}, nil),
		appendUpdateLink(nil, &store.LinkPatch{Code: "nope123", SetURL: true, URL: "x"}),
		appendCreateLink(nil, testLink("bbbbbbb"), nil),
	))
	if err := result(t, resps[1]).Err; !errors.Is(err, store.ErrCodeTaken) {
		t.Errorf("duplicate create: got %v; want ErrCodeTaken", err)
	}
	if err := result(t, resps[2]).Err; !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of missing link: got %v; want ErrNotFound", err)
	}
	if got := mustGetLink(t, st, "aaaaaaa"); got.Owner != "o1" || got.Index != 1 {
		t.Errorf("link aaaaaaa: got owner %q index %d; want o1, 1", got.Owner, got.Index)
	}
	if got := mustGetLink(t, st, "bbbbbbb"); got.Index != 4 {
		t.Errorf("link bbbbbbb: got index %d; want 4", got.Index)
	}
	if got := appliedIndex(t, st); got != 4 {
		t.Errorf("applied index: got %d; want 4", got)
	}
	if got := ev.changeCount("aaaaaaa"); got != 1 {
		t.Errorf("OnChange(aaaaaaa): got %d calls; want 1 (failed commands notify nothing)", got)
	}
	if err := f.haltErr(); err != nil {
		t.Errorf("FSM halted on refused commands: %v", err)
	}
}

func TestFSMIdempotencyWithinAndAcrossBatches(t *testing.T) {
	f, st, _ := newTestFSM(t)
	rec := store.Idempotency{RequestHash: [32]byte{7}, Status: 201, CreatedAt: 1000}
	idem := &store.IdempotencyWrite{Owner: "o1", Key: "k", Record: rec}
	resps := f.ApplyBatch(logsOf(1,
		appendCreateLink(nil, testLink("aaaaaaa"), idem),
		appendCreateLink(nil, testLink("bbbbbbb"), idem),
	))
	if res := result(t, resps[1]); res.Existing == nil || res.Existing.RequestHash != rec.RequestHash {
		t.Fatalf("second create in batch: got existing %+v; want the first record", res.Existing)
	}
	var l store.Link
	if found, _ := st.GetLink([]byte("bbbbbbb"), &l); found {
		t.Errorf("link bbbbbbb was created despite an existing idempotency record")
	}
	res := result(t, f.Apply(logsOf(3, appendCreateLink(nil, testLink("ccccccc"), idem))[0]))
	if res.Existing == nil {
		t.Errorf("create in a later batch: got no existing record; want the first")
	}
	// Past the TTL the key may be used again.
	late := *idem
	late.Record.CreatedAt = rec.CreatedAt + store.IdempotencyTTL
	res = result(t, f.Apply(logsOf(4, appendCreateLink(nil, testLink("ddddddd"), &late))[0]))
	if res.Existing != nil || res.Err != nil {
		t.Errorf("create after TTL: got existing %v err %v; want a new link", res.Existing, res.Err)
	}
	mustGetLink(t, st, "ddddddd")
}

func TestFSMUnknownCommands(t *testing.T) {
	f, st, _ := newTestFSM(t)
	resps := f.ApplyBatch(logsOf(1,
		[]byte{200, 1, flagSkippable, 1, 2, 3},
		[]byte{201, 1, 0},
		[]byte{byte(cmdCreateLink), 1, 0, 0xff},
		appendCreateLink(nil, testLink("aaaaaaa"), nil),
	))
	if res := result(t, resps[0]); !res.Skipped || res.Err != nil {
		t.Errorf("skippable unknown: got skipped %v err %v; want skipped", res.Skipped, res.Err)
	}
	if err := result(t, resps[1]).Err; !errors.Is(err, errUnknownCommand) {
		t.Errorf("unknown non-skippable: got %v; want errUnknownCommand", err)
	}
	if err := result(t, resps[2]).Err; !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("corrupt: got %v; want ErrCorrupt", err)
	}
	if err := result(t, resps[3]).Err; err != nil {
		t.Errorf("good command after bad ones: got %v; want nil", err)
	}
	if got := appliedIndex(t, st); got != 4 {
		t.Errorf("applied index: got %d; want 4", got)
	}
}

func TestFSMSnapshotRestore(t *testing.T) {
	f, _, _ := newTestFSM(t)
	var cmds [][]byte
	cmds = append(cmds, appendSetSecret(nil, []byte("0123456789abcdef")), appendAllocBlock(nil, "eu", 100))
	for _, c := range []string{"aaaaaaa", "bbbbbbb", "ccccccc"} {
		cmds = append(cmds, appendCreateLink(nil, testLink(c), nil))
	}
	f.ApplyBatch(logsOf(1, cmds...))
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	// Writes after the snapshot must not leak into it.
	f.Apply(logsOf(6, appendCreateLink(nil, testLink("ddddddd"), nil))[0])
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatalf("persist: %v", err)
	}
	snap.Release()
	if !sink.closed || sink.cancelled {
		t.Errorf("sink: got closed %v cancelled %v; want closed", sink.closed, sink.cancelled)
	}

	g, st2, ev := newTestFSM(t)
	g.Apply(logsOf(1, appendCreateLink(nil, testLink("zzzzzzz"), nil))[0]) // replaced by the restore
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got, want := dump(t, st2), sink.Bytes(); !bytes.Equal(got, want) {
		t.Errorf("restored store differs from the snapshot")
	}
	if got := appliedIndex(t, st2); got != 5 {
		t.Errorf("restored applied index: got %d; want 5", got)
	}
	if ev.restoreCount() != 1 {
		t.Errorf("OnRestore calls: got %d; want 1", ev.restoreCount())
	}
	var l store.Link
	if found, _ := st2.GetLink([]byte("ddddddd"), &l); found {
		t.Errorf("write after the snapshot leaked into it")
	}
	if found, _ := st2.GetLink([]byte("zzzzzzz"), &l); found {
		t.Errorf("restore kept state from before it")
	}
}

func TestFSMRestoreRejectsGarbage(t *testing.T) {
	f, _, _ := newTestFSM(t)
	err := f.Restore(io.NopCloser(bytes.NewReader([]byte("not a snapshot"))))
	if !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("got %v; want ErrCorrupt", err)
	}
}

// appendAllocBlockV1 is an alloc entry as version 1 wrote it: same
// payload, and the region is claimed on first use.
func appendAllocBlockV1(dst []byte, region string, size uint64) []byte {
	b := appendAllocBlock(dst, region, size)
	b[len(dst)+1] = 1
	return b
}
