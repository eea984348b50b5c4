package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// BaselineListeningMsg is the log message that carries the baseline's bound
// address, in the same shape the node uses for "http listening".
const BaselineListeningMsg = "baseline listening"

// The baseline's constant answer: the same headers a Waymark redirect
// carries, so the two servers write comparable responses.
var (
	baselineLocation     = []byte("https://example.com/")
	baselineCacheControl = []byte("private, max-age=60")
)

// BaselineHandler answers every request with a constant 302 redirect. It is
// the floor the node is measured against: no lookup, no analytics.
func BaselineHandler(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(fasthttp.StatusFound)
	ctx.Response.Header.SetBytesV("Location", baselineLocation)
	ctx.Response.Header.SetBytesV("Cache-Control", baselineCacheControl)
}

// NewBaselineServer returns a bare fasthttp server around BaselineHandler.
// It keeps fasthttp's defaults except for the two headers the edge server
// also leaves out, so both answers are the same size on the wire.
func NewBaselineServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:               BaselineHandler,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
	}
}

// RunBaseline listens on addr (use "127.0.0.1:0"), logs the bound address
// with BaselineListeningMsg, and serves until ctx ends.
func RunBaseline(ctx context.Context, addr string, log *slog.Logger) error {
	return serveBaseline(ctx, addr, log, NewBaselineServer())
}

// serveBaseline runs srv on addr until ctx ends; every baseline flavour
// logs its address the same way, so StartBaselineChild finds any of them.
func serveBaseline(ctx context.Context, addr string, log *slog.Logger, srv *fasthttp.Server) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	log.Info(BaselineListeningMsg, "addr", ln.Addr().String())
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		return fmt.Errorf("cannot serve baseline: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.ShutdownWithContext(shutdownCtx); err != nil {
		return fmt.Errorf("cannot shut down baseline: %w", err)
	}
	return nil
}

// StartBaselineChild starts a baseline server as a child process and returns
// it with its bound address. cfg names a program that calls RunBaseline,
// usually the benchmark binary re-executed with a hidden flag. Running the
// baseline in its own process keeps it from sharing a scheduler and heap
// with the load generator, as the node does not either.
func StartBaselineChild(ctx context.Context, cfg ChildConfig) (*Child, string, error) {
	if cfg.Name == "" {
		cfg.Name = "baseline"
	}
	cfg.HoldStdin = true
	child, err := StartChild(cfg)
	if err != nil {
		return nil, "", err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	addr, err := child.WaitForAddr(waitCtx, BaselineListeningMsg)
	if err != nil {
		child.Stop()
		return nil, "", err
	}
	return child, addr, nil
}

// BaselineChildMain is the body of a baseline child process: it serves on
// 127.0.0.1:0, logs the address to stdout, and returns when it gets SIGTERM
// or SIGINT or when its stdin closes (the parent is gone).
func BaselineChildMain() error {
	return baselineChildMain(RunBaseline)
}

// baselineChildMain runs serve as a child process body: see
// BaselineChildMain.
func baselineChildMain(serve func(context.Context, string, *slog.Logger) error) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		io.Copy(io.Discard, os.Stdin) // returns at EOF: the parent closed or died
		cancel()
	}()
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	return serve(ctx, "127.0.0.1:0", log)
}
