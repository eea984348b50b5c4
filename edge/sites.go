package edge

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // time zones validate the same on hosts without a zoneinfo database

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// The site API, on the public port with a Bearer key:
//
//	GET    /v1/sites                          the caller's sites
//	POST   /v1/sites                          register a site
//	GET    /v1/sites/{id}                     one site, with its settings and goals
//	PATCH  /v1/sites/{id}                     {"timezone": ..., "honor_dnt": ...}
//	GET    /v1/sites/{id}/goals               the site's goals
//	POST   /v1/sites/{id}/goals               {"event_name": ...} or {"page_path": ...}
//	GET    /v1/sites/{id}/goals/{goal_id}     one goal
//	DELETE /v1/sites/{id}/goals/{goal_id}     remove a goal
//
// Another owner's site answers 404, exactly as a missing one. Every other
// path under /v1/sites/{id}/ (the stats the aggregator answers) is left to
// Config.APIFallback.
const sitesPrefix = "/v1/sites/"

// dispatchSites routes the site endpoints and reports whether path was one.
func (s *Server) dispatchSites(ctx *fasthttp.RequestCtx, path, method string) (string, bool) {
	if path == "/v1/sites" {
		switch method {
		case fasthttp.MethodPost:
			s.withOwner(ctx, true, s.createSite)
			return "sites.create", true
		case fasthttp.MethodGet:
			s.withOwner(ctx, false, s.listSites)
			return "sites.list", true
		}
		methodNotAllowed(ctx, "GET, POST")
		return "sites", true
	}
	rest, ok := strings.CutPrefix(path, sitesPrefix)
	if !ok {
		return "", false
	}
	id, sub, nested := strings.Cut(rest, "/")
	if id == "" {
		return "", false
	}
	switch {
	case !nested:
		switch method {
		case fasthttp.MethodGet:
			s.withOwner(ctx, false, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.getSite(ctx, o, id) })
			return "sites.get", true
		case fasthttp.MethodPatch:
			s.withOwner(ctx, true, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.updateSite(ctx, o, id) })
			return "sites.update", true
		}
		methodNotAllowed(ctx, "GET, PATCH")
		return "site", true
	case sub == "goals":
		switch method {
		case fasthttp.MethodGet:
			s.withOwner(ctx, false, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.listGoals(ctx, o, id) })
			return "goals.list", true
		case fasthttp.MethodPost:
			s.withOwner(ctx, true, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.createGoal(ctx, o, id) })
			return "goals.create", true
		}
		methodNotAllowed(ctx, "GET, POST")
		return "goals", true
	}
	goalID, ok := strings.CutPrefix(sub, "goals/")
	if !ok || goalID == "" || strings.IndexByte(goalID, '/') >= 0 {
		return "", false
	}
	switch method {
	case fasthttp.MethodGet:
		s.withOwner(ctx, false, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.getGoal(ctx, o, id, goalID) })
		return "goals.get", true
	case fasthttp.MethodDelete:
		s.withOwner(ctx, true, func(ctx *fasthttp.RequestCtx, o store.Owner) { s.deleteGoal(ctx, o, id, goalID) })
		return "goals.delete", true
	}
	methodNotAllowed(ctx, "GET, DELETE")
	return "goal", true
}

// siteView is a site as the API shows it.
type siteView struct {
	ID        string     `json:"id"`
	Domain    string     `json:"domain"`
	Timezone  string     `json:"timezone"`
	HonorDNT  bool       `json:"honor_dnt"`
	Goals     []goalView `json:"goals"`
	CreatedAt string     `json:"created_at"`
}

func newSiteView(st *store.Site) siteView {
	v := siteView{
		ID: st.ID, Domain: st.Domain, Timezone: st.Timezone, HonorDNT: !st.IgnoreDNT,
		Goals: make([]goalView, 0, len(st.Goals)), CreatedAt: formatMillis(st.CreatedAt),
	}
	for i := range st.Goals {
		v.Goals = append(v.Goals, newGoalView(&st.Goals[i]))
	}
	return v
}

func (s *Server) createSite(ctx *fasthttp.RequestCtx, owner store.Owner) {
	raw, ok := readBody(ctx)
	if !ok {
		return
	}
	domain, tz, err := decodeSite(raw)
	if err != nil {
		writeProblem(ctx, probInvalidRequest, err.Error())
		return
	}
	id, err := newSiteID()
	if err != nil {
		s.log.Error("cannot generate site id", "err", err)
		writeProblem(ctx, probInternal, "a site id could not be generated")
		return
	}
	now := s.now()
	site := store.Site{ID: id, Domain: domain, Timezone: tz, Owner: owner.ID, CreatedAt: now.UnixMilli()}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	index, err := s.w.CreateSite(wctx, &site)
	if errors.Is(err, store.ErrDomainTaken) {
		writeProblem(ctx, probDomainTaken, fmt.Sprintf("a site is already registered for %s", domain))
		return
	}
	if err != nil {
		s.writeWriteError(ctx, "site registration", err)
		return
	}
	ctx.Response.Header.Set("Location", s.publicBase+sitesPrefix+id)
	setIndex(ctx, index)
	writeJSON(ctx, fasthttp.StatusCreated, marshalJSON(newSiteView(&site)))
}

func (s *Server) listSites(ctx *fasthttp.RequestCtx, owner store.Owner) {
	sites, err := s.st.OwnerSites(owner.ID)
	if err != nil {
		s.log.Error("cannot list sites", "owner", owner.ID, "err", err)
		writeProblem(ctx, probInternal, "the sites could not be listed")
		return
	}
	out := struct {
		Sites []siteView `json:"sites"`
	}{Sites: make([]siteView, 0, len(sites))}
	for i := range sites {
		out.Sites = append(out.Sites, newSiteView(&sites[i]))
	}
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(out))
}

// ownedSite loads site id for owner, answering 404 when it does not exist
// here or belongs to someone else (never 403: that would confirm it
// exists).
func (s *Server) ownedSite(ctx *fasthttp.RequestCtx, owner store.Owner, id string) (store.Site, bool) {
	st, found, err := s.st.Site(id)
	if err != nil {
		s.log.Error("cannot read site", "site", id, "err", err)
		writeProblem(ctx, probInternal, "the site could not be read")
		return store.Site{}, false
	}
	if !found || st.Owner != owner.ID {
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no site %q", id))
		return store.Site{}, false
	}
	return st, true
}

func (s *Server) getSite(ctx *fasthttp.RequestCtx, owner store.Owner, id string) {
	if st, ok := s.ownedSite(ctx, owner, id); ok {
		writeJSON(ctx, fasthttp.StatusOK, marshalJSON(newSiteView(&st)))
	}
}

func (s *Server) updateSite(ctx *fasthttp.RequestCtx, owner store.Owner, id string) {
	raw, ok := readBody(ctx)
	if !ok {
		return
	}
	req, err := decodeSitePatch(raw)
	if err != nil {
		writeProblem(ctx, probInvalidRequest, err.Error())
		return
	}
	p := store.SitePatch{SiteID: id, Owner: owner.ID}
	if req.timezone != nil {
		p.SetTimezone, p.Timezone = true, *req.timezone
	}
	if req.honorDNT != nil {
		p.SetIgnoreDNT, p.IgnoreDNT = true, !*req.honorDNT
	}
	if p.Empty() {
		s.getSite(ctx, owner, id)
		return
	}
	st, index, ok := s.applySiteEdit(ctx, &p, "site update")
	if !ok {
		return
	}
	setIndex(ctx, index)
	writeJSON(ctx, fasthttp.StatusOK, marshalJSON(newSiteView(&st)))
}

// applySiteEdit sends p through the log and answers the refusals; the
// FSM checks ownership, so a site this replica has not applied yet still
// gets its edit.
func (s *Server) applySiteEdit(ctx *fasthttp.RequestCtx, p *store.SitePatch, what string) (store.Site, uint64, bool) {
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	st, index, err := s.w.UpdateSite(wctx, p)
	switch {
	case errors.Is(err, store.ErrNotFound) && p.DeleteGoal != "":
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no goal %q on a site %q of yours", p.DeleteGoal, p.SiteID))
	case errors.Is(err, store.ErrNotFound):
		writeProblem(ctx, probNotFound, fmt.Sprintf("there is no site %q", p.SiteID))
	case errors.Is(err, store.ErrGoalExists):
		writeProblem(ctx, probGoalExists, fmt.Sprintf("site %q already has a goal with the same event name, page path or display name", p.SiteID))
	case errors.Is(err, store.ErrTooManyGoals):
		writeProblem(ctx, probGoalLimit, fmt.Sprintf("site %q already has %d goals, the most allowed", p.SiteID, store.MaxGoals))
	case errors.Is(err, store.ErrInvalidSiteEdit):
		writeProblem(ctx, probInvalidRequest, err.Error())
	case err != nil:
		s.writeWriteError(ctx, what, err)
	default:
		return st, index, true
	}
	return store.Site{}, 0, false
}

// decodeSite checks a site body: a bare host name and an IANA time zone
// (UTC when omitted).
func decodeSite(raw []byte) (domain, tz string, err error) {
	o, err := decodeObject(raw, siteFields)
	if err != nil {
		return "", "", err
	}
	domain, st, err := o.str("domain")
	if err != nil {
		return "", "", err
	}
	if st != fieldSet || domain == "" {
		return "", "", errors.New(`field "domain" is required`)
	}
	if domain, err = normalizeDomain(domain); err != nil {
		return "", "", err
	}
	tz, st, err = o.str("timezone")
	if err != nil {
		return "", "", err
	}
	if st != fieldSet {
		tz = "UTC"
	}
	if err := checkTimezone(tz); err != nil {
		return "", "", err
	}
	return domain, tz, nil
}

var siteFields = []string{"domain", "timezone"}

// checkTimezone accepts IANA time zone names.
func checkTimezone(tz string) error {
	if tz == "" || tz == "Local" || len(tz) > store.MaxTimezoneLen {
		return fmt.Errorf(`field "timezone" must be an IANA time zone such as Europe/Berlin; got %q`, tz)
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return fmt.Errorf(`field "timezone" must be an IANA time zone such as Europe/Berlin; got %q`, tz)
	}
	return nil
}

// normalizeDomain lower-cases a site's host name (punycode for IDNs).
func normalizeDomain(d string) (string, error) {
	if strings.ContainsAny(d, "/:@?# ") {
		return "", fmt.Errorf(`field "domain" must be a bare host name such as example.com, without scheme, port or path; got %q`, d)
	}
	host, canon, err := normalizeHost(strings.TrimSuffix(d, "."))
	if err != nil || strings.HasPrefix(host, "[") || canon.IsAddr() && host != strings.TrimSuffix(d, ".") {
		return "", fmt.Errorf(`field "domain" must be a host name such as example.com; got %q`, d)
	}
	return host, nil
}

// newSiteID returns 12 random hex characters.
func newSiteID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cannot read random bytes: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
