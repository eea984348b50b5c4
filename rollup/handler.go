package rollup

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup/query"
)

// SegmentsHandler answers POST /internal/v1/segments (ingest.ShipPath): a
// batch of sealed segments from a node, in the format of ingest.ReadBatch.
// Answers: 401 without the right bearer token, 400 for a body that is not a
// batch (nothing stored), 500 or 503 when nothing could be stored, and 200
// with an ingest.ShipAck naming every segment now durably held, and every
// segment refused for good: damaged ones ("malformed") and ones whose
// identity was already used for other bytes ("conflict"). The rest of the
// batch is stored either way.
func (a *Aggregator) SegmentsHandler() fasthttp.RequestHandler {
	return a.handleSegments
}

// receiveScratch holds one request's verified segments; pooled so that a
// steady stream of batches reuses its buffers.
type receiveScratch struct {
	segs []*verifiedSegment
	n    int
}

var scratchPool = sync.Pool{New: func() any { return new(receiveScratch) }}

// next returns a cleared segment slot; drop gives the last one back.
func (s *receiveScratch) next() *verifiedSegment {
	if s.n == len(s.segs) {
		s.segs = append(s.segs, new(verifiedSegment))
	}
	s.n++
	return s.segs[s.n-1]
}

func (s *receiveScratch) drop() { s.n-- }

func (s *receiveScratch) verified() []*verifiedSegment { return s.segs[:s.n] }

// release keeps the buffers unless one request made them huge.
func (s *receiveScratch) release() {
	for _, seg := range s.segs[:s.n] {
		if cap(seg.events) > 1<<16 {
			*seg = verifiedSegment{}
			continue
		}
		seg.ref = ingest.SegmentRef{}
		clear(seg.events) // drop the strings
		clear(seg.payloads)
	}
	s.n = 0
	scratchPool.Put(s)
}

func (a *Aggregator) handleSegments(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", "POST")
		ctx.Error("method not allowed\n", fasthttp.StatusMethodNotAllowed)
		return
	}
	if !a.authorized(ctx.Request.Header.Peek("Authorization")) {
		a.m.requestsUnauthorized.Inc()
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="waymark-aggregator"`)
		ctx.Error("unauthorized\n", fasthttp.StatusUnauthorized)
		return
	}
	body := ctx.PostBody()
	a.m.bodyBytes.Add(len(body))

	scratch := scratchPool.Get().(*receiveScratch)
	defer scratch.release()
	var rejected []ingest.SegmentRejection
	err := ingest.ReadBatch(body, string(ctx.Request.Header.ContentEncoding()), a.cfg.MaxBatchBytes, func(bs ingest.BatchSegment) error {
		a.m.segmentsReceived.Inc()
		if bs.Ref.Part != 0 {
			return fmt.Errorf("cannot accept segment %d part %d of %q: %w", bs.Ref.Seq, bs.Ref.Part, bs.Ref.Node, errPartsNeedExternalStore)
		}
		seg := scratch.next()
		err := verifySegment(bs.Data, seg)
		if err == nil && seg.ref != bs.Ref {
			err = fmt.Errorf("cannot accept segment: %w: header names segment %d of %q", ingest.ErrCorruptSegment, seg.ref.Seq, seg.ref.Node)
		}
		if err != nil {
			scratch.drop()
			rejected = append(rejected, ingest.SegmentRejection{SegmentRef: bs.Ref, Reason: ingest.RejectMalformed})
			a.m.segmentsRejected.Inc()
			a.log.Warn("rejected damaged segment", "node", bs.Ref.Node, "seq", bs.Ref.Seq, "bytes", len(bs.Data), "err", err)
		}
		return nil
	})
	if err != nil {
		a.m.requestsBad.Inc()
		a.log.Warn("rejected segment batch", "remote", ctx.RemoteAddr().String(), "bytes", len(body), "err", err)
		ctx.Error(err.Error()+"\n", fasthttp.StatusBadRequest)
		return
	}

	res, err := a.apply(scratch.verified())
	if err != nil {
		a.m.requestsFailed.Inc()
		status := fasthttp.StatusInternalServerError
		if errors.Is(err, query.ErrClosed) {
			status = fasthttp.StatusServiceUnavailable
		} else {
			a.log.Error("cannot store segment batch", "segments", scratch.n, "err", err)
		}
		ctx.Error("cannot store segments\n", status)
		return
	}
	a.m.requestsOK.Inc()
	a.log.Debug("received segment batch", "applied", res.applied, "duplicate", res.duplicate,
		"malformed", len(rejected), "conflict", res.conflict, "stored", res.stored,
		"expired", res.expired, "future", res.future)

	ack, err := json.Marshal(ingest.ShipAck{Acked: res.acked, Rejected: append(rejected, res.rejected...)})
	if err != nil {
		// The segments are stored; the node will resend and get its ack.
		a.log.Error("cannot encode ack", "err", err)
		ctx.Error("cannot encode ack\n", fasthttp.StatusInternalServerError)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(ack)
}

// authorized checks "Bearer <token>" in constant time.
func (a *Aggregator) authorized(header []byte) bool {
	const scheme = "bearer "
	if len(header) <= len(scheme) || !bytes.EqualFold(header[:len(scheme)], []byte(scheme)) {
		return false
	}
	return subtle.ConstantTimeCompare(bytes.TrimSpace(header[len(scheme):]), []byte(a.cfg.Token)) == 1
}
