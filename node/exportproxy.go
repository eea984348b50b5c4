package node

import (
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge/problem"
)

// Stats exports (issue 13 point 7) are zips of any size, which the
// aggregator streams table by table. A node that proxies them to the
// aggregator streams them on as they come, rather than buffering the whole
// answer as the stats proxy does for the small JSON answers.

// exportReadLimit bounds a whole export through the proxy: a stream's
// reads share the connection's deadline.
const exportReadLimit = 10 * time.Minute

func isExportPath(path []byte) bool {
	return strings.HasSuffix(string(path), "/stats/export")
}

// exportProxy forwards an export request unchanged to the aggregator at u
// and streams its answer to the caller.
func (n *Node) exportProxy(u *url.URL) fasthttp.RequestHandler {
	client := &fasthttp.HostClient{Addr: u.Host, IsTLS: true, TLSConfig: n.peerTLS.clientConfig(),
		ReadTimeout: exportReadLimit, WriteTimeout: 10 * time.Second, MaxConns: 16, StreamResponseBody: true}
	return func(ctx *fasthttp.RequestCtx) {
		req := fasthttp.AcquireRequest()
		ctx.Request.CopyTo(req)
		req.SetHost(u.Host)
		req.URI().SetScheme("https")
		req.Header.Del("Connection")
		resp := fasthttp.AcquireResponse()
		err := client.Do(req, resp)
		fasthttp.ReleaseRequest(req)
		if err != nil {
			fasthttp.ReleaseResponse(resp)
			ctx.Response.Header.Set("Retry-After", "5")
			problem.Write(ctx, "unavailable", fmt.Sprintf("the aggregator at %s did not answer: %v", u.Host, err))
			return
		}
		resp.Header.CopyTo(&ctx.Response.Header)
		body := resp.BodyStream()
		if body == nil {
			ctx.Response.SetBody(resp.Body())
			fasthttp.ReleaseResponse(resp)
			return
		}
		// fasthttp closes the stream once it has written it (or when the
		// caller goes away); closing gives the connection back and the
		// response to its pool.
		ctx.Response.SetBodyStream(&releasingBody{r: body, resp: resp}, -1)
	}
}

// releasingBody is an upstream body stream that releases its response
// once, when fasthttp closes it.
type releasingBody struct {
	r    io.Reader
	resp *fasthttp.Response
	once sync.Once
}

func (b *releasingBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *releasingBody) Close() error {
	var err error
	b.once.Do(func() {
		err = b.resp.CloseBodyStream()
		fasthttp.ReleaseResponse(b.resp)
	})
	return err
}
