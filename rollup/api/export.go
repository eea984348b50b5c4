package api

import (
	"archive/zip"
	"bufio"
	"encoding/csv"
	"errors"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/rollup/query"
	"github.com/waymark/waymark/store"
)

// Exports (issue 13 point 7), as Plausible's CSV export:
//
//	GET /v1/sites/{id}/stats/export   a zip of CSVs: visitors.csv (the series) and one per breakdown
//	GET /v1/links/{code}/stats/export a zip of CSVs: clicks.csv (the series) and one per link breakdown
//
// with the range parameters of the other stats endpoints (from, to, tz,
// granularity; filters for a site). The zip is written to the response
// as each table is read from query.Backend, one table at a time, so no
// whole file is held in memory and any backend can answer. A failure
// midway cuts the connection, so a client never takes a cut zip for a
// whole one.
//
// File names and columns are Plausible's (StatsController.csv_export and
// the csv branch of each Api.StatsController report). Where Waymark has a
// code and Plausible a display name (countries, regions, cities), the
// name column holds the code. Breakdowns are sorted as the breakdown
// endpoint sorts them and hold up to exportLimit rows.

// exportLimit is the rows of each breakdown table (the breakdown
// endpoint's maximum; Plausible's export takes 300, 100 for pages).
const exportLimit = 1000

// exportWriteIdle bounds one chunk's write to a client that stops reading.
const exportWriteIdle = 30 * time.Second

// noneValue names a breakdown row without a value, as Plausible does for
// sources; other tables use noneOther.
const (
	noneSource = "Direct / None"
	noneOther  = "(none)"
)

// siteExportTable is one breakdown CSV of a site export.
type siteExportTable struct {
	file, dimension string
	columns         []string
	row             func(r *query.SiteBreakdownRow, pageviews map[string]int64) []string
}

var (
	sourceColumns = []string{"name", "visitors", "bounce_rate", "visit_duration"}
	nameVisitors  = []string{"name", "visitors"}
)

func sourceRow(r *query.SiteBreakdownRow, _ map[string]int64) []string {
	return []string{noneName(r.Value, noneOther), u64(r.Visitors), f64(r.BounceRate), f64(r.VisitDuration)}
}

func visitorsRow(r *query.SiteBreakdownRow, _ map[string]int64) []string {
	return []string{noneName(r.Value, noneOther), u64(r.Visitors)}
}

// siteExportTables are the breakdown files, in zip order.
var siteExportTables = []siteExportTable{
	{"sources.csv", "source", sourceColumns, func(r *query.SiteBreakdownRow, _ map[string]int64) []string {
		return []string{noneName(r.Value, noneSource), u64(r.Visitors), f64(r.BounceRate), f64(r.VisitDuration)}
	}},
	{"channels.csv", "channel", sourceColumns, sourceRow},
	{"utm_mediums.csv", "utm_medium", sourceColumns, sourceRow},
	{"utm_sources.csv", "utm_source", sourceColumns, sourceRow},
	{"utm_campaigns.csv", "utm_campaign", sourceColumns, sourceRow},
	{"utm_contents.csv", "utm_content", sourceColumns, sourceRow},
	{"utm_terms.csv", "utm_term", sourceColumns, sourceRow},
	{"referrers.csv", "referrer", sourceColumns, sourceRow},
	{"pages.csv", "page", []string{"name", "visitors", "pageviews", "bounce_rate", "time_on_page", "scroll_depth"},
		func(r *query.SiteBreakdownRow, _ map[string]int64) []string {
			return []string{r.Value, u64(r.Visitors), i64(r.Pageviews), f64(r.BounceRate), f64(r.TimeOnPage), f64(r.ScrollDepth)}
		}},
	{"entry_pages.csv", "entry_page", []string{"name", "unique_entrances", "total_entrances", "visit_duration"},
		func(r *query.SiteBreakdownRow, _ map[string]int64) []string {
			return []string{r.Value, u64(r.Visitors), i64(r.Visits), f64(r.VisitDuration)}
		}},
	{"exit_pages.csv", "exit_page", []string{"name", "unique_exits", "total_exits", "exit_rate"},
		func(r *query.SiteBreakdownRow, pageviews map[string]int64) []string {
			// Plausible: floor(exits / the page's pageviews * 100).
			rate := ""
			if pv := pageviews[r.Value]; pv > 0 {
				rate = strconv.FormatFloat(math.Floor(float64(r.Visits)/float64(pv)*100), 'f', -1, 64)
			}
			return []string{r.Value, u64(r.Visitors), i64(r.Visits), rate}
		}},
	{"countries.csv", "country", nameVisitors, visitorsRow},
	{"regions.csv", "region", nameVisitors, visitorsRow},
	{"cities.csv", "city", nameVisitors, visitorsRow},
	{"browsers.csv", "browser", nameVisitors, visitorsRow},
	{"operating_systems.csv", "os", nameVisitors, visitorsRow},
	{"devices.csv", "device", nameVisitors, visitorsRow},
}

// linkExportTables are a link export's breakdown files: dimension by file.
var linkExportTables = []struct{ file, dimension string }{
	{"countries.csv", "country"},
	{"devices.csv", "device"},
	{"browsers.csv", "browser"},
	{"operating_systems.csv", "os"},
	{"referrers.csv", "referrer"},
	{"utm_sources.csv", "utm_source"},
	{"utm_mediums.csv", "utm_medium"},
	{"utm_campaigns.csv", "utm_campaign"},
}

func noneName(v, none string) string {
	if v == "" {
		return none
	}
	return v
}

func u64(v uint64) string  { return strconv.FormatUint(v, 10) }
func i64(v int64) string   { return strconv.FormatInt(v, 10) }
func f64(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// bucketLabel is a series bucket as Plausible's CSV writes it: a date, or
// a date and time for hours.
func bucketLabel(t time.Time, g query.Granularity) string {
	if g == query.Hour {
		return t.Format(time.DateTime)
	}
	return t.Format(time.DateOnly)
}

// exportName is the download's file name: Plausible's, with the range's
// first and last day.
func exportName(subject string, r query.Range) string {
	loc := r.Location()
	last := r.To.Add(-time.Nanosecond).In(loc)
	return "Waymark export " + subject + " " + r.From.In(loc).Format(time.DateOnly) + " to " + last.Format(time.DateOnly) + ".zip"
}

// zipStream is one export being written: the zip, and the connection
// whose write deadline moves with every table.
type zipStream struct {
	w    *bufio.Writer
	conn net.Conn
	zw   *zip.Writer
	now  time.Time
}

// table writes one CSV file of the zip.
func (z *zipStream) table(name string, header []string, rows func(cw *csv.Writer) error) error {
	f, err := z.zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: z.now})
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	cw.UseCRLF = true // RFC 4180, as Plausible's NimbleCSV writes
	if err := cw.Write(header); err != nil {
		return err
	}
	if err := rows(cw); err != nil {
		return err
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	if z.conn != nil {
		z.conn.SetWriteDeadline(time.Now().Add(exportWriteIdle))
	}
	return z.w.Flush()
}

// startZip sets the headers of a zip answer and runs write as the body
// stream. A failure closes the connection mid-body.
func (a *stats) startZip(ctx *fasthttp.RequestCtx, filename string, write func(z *zipStream) error) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/zip")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Response.Header.Set("Content-Disposition", `attachment; filename="`+filename+`"`)
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	conn := ctx.Conn() // outlives the handler; the RequestCtx does not
	path := string(ctx.Path())
	now := a.now()
	log := a.log()
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		z := &zipStream{w: w, conn: conn, zw: zip.NewWriter(w), now: now}
		err := write(z)
		if err == nil {
			err = z.zw.Close()
		}
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			log.Warn("stats export stopped", "path", path, "err", err)
			if conn != nil {
				conn.Close()
			}
		}
	})
}

func (a *stats) serveSiteExport(ctx *fasthttp.RequestCtx, s store.Site) {
	args := ctx.QueryArgs()
	r, err := a.parseRange(args, s.Timezone)
	if err != nil {
		writeProblem(ctx, "invalid-request", err.Error())
		return
	}
	g, err := granularityArg(args)
	if err != nil {
		writeProblem(ctx, "invalid-request", err.Error())
		return
	}
	filters, err := filtersArg(string(args.Peek("filters")))
	if err != nil {
		writeProblem(ctx, "invalid-request", err.Error())
		return
	}
	// The series is read before the answer starts, so a question the
	// backend refuses is a problem answer, not a cut zip.
	series, err := a.b.SiteTimeseries(s.ID, r, g, filters)
	if err != nil {
		a.queryError(ctx, err)
		return
	}
	b, siteID, goals := a.b, s.ID, s.Goals
	a.startZip(ctx, exportName(s.Domain, r), func(z *zipStream) error {
		err := z.table("visitors.csv", []string{"date", "visitors", "pageviews", "visits", "views_per_visit", "bounce_rate", "visit_duration"},
			func(cw *csv.Writer) error {
				for i := range series {
					p := &series[i]
					if err := cw.Write([]string{bucketLabel(p.T, g), u64(p.Visitors), i64(p.Pageviews), i64(p.Visits),
						f64(p.ViewsPerVisit), f64(p.BounceRate), f64(p.VisitDuration)}); err != nil {
						return err
					}
				}
				return nil
			})
		if err != nil {
			return err
		}
		var pageviews map[string]int64 // for exit_rate, from pages.csv
		for _, t := range siteExportTables {
			out, err := b.SiteBreakdown(siteID, t.dimension, r, exportLimit, filters)
			if errors.Is(err, query.ErrUnsupportedQuery) {
				continue // a dimension this backend does not break down by: no file
			}
			if err != nil {
				return err
			}
			if t.dimension == "page" {
				pageviews = make(map[string]int64, len(out.Results))
				for _, row := range out.Results {
					pageviews[row.Value] = row.Pageviews
				}
			}
			err = z.table(t.file, t.columns, func(cw *csv.Writer) error {
				for i := range out.Results {
					if err := cw.Write(t.row(&out.Results[i], pageviews)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		if len(goals) == 0 {
			return nil
		}
		conv, err := b.SiteGoalStats(siteID, goals, r)
		if err != nil {
			return err
		}
		return z.table("conversions.csv", []string{"name", "unique_conversions", "total_conversions"}, func(cw *csv.Writer) error {
			for _, g := range conv.Goals {
				if err := cw.Write([]string{g.DisplayName, u64(g.Visitors), i64(g.Events)}); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func (a *stats) serveLinkExport(ctx *fasthttp.RequestCtx, code string) {
	args := ctx.QueryArgs()
	r, err := a.parseRange(args, "UTC")
	if err != nil {
		writeProblem(ctx, "invalid-request", err.Error())
		return
	}
	g, err := granularityArg(args)
	if err != nil {
		writeProblem(ctx, "invalid-request", err.Error())
		return
	}
	st, err := a.b.LinkStats(code, r, g)
	if err != nil {
		a.queryError(ctx, err)
		return
	}
	b := a.b
	_, short := store.SplitLinkID(code)
	a.startZip(ctx, exportName(short, r), func(z *zipStream) error {
		err := z.table("clicks.csv", []string{"date", "clicks", "unique_visitors"}, func(cw *csv.Writer) error {
			for _, p := range st.Series {
				if err := cw.Write([]string{bucketLabel(p.T, g), i64(p.Clicks), u64(p.UniqueVisitors)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, t := range linkExportTables {
			out, err := b.LinkBreakdown(code, t.dimension, r, exportLimit)
			if errors.Is(err, query.ErrUnsupportedQuery) {
				continue
			}
			if err != nil {
				return err
			}
			none := noneOther
			if t.dimension == "referrer" {
				none = noneSource
			}
			err = z.table(t.file, []string{"name", "clicks", "unique_visitors"}, func(cw *csv.Writer) error {
				for _, row := range out.Results {
					if err := cw.Write([]string{noneName(row.Value, none), i64(row.Clicks), u64(row.UniqueVisitors)}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}
