package harness

import (
	"context"
	"log/slog"

	"github.com/valyala/fasthttp"
)

// EventBaselineHandler answers every request with 202 and an empty body: the
// floor for POST /api/event, with no parsing, limits or storage. fasthttp
// still reads the whole request body, as the node's server does.
func EventBaselineHandler(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(fasthttp.StatusAccepted)
}

// NewEventBaselineServer returns a bare fasthttp server around
// EventBaselineHandler, with the same defaults as NewBaselineServer.
func NewEventBaselineServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:               EventBaselineHandler,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
	}
}

// RunEventBaseline is RunBaseline for the event baseline: it listens on addr,
// logs the bound address with BaselineListeningMsg and serves until ctx ends.
func RunEventBaseline(ctx context.Context, addr string, log *slog.Logger) error {
	return serveBaseline(ctx, addr, log, NewEventBaselineServer())
}

// EventBaselineChildMain is BaselineChildMain for the event baseline; start
// the child with StartBaselineChild.
func EventBaselineChildMain() error {
	return baselineChildMain(RunEventBaseline)
}
