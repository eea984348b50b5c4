package api

import (
	"fmt"
	"time"

	"github.com/valyala/fasthttp"
)

// serveLinkOverview answers GET /v1/links/{code}/stats/overview?tz=ZONE.
func (a *stats) serveLinkOverview(ctx *fasthttp.RequestCtx, code string) {
	loc, err := tzArg(ctx.QueryArgs(), "UTC")
	if err != nil {
		writeProblem(ctx, "invalid-request", err.Error())
		return
	}
	out, err := a.b.LinkOverview(code, loc)
	if err != nil {
		a.queryError(ctx, err)
		return
	}
	writeJSON(ctx, out)
}

// tzArg reads the tz parameter, def when it is absent.
func tzArg(args *fasthttp.Args, def string) (*time.Location, error) {
	tz := string(args.Peek("tz"))
	if tz == "" {
		tz = def
	}
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q", tz)
	}
	return loc, nil
}
