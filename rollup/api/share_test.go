package api

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/rollup/internal/world"
)

// serveGrant serves GrantHandler for one fixed grant, the path taken from
// the request as the node hands it over.
func serveGrant(t *testing.T, h func(*fasthttp.RequestCtx, Grant, string), g Grant) string {
	return world.Serve(t, func(ctx *fasthttp.RequestCtx) { h(ctx, g, string(ctx.Path())) })
}

func TestGrantHandlerReadsOnlyItsOwn(t *testing.T) {
	a := feedWorld(t, world.Generate(3))
	h := GrantHandler(a, world.Auth{}, Config{Now: worldNow, Logger: slog.New(slog.DiscardHandler)})
	const q = "?from=2026-11-27&to=2026-11-30"
	site := serveGrant(t, h, Grant{Owner: "owner-a", Site: world.Site})
	link := serveGrant(t, h, Grant{Owner: "owner-a", Link: world.Code})
	// A grant that names another owner's site (a share whose site changed
	// hands) reads nothing either.
	stale := serveGrant(t, h, Grant{Owner: "owner-a", Site: "site-b"})
	for _, c := range []struct {
		base, method, path string
		status             int
	}{
		{site, "GET", "/v1/sites/" + world.Site + "/stats/aggregate" + q, 200},
		{site, "GET", "/v1/sites/" + world.Site + "/stats/breakdown" + q + "&dimension=page", 200},
		{site, "GET", "/v1/sites/" + world.Site + "/stats/export" + q, 200},
		{site, "GET", "/v1/sites/site-b/stats/aggregate" + q, 404},
		{site, "GET", "/v1/links/" + world.Code + "/stats" + q, 404},
		{site, "GET", "/v1/sites/" + world.Site + "/stats" + q, 404},
		{site, "POST", "/api/v2/query", 405},
		{site, "POST", "/v1/sites/" + world.Site + "/stats/aggregate", 405},
		{link, "GET", "/v1/links/" + world.Code + "/stats" + q, 200},
		{link, "GET", "/v1/links/" + world.Code + "/stats/export" + q, 200},
		{link, "GET", "/v1/links/bcode01/stats" + q, 404},
		{link, "GET", "/v1/links/" + world.Code + "/stats/a/b", 404},
		{link, "GET", "/v1/sites/" + world.Site + "/stats/aggregate" + q, 404},
		{stale, "GET", "/v1/sites/site-b/stats/aggregate" + q, 404},
	} {
		if st, _, body := world.Call(t, c.method, c.base+c.path, "", ""); st != c.status {
			t.Errorf("%s %s: got %d %s; want %d", c.method, c.path, st, body, c.status)
		}
	}
}

// TestSiteExportAgreesWithAggregate: visitors.csv is the timeseries, so
// its pageviews and visits per day add up to the aggregate's, and every
// breakdown file has Plausible's header.
func TestSiteExportAgreesWithAggregate(t *testing.T) {
	a := feedWorld(t, world.Generate(3))
	url := startStats(t, a)
	const q = "?from=2026-11-27&to=2026-11-30"
	st, ct, body := world.Call(t, "GET", url+"/v1/sites/"+world.Site+"/stats/export"+q, "key-a", "")
	if st != 200 || ct != "application/zip" {
		t.Fatalf("export: %d %s %.200s", st, ct, body)
	}
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][][]string{}
	for _, f := range zr.File {
		rc, _ := f.Open()
		raw, _ := io.ReadAll(rc)
		rc.Close()
		rows, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		files[f.Name] = rows
	}
	days := files["visitors.csv"]
	if len(days) != 1+4 {
		t.Fatalf("visitors.csv: %d rows; want a header and 4 days", len(days))
	}
	var pageviews, visits int64
	for _, row := range days[1:] {
		p, _ := strconv.ParseInt(row[2], 10, 64)
		v, _ := strconv.ParseInt(row[3], 10, 64)
		pageviews, visits = pageviews+p, visits+v
	}
	_, _, agg := world.Call(t, "GET", url+"/v1/sites/"+world.Site+"/stats/aggregate"+q, "key-a", "")
	var m struct{ Pageviews, Visits int64 }
	if err := json.Unmarshal(agg, &m); err != nil {
		t.Fatal(err)
	}
	if pageviews != m.Pageviews || pageviews == 0 {
		t.Errorf("visitors.csv pageviews add up to %d; the aggregate says %d", pageviews, m.Pageviews)
	}
	if visits < m.Visits {
		t.Errorf("visitors.csv visits add up to %d, fewer than the aggregate's %d (a visit over midnight counts on both days)", visits, m.Visits)
	}
	for _, tbl := range siteExportTables {
		rows, ok := files[tbl.file]
		if !ok {
			t.Errorf("no %s", tbl.file)
			continue
		}
		if h := rows[0]; len(h) != len(tbl.columns) || h[0] != "name" {
			t.Errorf("%s header %v", tbl.file, h)
		}
	}
	if st, _, _ := world.Call(t, "GET", url+"/v1/sites/site-b/stats/export"+q, "key-a", ""); st != 404 {
		t.Errorf("another owner's export: %d; want 404", st)
	}
}
