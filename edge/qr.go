package edge

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
	qrcode "github.com/yeqown/go-qrcode/v2"

	"github.com/waymark/waymark/store"
)

// QR codes of a link's short URL: GET /v1/links/{code}/qr with the owner's
// key. The code is built by github.com/yeqown/go-qrcode; the image (PNG or
// SVG) is drawn here from its module matrix, so the quiet zone and the
// pixel size are exactly what the caller asked for.

const qrSuffix = "/qr"

// QR image bounds: the quiet zone the standard asks for is 4 modules.
const (
	qrDefaultSize   = 512
	qrMinSize       = 32
	qrMaxSize       = 2048
	qrDefaultMargin = 4
	qrMaxMargin     = 16
)

// qrOptions is what a QR request asks for.
type qrOptions struct {
	svg    bool
	size   int // pixels of the square image
	margin int // quiet zone, in modules
	ecc    qrcode.EncodeOption
	level  byte // L, M, Q or H
}

var qrLevels = map[string]qrcode.EncodeOption{
	"L": qrcode.WithErrorCorrectionLevel(qrcode.ErrorCorrectionLow),
	"M": qrcode.WithErrorCorrectionLevel(qrcode.ErrorCorrectionMedium),
	"Q": qrcode.WithErrorCorrectionLevel(qrcode.ErrorCorrectionQuart),
	"H": qrcode.WithErrorCorrectionLevel(qrcode.ErrorCorrectionHighest),
}

// parseQROptions reads format, size, margin and ecc from a query string.
func parseQROptions(args *fasthttp.Args) (qrOptions, error) {
	o := qrOptions{size: qrDefaultSize, margin: qrDefaultMargin, ecc: qrLevels["M"], level: 'M'}
	switch f := string(args.Peek("format")); f {
	case "", "png":
	case "svg":
		o.svg = true
	default:
		return o, fmt.Errorf("format %q: want png or svg", f)
	}
	if v := args.Peek("size"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < qrMinSize || n > qrMaxSize {
			return o, fmt.Errorf("size must be an integer from %d to %d pixels", qrMinSize, qrMaxSize)
		}
		o.size = n
	}
	if v := args.Peek("margin"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 0 || n > qrMaxMargin {
			return o, fmt.Errorf("margin must be an integer from 0 to %d modules", qrMaxMargin)
		}
		o.margin = n
	}
	if v := args.Peek("ecc"); len(v) > 0 {
		level := strings.ToUpper(string(v))
		ecc, ok := qrLevels[level]
		if !ok {
			return o, fmt.Errorf("ecc %q: want L, M, Q or H", v)
		}
		o.ecc, o.level = ecc, level[0]
	}
	return o, nil
}

// qrModules is the code's module matrix: modules[y][x] is dark.
func qrModules(text string, o qrOptions) ([][]bool, error) {
	q, err := qrcode.NewWith(text, o.ecc)
	if err != nil {
		return nil, fmt.Errorf("cannot encode a QR code: %w", err)
	}
	var m matrixCapture
	if err := q.Save(&m); err != nil {
		return nil, fmt.Errorf("cannot encode a QR code: %w", err)
	}
	return m.bits, nil
}

// matrixCapture is a qrcode.Writer that keeps the matrix.
type matrixCapture struct{ bits [][]bool }

func (m *matrixCapture) Write(mat qrcode.Matrix) error { m.bits = mat.Bitmap(); return nil }
func (m *matrixCapture) Close() error                  { return nil }

// qrLayout places the modules in a size x size image: each module is
// scale pixels, centred, with at least margin modules of light around.
type qrLayout struct{ scale, offset, n int }

func layoutQR(modules [][]bool, o qrOptions) (qrLayout, error) {
	n := len(modules)
	total := n + 2*o.margin
	scale := o.size / total
	if scale < 1 {
		return qrLayout{}, fmt.Errorf("size %d is too small for this code: it needs at least %d pixels with margin %d", o.size, total, o.margin)
	}
	return qrLayout{scale: scale, offset: (o.size - scale*n) / 2, n: n}, nil
}

var qrPalette = color.Palette{color.Gray{Y: 0xff}, color.Gray{Y: 0}}

func renderQRPNG(modules [][]bool, o qrOptions) ([]byte, error) {
	l, err := layoutQR(modules, o)
	if err != nil {
		return nil, err
	}
	img := image.NewPaletted(image.Rect(0, 0, o.size, o.size), qrPalette) // index 0: light
	for y, row := range modules {
		for x, dark := range row {
			if !dark {
				continue
			}
			for py := 0; py < l.scale; py++ {
				off := img.PixOffset(l.offset+x*l.scale, l.offset+y*l.scale+py)
				for px := 0; px < l.scale; px++ {
					img.Pix[off+px] = 1
				}
			}
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("cannot write PNG: %w", err)
	}
	return buf.Bytes(), nil
}

// renderQRSVG draws each row's runs of dark modules as one path, in
// pixel units, so the SVG and the PNG of the same options match pixel for
// pixel.
func renderQRSVG(modules [][]bool, o qrOptions) ([]byte, error) {
	l, err := layoutQR(modules, o)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" shape-rendering="crispEdges">`, o.size, o.size, o.size, o.size)
	b.WriteString(`<rect width="100%" height="100%" fill="#fff"/><path fill="#000" d="`)
	for y, row := range modules {
		for x := 0; x < len(row); {
			if !row[x] {
				x++
				continue
			}
			start := x
			for x < len(row) && row[x] {
				x++
			}
			fmt.Fprintf(&b, "M%d %dh%dv%dh-%dz", l.offset+start*l.scale, l.offset+y*l.scale, (x-start)*l.scale, l.scale, (x-start)*l.scale)
		}
	}
	b.WriteString(`"/></svg>`)
	return b.Bytes(), nil
}

// linkQR answers the QR code of one of the owner's links.
func (s *Server) linkQR(ctx *fasthttp.RequestCtx, owner store.Owner, code string) {
	o, err := parseQROptions(ctx.QueryArgs())
	if err != nil {
		writeProblem(ctx, probInvalidRequest, err.Error())
		return
	}
	l, ok := s.ownedLink(ctx, owner, code)
	if !ok {
		return
	}
	shortURL := s.linkView(&l, s.now()).ShortURL
	modules, err := qrModules(shortURL, o)
	if err == nil {
		var img []byte
		if o.svg {
			img, err = renderQRSVG(modules, o)
		} else {
			img, err = renderQRPNG(modules, o)
		}
		if err == nil {
			ext, typ := "png", "image/png"
			if o.svg {
				ext, typ = "svg", "image/svg+xml"
			}
			_, bare := store.SplitLinkID(l.Code)
			ctx.Response.Header.Set("Content-Disposition", `inline; filename="`+bare+"."+ext+`"`)
			// The image shows only the short URL, which does not change;
			// private: it is fetched with the owner's key.
			ctx.Response.Header.Set("Cache-Control", "private, max-age=86400")
			ctx.SetContentType(typ)
			ctx.SetStatusCode(fasthttp.StatusOK)
			ctx.SetBody(img)
			return
		}
	}
	writeProblem(ctx, probInvalidRequest, err.Error())
}
