package edge

import (
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/docs"
)

// openAPIPath serves docs/openapi.yaml as JSON. It is an exact route, so
// the redirect path pays nothing for it (one more key in the route map).
const openAPIPath = "/openapi.json"

// openAPIHandler answers GET and HEAD /openapi.json with spec, the JSON
// converted once at start.
func openAPIHandler(spec []byte) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !ctx.IsGet() && !ctx.IsHead() {
			methodNotAllowed(ctx, "GET, HEAD")
			return
		}
		ctx.SetContentType("application/json")
		ctx.Response.Header.Set("Cache-Control", "public, max-age=300")
		ctx.Response.SetBodyRaw(spec) // shared, never modified
	}
}

// newOpenAPIRoute returns the route's handler, or an error when the
// embedded description does not convert (a broken checked-in file).
func newOpenAPIRoute() (fasthttp.RequestHandler, error) {
	spec, err := docs.OpenAPIJSON()
	if err != nil {
		return nil, err
	}
	return openAPIHandler(spec), nil
}
