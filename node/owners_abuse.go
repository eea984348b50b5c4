package node

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

// Owner suspension: `waymark owners suspend OWNER --reason TEXT` and
// `waymark owners unsuspend OWNER` write set_owner_suspended through the
// log. Every node keeps the suspended owners in memory (n.suspended):
// loaded from its store before raft replays anything, then changed by the
// FSM with each entry it applies, and reloaded after a snapshot restore.
// The redirect path and API authentication read that set, so a
// suspension reaches every cached link without rewriting one.

// loadSuspended fills the set from the store. It runs before raft opens,
// so no entry can apply between the read and the hook taking over.
func (n *Node) loadSuspended() error {
	ids, err := n.store.SuspendedOwners()
	if err != nil {
		return fmt.Errorf("cannot load suspended owners: %w", err)
	}
	if n.suspended == nil {
		n.suspended = edge.NewOwnerSet()
		set := n.suspended
		n.metrics.GetOrCreateGauge("waymark_owners_suspended", func() float64 { return float64(set.Len()) })
	}
	n.suspended.Replace(ids)
	if len(ids) > 0 {
		n.log.Info("suspended owners", "count", len(ids))
	}
	return nil
}

// reloadSuspended runs after a snapshot restore, on the FSM goroutine.
func (n *Node) reloadSuspended() {
	ids, err := n.store.SuspendedOwners()
	if err != nil {
		n.log.Error("cannot reload suspended owners after a snapshot restore; the set may be stale until a restart", "err", err)
		return
	}
	n.suspended.Replace(ids)
}

// createRate maps the flag's 0 (off) to the edge's "disabled".
func createRate(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}

// purgeAfter maps the flag's 0 (never) to raft's "disabled".
func purgeAfter(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// OwnerView is an owner as the suspension endpoints answer it.
type OwnerView struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Suspended   bool       `json:"suspended"`
	SuspendedAt *time.Time `json:"suspended_at,omitempty"`
	Reason      string     `json:"reason,omitempty"`
}

func ownerView(o store.Owner) OwnerView {
	v := OwnerView{ID: o.ID, Name: o.Name, Suspended: o.Suspended, Reason: o.SuspendReason}
	if o.Suspended {
		at := time.UnixMilli(o.SuspendedAt).UTC()
		v.SuspendedAt = &at
	}
	return v
}

// setSuspended serves POST /v1/owners/{id}/suspend (body {"reason":
// "..."}, required) and POST /v1/owners/{id}/unsuspend.
func (a *adminServer) setSuspended(suspend bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if id == "" || store.CheckOwnerID(id) != nil {
			writeProblem(w, r, problem.InvalidRequest, "the owner id is not valid")
			return
		}
		var req struct {
			Reason string `json:"reason"`
		}
		if suspend {
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8192))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				writeProblem(w, r, problem.InvalidRequest, `body must be {"reason": "..."}`)
				return
			}
			req.Reason = strings.TrimSpace(req.Reason)
			if err := checkReason(req.Reason); err != nil {
				writeProblem(w, r, problem.InvalidRequest, err.Error())
				return
			}
		}
		o, err := a.n.raft.SetOwnerSuspended(r.Context(), id, suspend, time.Now().UnixMilli(), req.Reason)
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeProblem(w, r, problem.NotFound, fmt.Sprintf("there is no owner %q", id))
			return
		case err != nil:
			writeWriteError(w, r, err)
			return
		}
		a.n.log.Info("owner suspension changed", "owner", id, "suspended", o.Suspended, "reason", o.SuspendReason)
		writeJSON(w, http.StatusOK, ownerView(o))
	}
}

// checkReason wants 1 to store.MaxSuspendReason bytes of text: an
// operator says why, for the record.
func checkReason(reason string) error {
	switch {
	case reason == "":
		return errors.New("a suspension needs a reason (--reason TEXT)")
	case len(reason) > store.MaxSuspendReason:
		return fmt.Errorf("the reason is %d bytes; the limit is %d", len(reason), store.MaxSuspendReason)
	case strings.IndexFunc(reason, func(c rune) bool { return unicode.IsControl(c) && c != '\n' }) >= 0:
		return errors.New("the reason must not contain control characters")
	}
	return nil
}

// CmdOwnersSuspend is `waymark owners suspend OWNER --reason TEXT`.
func CmdOwnersSuspend(args []string) error {
	var reason *string
	fs, mk, err := parseCommandFlags("owners suspend", args, "OWNER --reason TEXT", 1, 1, func(fs *flag.FlagSet) {
		reason = fs.String("reason", "", "why the owner is suspended (required)")
	})
	if err != nil {
		return err
	}
	if strings.TrimSpace(*reason) == "" {
		return &cliError{ExitUsage, errors.New("waymark owners suspend needs --reason TEXT")}
	}
	return ownerSuspensionCommand(mk, "/v1/owners/"+fs.Arg(0)+"/suspend", map[string]string{"reason": *reason})
}

// CmdOwnersUnsuspend is `waymark owners unsuspend OWNER`.
func CmdOwnersUnsuspend(args []string) error {
	fs, mk, err := parseCommand("owners unsuspend", args, "OWNER", 1, 1)
	if err != nil {
		return err
	}
	return ownerSuspensionCommand(mk, "/v1/owners/"+fs.Arg(0)+"/unsuspend", map[string]string{})
}

func ownerSuspensionCommand(mk func() (*client, error), path string, body any) error {
	c, err := mk()
	if err != nil {
		return err
	}
	var o OwnerView
	if err := c.call("POST", path, body, &o); err != nil {
		return err
	}
	return c.print(o, func(w *tabwriter.Writer) {
		if o.Suspended {
			fmt.Fprintf(w, "suspended owner %s (%s) since %s: %s\n", o.ID, o.Name, o.SuspendedAt.Format(time.RFC3339), o.Reason)
		} else {
			fmt.Fprintf(w, "owner %s (%s) is not suspended\n", o.ID, o.Name)
		}
	})
}
