package edge

import (
	"bufio"
	"encoding/csv"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// GET /v1/links/export?format=csv|json streams every link of the owner,
// oldest first, straight from a Pebble iterator (store.EachLink): one link
// is in memory at a time, and the body goes out in chunks as it is
// written, so a million links never sit in memory. JSON is one array of
// the link objects of GET /v1/links; CSV has exportColumns as its header.
// A store failure midway aborts the chunked body, so a client never takes
// a cut export for a whole one.
const exportPath = "/v1/links/export"

// exportColumns is the CSV header; `waymark links import --format csv`
// reads the same names.
var exportColumns = []string{"code", "short_url", "url", "redirect", "status", "expires_at", "click_limit", "forward_query", "created_at", "updated_at"}

// exportWriteIdle bounds one chunk's write: a client that stops reading
// for that long loses the export (the server's WriteTimeout would cut any
// long export as a whole).
const exportWriteIdle = 30 * time.Second

// exportFlushBytes is how much the stream buffers between chunks.
const exportFlushBytes = 32 << 10

func (s *Server) exportLinks(ctx *fasthttp.RequestCtx, owner store.Owner) {
	format := string(ctx.QueryArgs().Peek("format"))
	switch format {
	case "":
		format = "json"
	case "json", "csv":
	default:
		writeProblem(ctx, probInvalidRequest, "format must be csv or json")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if format == "csv" {
		ctx.SetContentType("text/csv; charset=utf-8")
		ctx.Response.Header.Set("Content-Disposition", `attachment; filename="links.csv"`)
	} else {
		ctx.SetContentType("application/json")
	}
	// The connection, not the RequestCtx, outlives the handler: the stream
	// writer runs on it after the handler returns, and moves its write
	// deadline on with every chunk.
	conn := ctx.Conn()
	ownerID := owner.ID
	s.m.exports.Inc()
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		if err := s.writeExport(w, conn, ownerID, format); err != nil {
			s.m.exportsFailed.Inc()
			s.log.Warn("export stopped", "owner", ownerID, "err", err)
			// Closing the connection mid-chunk tells the client the body
			// is incomplete.
			conn.Close()
		}
	})
}

func (s *Server) writeExport(w *bufio.Writer, conn net.Conn, owner, format string) error {
	flush := func() error {
		conn.SetWriteDeadline(time.Now().Add(exportWriteIdle))
		return w.Flush()
	}
	now := s.now()
	var cw *csv.Writer
	n := 0
	if format == "csv" {
		cw = csv.NewWriter(w)
		if err := cw.Write(exportColumns); err != nil {
			return err
		}
	} else if _, err := w.WriteString("["); err != nil {
		return err
	}
	row := make([]string, len(exportColumns))
	err := s.st.EachLink(owner, func(l *store.Link) error {
		v := s.linkView(l, now)
		if cw != nil {
			exportRow(row, &v)
			if err := cw.Write(row); err != nil {
				return err
			}
			cw.Flush()
		} else {
			if n > 0 {
				w.WriteString(",")
			}
			w.WriteString("\n")
			b := marshalJSON(v)
			if _, err := w.Write(b[:len(b)-1]); err != nil { // without the encoder's newline
				return err
			}
		}
		n++
		if w.Buffered() >= exportFlushBytes {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	if cw == nil {
		w.WriteString("\n]\n")
	} else if err := cw.Error(); err != nil {
		return err
	}
	return flush()
}

func exportRow(row []string, v *linkView) {
	opt := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	row[0], row[1], row[2] = v.Code, v.ShortURL, v.URL
	row[3], row[4] = strconv.Itoa(v.Redirect), v.Status
	row[5] = opt(v.ExpiresAt)
	row[6] = ""
	if v.ClickLimit != nil {
		row[6] = strconv.FormatInt(*v.ClickLimit, 10)
	}
	row[7] = strconv.FormatBool(v.ForwardQuery)
	row[8], row[9] = v.CreatedAt, v.UpdatedAt
}
