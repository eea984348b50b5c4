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

var siteFields = []string{"domain", "timezone"}

// siteView is a site as the API shows it.
type siteView struct {
	ID        string `json:"id"`
	Domain    string `json:"domain"`
	Timezone  string `json:"timezone"`
	CreatedAt string `json:"created_at"`
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
	ctx.Response.Header.Set("Location", s.publicBase+"/v1/sites/"+id)
	setIndex(ctx, index)
	writeJSON(ctx, fasthttp.StatusCreated, marshalJSON(siteView{
		ID: id, Domain: domain, Timezone: tz, CreatedAt: formatMillis(site.CreatedAt),
	}))
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
	if tz == "" || tz == "Local" {
		return "", "", fmt.Errorf(`field "timezone" must be an IANA time zone such as Europe/Berlin; got %q`, tz)
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return "", "", fmt.Errorf(`field "timezone" must be an IANA time zone such as Europe/Berlin; got %q`, tz)
	}
	return domain, tz, nil
}

// normalizeDomain lower-cases a site's host name (punycode for IDNs).
func normalizeDomain(d string) (string, error) {
	if strings.ContainsAny(d, "/:@?# ") {
		return "", fmt.Errorf(`field "domain" must be a bare host name such as example.com, without scheme, port or path; got %q`, d)
	}
	host, err := normalizeHost(strings.TrimSuffix(d, "."))
	if err != nil || strings.HasPrefix(host, "[") {
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
