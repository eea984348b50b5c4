package edge

import (
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// The API side of passwords and previews (issue 13.2, 13.4): what create
// and edit do with the fields gatesjson.go decodes.

// checkPreviewImage validates a preview's image URL like a destination
// (syntax, this service itself, the blocklist) and normalises it,
// answering the problem itself when it is refused.
func (s *Server) checkPreviewImage(ctx *fasthttp.RequestCtx, p *store.Preview) bool {
	if p.Image == "" {
		return true
	}
	d, prob, detail := s.destinationProblem(p.Image)
	if prob != "" {
		writeProblem(ctx, prob, `field "preview": image: `+detail)
		return false
	}
	p.Image = d.url
	if why := p.Problem(); why != "" {
		writeProblem(ctx, probInvalidRequest, `field "preview": `+why)
		return false
	}
	return true
}

func passwordPermanentDetail(code string) string {
	return fmt.Sprintf("link %q is a permanent redirect that browsers may have cached; a password added now would not stop them (create a new link with the password instead)", code)
}

// patchGates adds an edit's password and preview changes to p. A password
// is hashed here, on the node that took the call, after every other check.
func (s *Server) patchGates(ctx *fasthttp.RequestCtx, l *store.Link, g gateFields, p *store.LinkPatch) bool {
	if g.setPreview {
		if !g.preview.IsZero() && !s.checkPreviewImage(ctx, &g.preview) {
			return false
		}
		if enc := store.EncodePreview(g.preview); enc != l.Preview {
			p.SetPreview, p.Preview = true, enc
		}
	}
	if !g.setPassword {
		return true
	}
	if g.password == "" {
		if l.PasswordHash != "" {
			p.SetPassword, p.PasswordHash = true, ""
		}
		return true
	}
	if l.PasswordHash == "" && l.Permanent() {
		writeProblem(ctx, probPermanentRedirect, passwordPermanentDetail(l.Code))
		return false
	}
	h, ok := s.hashForAPI(ctx, g.password)
	if !ok {
		return false
	}
	p.SetPassword, p.PasswordHash = true, h
	return true
}
