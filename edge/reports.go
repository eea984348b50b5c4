package edge

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// Public abuse reports: POST /v1/reports, no API key.
//
//	{"url": "<short URL or code>", "reason": "phishing|malware|spam|illegal|other", "details": "..."}
//
// answers 202 {"id": "<case id>", "status": "received"}. A public,
// unauthenticated endpoint that writes to the Raft log is bounded three
// ways, so a flood grows neither the log nor the store without bound:
//
//   - per client IP: a token bucket (ReportConfig.PerIPRate, PerIPBurst);
//     every request takes a token, valid or not, so probing for codes is
//     limited too (429 rate-limited with Retry-After);
//   - per node: one bucket for all log writes of reports (GlobalRate), the
//     coalesced ones included, so many addresses together still write at
//     most that many entries/s;
//   - per code: after a report of a code is written, further reports of it
//     within Coalesce are folded in memory and written as ONE file_report
//     entry (count, reasons, first/last time, first details) when the
//     window ends (or the server shuts down). In the store they fold into
//     the code's single open case, whose size is capped
//     (store.MaxReportDetails).
//
// An unknown code answers 404 without touching the log when this replica
// has never seen it and it cannot be a fresh code still in flight.

// ReportConfig bounds the report endpoint. Zero values take the defaults.
type ReportConfig struct {
	PerIPRate  float64       // reports/s per client IP; default 1/60 (one a minute)
	PerIPBurst float64       // default 5
	GlobalRate float64       // report log writes/s of this node; default 20 (burst twice, at least 1)
	Coalesce   time.Duration // window folding repeated reports of a code; default 10s
	MaxPending int           // codes held in the window at once; default 10000
}

const (
	reportsPath       = "/v1/reports"
	maxReportBody     = 4 << 10 // bytes
	maxReportDetails  = 1000    // characters (and store.MaxReportDetailLen bytes)
	reportFlushPeriod = time.Second
	// reportShutdownFlush bounds writing the open windows at shutdown.
	reportShutdownFlush = 2 * time.Second
)

var reportFields = []string{"url", "reason", "details"}

func (c *ReportConfig) setDefaults() {
	if c.PerIPRate <= 0 {
		c.PerIPRate = 1.0 / 60
	}
	if c.PerIPBurst <= 0 {
		c.PerIPBurst = 5
	}
	if c.GlobalRate <= 0 {
		c.GlobalRate = 20
	}
	if c.Coalesce <= 0 {
		c.Coalesce = 10 * time.Second
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 10000
	}
}

// ReportFiler is what the server needs to store reports; the writer the
// node hands the server implements it (raft.Node.FileReport, through the
// disk guard). Without it /v1/reports answers 404.
type ReportFiler interface {
	FileReport(ctx context.Context, f *store.ReportFiling) (store.Report, error)
}

// reportRequest is a decoded, checked report body.
type reportRequest struct {
	Target  string // url field as sent
	Reason  store.ReportReasons
	Details string
}

// decodeReport type-checks and bounds a report body. The target is checked
// against this service's public URL by reportedCode.
func decodeReport(body []byte) (reportRequest, error) {
	if len(body) > maxReportBody {
		return reportRequest{}, fmt.Errorf("request body is %d bytes; the limit is %d", len(body), maxReportBody)
	}
	o, err := decodeObject(body, reportFields)
	if err != nil {
		return reportRequest{}, err
	}
	var req reportRequest
	var st fieldState
	if req.Target, st, err = o.str("url"); err != nil {
		return reportRequest{}, err
	} else if st != fieldSet || strings.TrimSpace(req.Target) == "" {
		return reportRequest{}, errors.New(`field "url" is required: the short URL or code being reported`)
	}
	reason, st, err := o.str("reason")
	if err != nil {
		return reportRequest{}, err
	}
	if st != fieldSet {
		return reportRequest{}, errors.New(`field "reason" is required: one of phishing, malware, spam, illegal, other`)
	}
	var ok bool
	if req.Reason, ok = store.ParseReportReason(reason); !ok {
		return reportRequest{}, fmt.Errorf(`field "reason" must be one of phishing, malware, spam, illegal, other; got %q`, truncate(reason, 40))
	}
	if req.Details, _, err = o.str("details"); err != nil {
		return reportRequest{}, err
	}
	req.Details = strings.TrimSpace(req.Details)
	if n := utf8.RuneCountInString(req.Details); n > maxReportDetails || len(req.Details) > store.MaxReportDetailLen {
		return reportRequest{}, fmt.Errorf(`field "details" is %d characters; the limit is %d characters and %d bytes`, n, maxReportDetails, store.MaxReportDetailLen)
	}
	if !utf8.ValidString(req.Details) {
		return reportRequest{}, errors.New(`field "details" is not valid UTF-8`)
	}
	return req, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// publicOrigin is the parsed public URL that reported short URLs must name.
type publicOrigin struct {
	host string // lower case, no trailing dot
	port string // "" when the public URL names none
	path string // path prefix without a trailing slash
}

func newPublicOrigin(base string) publicOrigin {
	u, err := url.Parse(base)
	if err != nil {
		return publicOrigin{}
	}
	return publicOrigin{host: strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), port: u.Port(), path: strings.TrimRight(u.Path, "/")}
}

// reportedCode returns the code a report names: a bare code, or a short
// URL of this service (http or https, with or without the scheme; query and
// fragment ignored).
func (o publicOrigin) reportedCode(target string) (string, error) {
	target = strings.TrimSpace(target)
	if len(target) > maxURLLen {
		return "", fmt.Errorf(`field "url" is %d characters; the limit is %d`, len(target), maxURLLen)
	}
	if validCodeSyntax(target) {
		return target, nil
	}
	raw := target
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	notOurs := fmt.Errorf(`field "url" must be a short URL of this service (%s/CODE) or a bare code`, o.display())
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Opaque != "" {
		return "", notOurs
	}
	if strings.TrimSuffix(strings.ToLower(u.Hostname()), ".") != o.host || o.host == "" {
		return "", notOurs
	}
	if port := u.Port(); port != o.port && !(o.port == "" && port == defaultPort(u.Scheme)) {
		return "", notOurs
	}
	rest, ok := strings.CutPrefix(u.Path, o.path+"/")
	if !ok || !validCodeSyntax(rest) {
		return "", fmt.Errorf(`field "url" names no code: want %s/CODE`, o.display())
	}
	return rest, nil
}

func (o publicOrigin) display() string {
	h := o.host
	if o.port != "" {
		h += ":" + o.port
	}
	return h + o.path
}

// reportDesk serves /v1/reports and owns the coalescing window.
type reportDesk struct {
	s      *Server
	cfg    ReportConfig
	filer  ReportFiler
	origin publicOrigin
	perIP  *limiter[clientKey]
	writes *limiter[struct{}]

	mu      sync.Mutex
	pending map[string]*pendingReport
	started bool
	stop    chan struct{}
	done    chan struct{}

	received, coalesced, written, dropped *metrics.Counter
}

// pendingReport is a code whose case id is known and whose window is open.
type pendingReport struct {
	id    uint64
	until time.Time
	f     store.ReportFiling // reports folded since the last write; Count 0 if none
}

func newReportDesk(s *Server, w Writer) *reportDesk {
	filer, _ := w.(ReportFiler)
	cfg := s.cfg.Reports
	cfg.setDefaults()
	set := s.cfg.Metrics
	return &reportDesk{
		s: s, cfg: cfg, filer: filer,
		origin:    newPublicOrigin(s.publicBase),
		perIP:     newLimiter[clientKey](cfg.PerIPRate, cfg.PerIPBurst, s.now),
		writes:    newLimiter[struct{}](cfg.GlobalRate, max(1, 2*cfg.GlobalRate), s.now),
		pending:   make(map[string]*pendingReport),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		received:  set.GetOrCreateCounter("waymark_reports_received_total"),
		coalesced: set.GetOrCreateCounter("waymark_reports_coalesced_total"),
		written:   set.GetOrCreateCounter("waymark_reports_log_writes_total"),
		dropped:   set.GetOrCreateCounter("waymark_reports_dropped_total"),
	}
}

func (d *reportDesk) serve(ctx *fasthttp.RequestCtx) {
	if d.filer == nil {
		writeProblem(ctx, probNotFound, "this node does not take reports")
		return
	}
	if !ctx.IsPost() {
		methodNotAllowed(ctx, "POST")
		return
	}
	if ok, wait := d.perIP.allow(clientOf(ctx)); !ok {
		d.s.m.rateLimited.Inc()
		secs := int((wait + time.Second - 1) / time.Second)
		writeRetryProblem(ctx, probRateLimited, "too many reports from this address; retry in "+strconv.Itoa(max(1, secs))+" s", secs)
		return
	}
	body := ctx.PostBody()
	if len(body) > maxReportBody {
		writeProblem(ctx, probTooLarge, "request body is "+strconv.Itoa(len(body))+" bytes; the limit is "+strconv.Itoa(maxReportBody))
		return
	}
	req, err := decodeReport(body)
	if err != nil {
		writeProblem(ctx, probInvalidRequest, err.Error())
		return
	}
	code, err := d.origin.reportedCode(req.Target)
	if err != nil {
		var ok bool
		if code, ok = d.s.reportedDomainCode(req.Target); !ok {
			writeProblem(ctx, probInvalidRequest, err.Error())
			return
		}
	}
	d.received.Inc()
	var l store.Link
	found, err := d.s.st.GetLink([]byte(code), &l)
	if err != nil {
		d.s.log.Error("cannot read link for a report", "code", code, "err", err)
		writeProblem(ctx, probInternal, "the report could not be checked")
		return
	}
	if !found && (d.s.maybeFresh == nil || !d.s.maybeFresh([]byte(code))) {
		writeProblem(ctx, probNotFound, "there is no short link "+code)
		return
	}
	now := d.s.now()
	f := store.ReportFiling{Code: code, Reasons: req.Reason, Count: 1, FirstAt: now.UnixMilli(), LastAt: now.UnixMilli()}
	if req.Details != "" {
		f.Details = []string{req.Details}
	}
	if id, ok := d.fold(&f, now); ok {
		d.coalesced.Inc()
		writeReportAccepted(ctx, id)
		return
	}
	if ok, wait := d.writes.allow(struct{}{}); !ok {
		d.s.m.rateLimited.Inc()
		secs := int((wait + time.Second - 1) / time.Second)
		writeRetryProblem(ctx, probRateLimited, "this node is taking too many reports right now; retry in "+strconv.Itoa(max(1, secs))+" s", secs)
		return
	}
	wctx, cancel := d.s.writeContext(ctx)
	defer cancel()
	rep, err := d.filer.FileReport(wctx, &f)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(ctx, probNotFound, "there is no short link "+code)
		return
	case err != nil:
		d.s.writeWriteError(ctx, "report", err)
		return
	}
	d.written.Inc()
	d.opened(code, rep.ID, now)
	writeReportAccepted(ctx, rep.ID)
}

func writeReportAccepted(ctx *fasthttp.RequestCtx, id uint64) {
	writeJSON(ctx, fasthttp.StatusAccepted, []byte(`{"id":"`+strconv.FormatUint(id, 10)+`","status":"received"}`+"\n"))
}

// fold adds f to its code's open window and returns the case id, or
// reports false when the report must be written now.
func (d *reportDesk) fold(f *store.ReportFiling, now time.Time) (uint64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pending[f.Code]
	if p == nil || !now.Before(p.until) {
		return 0, false
	}
	if p.f.Count == 0 {
		p.f = store.ReportFiling{Code: f.Code, FirstAt: f.FirstAt}
	}
	p.f.Count++
	p.f.Reasons |= f.Reasons
	p.f.LastAt = max(p.f.LastAt, f.LastAt)
	for _, det := range f.Details {
		if len(p.f.Details) < store.MaxReportDetails {
			p.f.Details = append(p.f.Details, det)
		}
	}
	return p.id, true
}

// refold puts a filing the flusher could not write yet back in its window.
func (d *reportDesk) refold(f *store.ReportFiling) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pending[f.Code]
	if p == nil {
		d.dropped.Add(int(f.Count))
		return
	}
	if p.f.Count == 0 {
		p.f = *f
		return
	}
	p.f.Count += f.Count
	p.f.Reasons |= f.Reasons
	p.f.FirstAt = min(p.f.FirstAt, f.FirstAt)
	p.f.LastAt = max(p.f.LastAt, f.LastAt)
	details := append(append([]string(nil), f.Details...), p.f.Details...)
	p.f.Details = details[:min(len(details), store.MaxReportDetails)]
}

// opened starts the window of a code just written (if there is room).
func (d *reportDesk) opened(code string, id uint64, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.pending[code]; !ok && len(d.pending) >= d.cfg.MaxPending {
		return // no window: later reports of it are written one by one, within GlobalRate
	}
	d.pending[code] = &pendingReport{id: id, until: now.Add(d.cfg.Coalesce)}
	if !d.started {
		d.started = true
		go d.flushLoop()
	}
}

// flushLoop writes the windows that ended, one entry per code.
func (d *reportDesk) flushLoop() {
	defer close(d.done)
	t := time.NewTicker(min(reportFlushPeriod, d.cfg.Coalesce))
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.flush(context.Background(), d.s.now())
		}
	}
}

// flush writes every ended window that folded reports and keeps it open
// for another period; an ended window with nothing folded is closed.
func (d *reportDesk) flush(parent context.Context, now time.Time) {
	var due []store.ReportFiling
	d.mu.Lock()
	for code, p := range d.pending {
		if now.Before(p.until) {
			continue
		}
		if p.f.Count == 0 {
			delete(d.pending, code)
			continue
		}
		due = append(due, p.f)
		p.f = store.ReportFiling{}
		p.until = now.Add(d.cfg.Coalesce)
	}
	d.mu.Unlock()
	for i := range due {
		f := &due[i]
		if ok, _ := d.writes.allow(struct{}{}); !ok {
			d.refold(f) // the node's write budget is spent: next pass
			continue
		}
		ctx, cancel := context.WithTimeout(parent, d.s.cfg.ApplyTimeout)
		rep, err := d.filer.FileReport(ctx, f)
		cancel()
		if err != nil {
			// Counts are advisory: the first report of the window is in
			// the case already; the folded ones are lost, and counted.
			d.dropped.Add(int(f.Count))
			d.s.log.Warn("cannot write coalesced reports", "code", f.Code, "count", f.Count, "err", err)
			d.mu.Lock()
			delete(d.pending, f.Code)
			d.mu.Unlock()
			continue
		}
		d.written.Inc()
		d.mu.Lock()
		if p := d.pending[f.Code]; p != nil {
			p.id = rep.ID // a new case if the old one was resolved meanwhile
		}
		d.mu.Unlock()
	}
}

// close stops the flusher and writes what open windows folded, so a
// clean shutdown loses no counts (a crash loses at most one window's).
func (d *reportDesk) close() {
	d.mu.Lock()
	started := d.started
	d.started = true // no flusher starts after close
	d.mu.Unlock()
	select {
	case <-d.stop:
		return
	default:
		close(d.stop)
	}
	if started {
		<-d.done
		// Bounded as a whole: a node that cannot reach its leader while
		// stopping drops the counts rather than hold the shutdown.
		ctx, cancel := context.WithTimeout(context.Background(), reportShutdownFlush)
		d.flush(ctx, d.s.now().Add(d.cfg.Coalesce))
		cancel()
	}
}
