package node

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/raft"
	"github.com/waymark/waymark/store"
)

// backupRestoreTimeout bounds raft's part of a restore (copying the
// payload into its snapshot store and the FSM restore).
const backupRestoreTimeout = 10 * time.Minute

// snapshotSave is GET /v1/snapshot: the whole store as a backup file.
// Errors after the first byte can only cut the stream short; the CLI's
// check of size and checksum then refuses the file.
func (a *adminServer) snapshotSave(w http.ResponseWriter, r *http.Request) {
	b, err := a.n.raft.OpenBackup()
	if err != nil {
		writeProblem(w, r, problem.Internal, err.Error())
		return
	}
	defer b.Release()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Waymark-Index", fmt.Sprint(b.AppliedIndex))
	bw, err := newBackupWriter(w, backupHeader{Version: backupVersion, Index: b.AppliedIndex, Created: time.Now()})
	if err != nil {
		a.n.log.Warn("snapshot save aborted", "err", err)
		return
	}
	n, err := b.WriteTo(bw)
	if err == nil {
		err = bw.Close()
	}
	if err != nil {
		a.n.log.Warn("snapshot save aborted", "bytes", n, "err", err)
		panic(http.ErrAbortHandler) // cut the chunked stream: no trailer, no valid file
	}
	a.n.log.Info("snapshot saved", "bytes", n, "applied_index", b.AppliedIndex)
}

// RestoreResult is the answer of PUT /v1/snapshot.
type RestoreResult struct {
	Bytes       int64     `json:"bytes"`
	SourceIndex uint64    `json:"source_index"`
	Created     time.Time `json:"created"`
	Took        string    `json:"took"`
}

// snapshotRestore is PUT /v1/snapshot: replace the cluster's whole state
// with a backup file, on the leader. The upload is spooled and checked
// whole (header, size, checksum), then restored into a scratch store to
// prove the store can read it, and only then handed to raft: a bad file
// answers 400 and changes nothing.
func (a *adminServer) snapshotRestore(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if !a.n.raft.IsLeader() {
		writeProblem(w, r, problem.NotLeader, fmt.Sprintf("restore on the leader (%q); this node is not it", a.n.raft.Stats().LeaderID))
		return
	}
	tmpDir, err := os.MkdirTemp(a.n.cfg.DataDir, "snapshot-restore-")
	if err != nil {
		writeProblem(w, r, problem.Internal, "cannot create a scratch folder: "+err.Error())
		return
	}
	defer os.RemoveAll(tmpDir)
	f, err := os.Create(filepath.Join(tmpDir, "upload"))
	if err != nil {
		writeProblem(w, r, problem.Internal, "cannot spool the upload: "+err.Error())
		return
	}
	defer f.Close()
	total, err := io.Copy(f, r.Body)
	if err != nil {
		writeProblem(w, r, problem.InvalidRequest, "cannot read the upload: "+err.Error())
		return
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		writeProblem(w, r, problem.Internal, err.Error())
		return
	}
	h, off, size, err := checkBackup(f, total)
	if err != nil {
		writeProblem(w, r, problem.BadSnapshot, err.Error())
		return
	}
	if err := checkPayload(io.NewSectionReader(f, off, size), filepath.Join(tmpDir, "check"), a.n.log); err != nil {
		writeProblem(w, r, problem.BadSnapshot, err.Error())
		return
	}
	err = a.n.raft.RestoreBackup(io.NewSectionReader(f, off, size), size, h.Index, backupRestoreTimeout)
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		writeProblem(w, r, problem.NotLeader, err.Error())
		return
	case err != nil:
		writeProblem(w, r, problem.Internal, err.Error())
		return
	}
	a.n.log.Info("snapshot restored", "bytes", size, "source_index", h.Index, "created", h.Created, "took", time.Since(start))
	writeJSON(w, http.StatusOK, RestoreResult{Bytes: total, SourceIndex: h.Index, Created: h.Created, Took: time.Since(start).Round(time.Millisecond).String()})
}

// checkPayload restores the store stream into a throw-away store in dir:
// a stream the store cannot read must never reach raft, which stops the
// process when its FSM refuses a restore half-way.
func checkPayload(r io.Reader, dir string, log *slog.Logger) error {
	st, err := store.Open(dir, store.Options{BlockCacheBytes: 8 << 20, Logger: log.With("component", "snapshot-check")})
	if err != nil {
		return fmt.Errorf("cannot open a scratch store to check the snapshot: %w", err)
	}
	err = st.Restore(r)
	if cerr := st.Close(); err == nil && cerr != nil {
		return fmt.Errorf("cannot close the scratch store: %w", cerr)
	}
	if err != nil {
		return fmt.Errorf("%w: the store cannot read its payload: %w", ErrBadBackup, err)
	}
	return nil
}
