package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

// Region slots: the ID space has store.MaxRegions of them, and each is
// claimed for good, so claiming is an operator's act (`waymark regions
// add NAME`), never a side effect of a node starting with some --region.
// The voters that form a cluster claim their own regions (raft), and a
// --dev node claims its own.

// RegionClaim is the answer of POST /v1/regions.
type RegionClaim struct {
	Name    string `json:"name"`
	Slot    int    `json:"slot"`
	Claimed bool   `json:"claimed"` // false: the region had this slot already
}

func (a *adminServer) listRegions(w http.ResponseWriter, r *http.Request) {
	rs, err := a.n.store.Regions()
	if err != nil {
		writeProblem(w, r, problem.Internal, err.Error())
		return
	}
	if rs == nil {
		rs = []store.RegionInfo{}
	}
	writeJSON(w, http.StatusOK, rs)
}

func (a *adminServer) claimRegion(w http.ResponseWriter, r *http.Request) {
	var req struct{ Name string }
	var ok bool
	if req.Name, ok = decodeName(w, r); !ok {
		return
	}
	if err := store.CheckRegionName(req.Name); err != nil {
		writeProblem(w, r, problem.InvalidRequest, err.Error())
		return
	}
	slot, claimed, err := a.n.raft.ClaimRegion(r.Context(), req.Name)
	switch {
	case errors.Is(err, store.ErrRegionSpaceFull):
		writeProblem(w, r, problem.Conflict, fmt.Sprintf("all %d region slots are claimed; slots are never freed", store.MaxRegions))
		return
	case err != nil:
		writeWriteError(w, r, err)
		return
	}
	status := http.StatusOK
	if claimed {
		status = http.StatusCreated
		a.n.log.Info("claimed region", "region", req.Name, "slot", slot)
	}
	writeJSON(w, status, RegionClaim{Name: req.Name, Slot: slot, Claimed: claimed})
}

// claimDevRegion gives a --dev node's region its slot: dev needs no setup.
func (n *Node) claimDevRegion(ctx context.Context) error {
	if _, _, err := n.raft.ClaimRegion(ctx, n.cfg.Region); err != nil {
		return fmt.Errorf("cannot claim the dev node's region: %w", err)
	}
	return nil
}

// warnUnclaimedRegion logs, once the replica has caught up, when this
// node's region has no slot: it then serves redirects but generates no
// codes (creates without an alias answer 503).
func (n *Node) warnUnclaimedRegion(ctx context.Context) {
	if !n.cfg.HasRole(RoleVoter) && !n.cfg.HasRole(RoleEdge) {
		return
	}
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		if err := n.raft.WaitReady(ctx); err != nil {
			return
		}
		if claimed, err := n.raft.RegionClaimed(); err == nil && !claimed {
			n.log.Error("this node's region is not claimed: it serves redirects but will not generate codes; claim it with `waymark regions add`",
				"region", n.cfg.Region, "fix", "waymark regions add "+n.cfg.Region)
		}
	}()
}

// regionCheck is the health line for the region slot; it warns, and never
// takes the node out of rotation (redirects work without a slot).
func (n *Node) regionCheck() HealthCheck {
	c := HealthCheck{Name: "region", State: checkPass, Detail: fmt.Sprintf("region %q has a slot", n.cfg.Region)}
	slot, found, err := n.store.RegionSlot(n.cfg.Region)
	switch {
	case err != nil:
		c.State, c.Detail = checkWarn, err.Error()
	case !found:
		c.State = checkWarn
		c.Detail = fmt.Sprintf("region %q is not claimed: no codes are generated here until `waymark regions add %s`", n.cfg.Region, n.cfg.Region)
	default:
		c.Value = float64(slot)
	}
	return c
}

// CmdRegionsList is `waymark regions list`: every claimed region slot.
func CmdRegionsList(args []string) error {
	_, c, err := connect("regions list", args, "[flags]", 0, 0)
	if err != nil {
		return err
	}
	var rs []store.RegionInfo
	if err := c.call("GET", "/v1/regions", nil, &rs); err != nil {
		return err
	}
	return c.print(rs, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "NAME\tSLOT\tALLOCATED IDS")
		for _, r := range rs {
			fmt.Fprintf(w, "%s\t%d\t%d\n", r.Name, r.Slot, r.Allocated)
		}
	})
}

// CmdRegionsAdd is `waymark regions add NAME...`: claims a slot of the ID
// space for each region (a region that has one keeps it).
func CmdRegionsAdd(args []string) error {
	fs, c, err := connect("regions add", args, "[flags] NAME...", 1, -1)
	if err != nil {
		return err
	}
	c.http.Timeout = time.Minute
	var out []RegionClaim
	for _, name := range fs.Args() {
		var rc RegionClaim
		if err := c.call("POST", "/v1/regions", map[string]string{"name": name}, &rc); err != nil {
			return err
		}
		out = append(out, rc)
	}
	return c.print(out, func(w *tabwriter.Writer) {
		for _, rc := range out {
			if rc.Claimed {
				fmt.Fprintf(w, "claimed region %s: slot %d\n", rc.Name, rc.Slot)
			} else {
				fmt.Fprintf(w, "region %s already has slot %d\n", rc.Name, rc.Slot)
			}
		}
	})
}
