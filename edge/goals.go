package edge

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// goalView is a goal as the API shows it, in the shape of Plausible's
// Sites API: the kind it is not has a null field.
type goalView struct {
	ID          string  `json:"id"`
	GoalType    string  `json:"goal_type"` // "event" or "page"
	EventName   *string `json:"event_name"`
	PagePath    *string `json:"page_path"`
	DisplayName string  `json:"display_name"`
}

func newGoalView(g *store.Goal) goalView {
	v := goalView{ID: g.ID, GoalType: g.Type(), DisplayName: g.DisplayName}
	if g.IsPage() {
		p := g.PagePath
		v.PagePath = &p
	} else {
		n := g.EventName
		v.EventName = &n
	}
	return v
}

func (s *Server) listGoals(ctx *fasthttp.RequestCtx, owner store.Owner, siteID string) {
	st, ok := s.ownedSite(ctx, owner, siteID)
	if !ok {
		return
	}
	out := struct {
		Goals []goalView `json:"goals"`
	}{Goals: newSiteView(&st).Goals}
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(out))
}

func (s *Server) getGoal(ctx *fasthttp.RequestCtx, owner store.Owner, siteID, goalID string) {
	st, ok := s.ownedSite(ctx, owner, siteID)
	if !ok {
		return
	}
	g, found := st.Goal(goalID)
	if !found {
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no goal %q on site %q", goalID, siteID))
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(newGoalView(&g)))
}

func (s *Server) createGoal(ctx *fasthttp.RequestCtx, owner store.Owner, siteID string) {
	raw, ok := readBody(ctx)
	if !ok {
		return
	}
	g, err := decodeGoal(raw)
	if err != nil {
		writeProblem(ctx, probInvalidRequest, err.Error())
		return
	}
	if g.ID, err = newGoalID(); err != nil {
		s.log.Error("cannot generate goal id", "err", err)
		writeProblem(ctx, probInternal, "a goal id could not be generated")
		return
	}
	// The FSM decides, but a clash this replica can already see gets a
	// precise answer without a trip through the log.
	if st, found, err := s.st.Site(siteID); err == nil && found && st.Owner == owner.ID {
		if o, field, clash := st.GoalConflict(&g); clash {
			writeProblem(ctx, probGoalExists, fmt.Sprintf("goal %q (%s) already has this %s", o.ID, o.DisplayName, strings.ReplaceAll(field, "_", " ")))
			return
		}
	}
	st, index, ok := s.applySiteEdit(ctx, &store.SitePatch{SiteID: siteID, Owner: owner.ID, AddGoal: &g}, "goal creation")
	if !ok {
		return
	}
	stored, found := st.Goal(g.ID)
	if !found {
		s.log.Error("BUG: created goal missing from the stored site", "site", siteID, "goal", g.ID)
		writeProblem(ctx, probInternal, "the goal was created but could not be read back")
		return
	}
	ctx.Response.Header.Set("Location", s.publicBase+sitesPrefix+siteID+"/goals/"+g.ID)
	setIndex(ctx, index)
	writeJSON(ctx, fasthttp.StatusCreated, marshalJSON(newGoalView(&stored)))
}

func (s *Server) deleteGoal(ctx *fasthttp.RequestCtx, owner store.Owner, siteID, goalID string) {
	if !store.ValidGoalID(goalID) {
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no goal %q on site %q", goalID, siteID))
		return
	}
	_, index, ok := s.applySiteEdit(ctx, &store.SitePatch{SiteID: siteID, Owner: owner.ID, DeleteGoal: goalID}, "goal deletion")
	if !ok {
		return
	}
	setIndex(ctx, index)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// newGoalID returns 8 random hex characters; the FSM refuses a clash
// within the site, which at 32 bits and at most 100 goals never happens
// in practice.
func newGoalID() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cannot read random bytes: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
