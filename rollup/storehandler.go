package rollup

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/ingest"
)

// StoreVerdict is what an external store (ClickHouse) did with one
// segment; anything it could not decide is an error instead, and the
// segment is left unacknowledged, to be sent again.
type StoreVerdict int

// Verdicts.
const (
	// StoreAcked: the segment is durably stored, now or before (a
	// duplicate): the node may delete it.
	StoreAcked StoreVerdict = iota + 1
	// StoreMalformed: it does not verify; never stored.
	StoreMalformed
	// StoreConflict: its identity is stored with other bytes.
	StoreConflict
)

// StoreHandlerConfig configures StoreHandler.
type StoreHandlerConfig struct {
	Token         string // the cluster's bearer token
	MaxBatchBytes int64  // 0: ingest.DefaultMaxBatchBytes
	// Store stores one segment exactly once. Called one segment at a
	// time, in batch order; the first error stops the batch (the store
	// is unreachable: the rest would fail too).
	Store func(ctx context.Context, raw []byte) (StoreVerdict, error)
	// StoreBatch, when set, is used instead of Store: it stores a whole
	// batch's segments at once (one insert for all), answering a verdict
	// or an error for each; a segment with an error is not acknowledged,
	// the others are as their verdicts say.
	StoreBatch func(ctx context.Context, raws [][]byte) ([]StoreVerdict, []error)
	// Ready, when set and answering an error, refuses batches with 503
	// before reading them (the store is not migrated or not reachable).
	Ready   func() error
	Timeout time.Duration // per batch; 0: 2 minutes
	Logger  *slog.Logger
	Metrics *metrics.Set
}

// StoreHandler answers POST /internal/v1/segments (ingest.ShipPath) for an
// aggregator whose events live in an external store: the same endpoint,
// authentication, answers and acknowledgement rules as the embedded
// aggregator's SegmentsHandler. 401 without the token, 400 for a body
// that is not a batch, 503 when nothing could be stored, and 200 with
// an ingest.ShipAck naming every segment now durably held and every one
// refused for good ("malformed": its header does not match the batch
// frame, or it does not verify; "conflict"). A segment in neither list
// is sent again. Segment parts (several aggregators, ingest/split.go)
// are taken like whole segments: each is its own identity.
func StoreHandler(cfg StoreHandlerConfig) fasthttp.RequestHandler {
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = ingest.DefaultMaxBatchBytes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	set := cfg.Metrics
	if set == nil {
		set = metrics.NewSet()
	}
	const p = "waymark_clickhouse_receive_"
	m := storeHandlerMetrics{
		batchesOK:      set.GetOrCreateCounter(p + `batches_total{result="ok"}`),
		batchesBad:     set.GetOrCreateCounter(p + `batches_total{result="bad"}`),
		batchesFailed:  set.GetOrCreateCounter(p + `batches_total{result="failed"}`),
		unauthorized:   set.GetOrCreateCounter(p + `batches_total{result="unauthorized"}`),
		notReady:       set.GetOrCreateCounter(p + `batches_total{result="not_ready"}`),
		acked:          set.GetOrCreateCounter(p + `segments_total{result="acked"}`),
		malformed:      set.GetOrCreateCounter(p + `segments_total{result="malformed"}`),
		conflict:       set.GetOrCreateCounter(p + `segments_total{result="conflict"}`),
		unacknowledged: set.GetOrCreateCounter(p + `segments_total{result="unacknowledged"}`),
		lag:            set.GetOrCreateHistogram(p + "segment_lag_seconds"),
	}
	h := &storeHandler{cfg: cfg, m: m}
	return h.serve
}

type storeHandlerMetrics struct {
	batchesOK, batchesBad, batchesFailed, unauthorized, notReady *metrics.Counter
	acked, malformed, conflict, unacknowledged                   *metrics.Counter
	// lag: from a segment's creation on its edge to its acknowledgement.
	lag *metrics.Histogram
}

// pendingSegment is a batch's segment waiting for its verdict.
type pendingSegment struct {
	ref     ingest.SegmentRef
	created time.Time
	data    []byte
}

type storeHandler struct {
	cfg StoreHandlerConfig
	m   storeHandlerMetrics
}

func (h *storeHandler) serve(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", "POST")
		ctx.Error("method not allowed\n", fasthttp.StatusMethodNotAllowed)
		return
	}
	if !bearerMatches(ctx.Request.Header.Peek("Authorization"), h.cfg.Token) {
		h.m.unauthorized.Inc()
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="waymark-aggregator"`)
		ctx.Error("unauthorized\n", fasthttp.StatusUnauthorized)
		return
	}
	if h.cfg.Ready != nil {
		if err := h.cfg.Ready(); err != nil {
			h.m.notReady.Inc()
			ctx.Error("cannot store segments: "+err.Error()+"\n", fasthttp.StatusServiceUnavailable)
			return
		}
	}
	var segs []pendingSegment
	var rejected []ingest.SegmentRejection
	body := ctx.PostBody()
	err := ingest.ReadBatch(body, string(ctx.Request.Header.ContentEncoding()), h.cfg.MaxBatchBytes, func(bs ingest.BatchSegment) error {
		hd, err := ingest.PeekSegmentHeader(bs.Data)
		if err == nil && hd.Ref() != bs.Ref {
			err = fmt.Errorf("cannot accept segment: %w: header names segment %d part %d of %q", ingest.ErrCorruptSegment, hd.Seq, hd.Part, hd.NodeID)
		}
		if err != nil {
			h.m.malformed.Inc()
			rejected = append(rejected, ingest.SegmentRejection{SegmentRef: bs.Ref, Reason: ingest.RejectMalformed})
			h.cfg.Logger.Warn("rejected damaged segment", "node", bs.Ref.Node, "seq", bs.Ref.Seq, "part", bs.Ref.Part, "err", err)
			return nil
		}
		segs = append(segs, pendingSegment{ref: bs.Ref, created: hd.Created, data: bs.Data})
		return nil
	})
	if err != nil {
		h.m.batchesBad.Inc()
		h.cfg.Logger.Warn("rejected segment batch", "remote", ctx.RemoteAddr().String(), "bytes", len(body), "err", err)
		ctx.Error(err.Error()+"\n", fasthttp.StatusBadRequest)
		return
	}

	sctx, cancel := context.WithTimeout(context.Background(), h.cfg.Timeout)
	defer cancel()
	ack := ingest.ShipAck{Acked: []ingest.SegmentRef{}, Rejected: rejected}
	verdicts, errs := h.store(sctx, segs)
	var storeErr error
	left := 0
	for i, s := range segs {
		if i >= len(verdicts) || errs[i] != nil {
			if i < len(errs) && errs[i] != nil {
				storeErr = errs[i]
			}
			left++
			h.m.unacknowledged.Inc()
			continue
		}
		switch verdicts[i] {
		case StoreAcked:
			h.m.acked.Inc()
			h.m.lag.UpdateDuration(s.created)
			ack.Acked = append(ack.Acked, s.ref)
		case StoreMalformed:
			h.m.malformed.Inc()
			ack.Rejected = append(ack.Rejected, ingest.SegmentRejection{SegmentRef: s.ref, Reason: ingest.RejectMalformed})
		case StoreConflict:
			h.m.conflict.Inc()
			ack.Rejected = append(ack.Rejected, ingest.SegmentRejection{SegmentRef: s.ref, Reason: ingest.RejectConflict})
		default:
			panic(fmt.Sprintf("BUG: store verdict %d", verdicts[i]))
		}
	}
	if storeErr != nil {
		h.cfg.Logger.Error("cannot store segments", "stored", len(ack.Acked), "left", left, "err", storeErr)
		if len(ack.Acked) == 0 && len(ack.Rejected) == 0 {
			h.m.batchesFailed.Inc()
			ctx.Error("cannot store segments\n", fasthttp.StatusServiceUnavailable)
			return
		}
	}
	h.m.batchesOK.Inc()
	out, err := json.Marshal(ack)
	if err != nil {
		h.cfg.Logger.Error("cannot encode ack", "err", err)
		ctx.Error("cannot encode ack\n", fasthttp.StatusInternalServerError)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(out)
}

// store runs the batch through StoreBatch, or Store one segment at a
// time until the first error (the store is unreachable: the rest would
// fail too, and stay unanswered: not acknowledged).
func (h *storeHandler) store(ctx context.Context, segs []pendingSegment) ([]StoreVerdict, []error) {
	if h.cfg.StoreBatch != nil {
		raws := make([][]byte, len(segs))
		for i := range segs {
			raws[i] = segs[i].data
		}
		return h.cfg.StoreBatch(ctx, raws)
	}
	verdicts, errs := make([]StoreVerdict, 0, len(segs)), make([]error, 0, len(segs))
	for _, s := range segs {
		v, err := h.cfg.Store(ctx, s.data)
		verdicts, errs = append(verdicts, v), append(errs, err)
		if err != nil {
			break
		}
	}
	return verdicts, errs
}

// bearerMatches checks "Bearer <token>" in constant time.
func bearerMatches(header []byte, token string) bool {
	const scheme = "bearer "
	if token == "" || len(header) <= len(scheme) || !equalFoldASCII(header[:len(scheme)], scheme) {
		return false
	}
	v := header[len(scheme):]
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return subtle.ConstantTimeCompare(v, []byte(token)) == 1
}

func equalFoldASCII(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// errPartsNeedExternalStore refuses segment parts at the embedded
// aggregator: parts come from nodes that ship to several aggregators,
// which only an external store shared by all of them can take.
var errPartsNeedExternalStore = errors.New("segment parts come from nodes shipping to several aggregators; this aggregator's store (pebble) takes whole segments only: run one aggregator, or use --analytics-store clickhouse")
