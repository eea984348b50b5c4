package node

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/store"
)

// Webhook delivery (issue 13 point 5; design in node/WEBHOOKS.md). The
// FSM queues link events in the replicated outbox (store/webhook.go); the
// Raft leader's deliverer here sends them, signed, and acks them through
// the log (raft record_deliveries), so a new leader sends whatever the
// old one had not acked. Clicks are fed from the aggregator and sent from
// its own outbox (webhookclicks.go).

// WebhookConfig holds the webhook flags.
type WebhookConfig struct {
	AllowPrivate bool          // --webhook-allow-private
	RetryWindow  time.Duration // --webhook-retry-window: give up this long after the event
	RetryBase    time.Duration // --webhook-retry-base: the first retry's wait; doubles up to maxRetryWait
	ClickBatch   int           // --webhook-click-batch: clicks per link.clicked delivery at most
}

func (c *WebhookConfig) flags(fs *flag.FlagSet) {
	fs.BoolVar(&c.AllowPrivate, "webhook-allow-private", false, "let webhooks deliver to private, loopback and link-local addresses (tests, closed networks)")
	fs.DurationVar(&c.RetryWindow, "webhook-retry-window", 24*time.Hour, "a webhook delivery that keeps failing is retried this long after its event, then dropped")
	fs.DurationVar(&c.RetryBase, "webhook-retry-base", time.Second, "wait before the first webhook retry; it doubles (with jitter) up to 1h")
	fs.IntVar(&c.ClickBatch, "webhook-click-batch", 100, "clicks one link.clicked delivery carries at most (one delivery per second per webhook)")
}

func (c *WebhookConfig) setDefaults() {
	if c.RetryWindow <= 0 {
		c.RetryWindow = 24 * time.Hour
	}
	if c.RetryBase <= 0 {
		c.RetryBase = time.Second
	}
	if c.ClickBatch <= 0 {
		c.ClickBatch = 100
	}
}

const (
	maxRetryWait       = time.Hour
	webhookTimeout     = 10 * time.Second
	webhookParallel    = 8
	webhookRoundEvery  = 200 * time.Millisecond
	webhookMaxPerRound = 256 // sends per round (one ack entry)
	webhookUserAgent   = "Waymark-Webhooks/" + Version
)

// webhookMetrics are the waymark_webhook_* series.
type webhookMetrics struct {
	delivered, failed, dropped *metrics.Counter
	retries                    *metrics.Counter
	depth, lag                 *metrics.Gauge
	clickDepth                 *metrics.Gauge
	clicksQueued, clicksSent   *metrics.Counter
	clicksDropped              *metrics.Counter
	mu                         sync.Mutex
	depthV, lagV, clickDepthV  float64
}

func newWebhookMetrics(s *metrics.Set) *webhookMetrics {
	const p = "waymark_webhook_"
	m := &webhookMetrics{
		delivered:     s.GetOrCreateCounter(p + `deliveries_total{outcome="delivered"}`),
		failed:        s.GetOrCreateCounter(p + `deliveries_total{outcome="failed"}`),
		dropped:       s.GetOrCreateCounter(p + `deliveries_total{outcome="dropped"}`),
		retries:       s.GetOrCreateCounter(p + "retries_total"),
		clicksQueued:  s.GetOrCreateCounter(p + "clicks_queued_total"),
		clicksSent:    s.GetOrCreateCounter(p + "clicks_delivered_total"),
		clicksDropped: s.GetOrCreateCounter(p + "clicks_dropped_total"),
	}
	m.depth = s.GetOrCreateGauge(p+"queue_depth", func() float64 { m.mu.Lock(); defer m.mu.Unlock(); return m.depthV })
	m.lag = s.GetOrCreateGauge(p+"lag_seconds", func() float64 { m.mu.Lock(); defer m.mu.Unlock(); return m.lagV })
	m.clickDepth = s.GetOrCreateGauge(p+"click_queue_depth", func() float64 { m.mu.Lock(); defer m.mu.Unlock(); return m.clickDepthV })
	return m
}

func (m *webhookMetrics) set(v *float64, x float64) { m.mu.Lock(); *v = x; m.mu.Unlock() }

func (m *webhookMetrics) count(o store.DeliveryOutcome) {
	switch o {
	case store.DeliveryDelivered:
		m.delivered.Inc()
	case store.DeliveryFailed:
		m.failed.Inc()
	case store.DeliveryDropped:
		m.dropped.Inc()
	}
}

// CreateWebhook and DeleteWebhook make the node's writer an
// edge.WebhookWriter, behind the disk guard like every write.
func (w guardedWriter) CreateWebhook(ctx context.Context, wh *store.Webhook) (store.Webhook, error) {
	if err := w.g.writable(); err != nil {
		return store.Webhook{}, err
	}
	r, ok := w.Writer.(edge.WebhookWriter)
	if !ok {
		return store.Webhook{}, fmt.Errorf("cannot create webhook: %w", store.ErrNoLeader)
	}
	got, err := r.CreateWebhook(ctx, wh)
	w.g.noteErr(err)
	return got, err
}

func (w guardedWriter) DeleteWebhook(ctx context.Context, owner, id string) error {
	if err := w.g.writable(); err != nil {
		return err
	}
	r, ok := w.Writer.(edge.WebhookWriter)
	if !ok {
		return fmt.Errorf("cannot delete webhook: %w", store.ErrNoLeader)
	}
	err := r.DeleteWebhook(ctx, owner, id)
	w.g.noteErr(err)
	return err
}

// SignWebhook returns the Waymark-Signature value for body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed by the secret>".
func SignWebhook(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// errPrivateAddr refuses a dial to a non-public address.
var errPrivateAddr = errors.New("webhook address is not public")

// webhookClient sends deliveries. Unless private addresses are allowed,
// its dialer checks the address it is about to connect to (after DNS), so
// a name that resolved to a public address at create time and to a
// private one now (DNS rebinding) is refused. It follows no redirects.
func webhookClient(allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if !allowPrivate {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !edge.WebhookAddrPublic(ap.Addr()) {
				return fmt.Errorf("cannot dial %s: %w", address, errPrivateAddr)
			}
			return nil
		}
	}
	return &http.Client{
		Timeout: webhookTimeout,
		Transport: &http.Transport{
			Proxy: nil, DialContext: d.DialContext, MaxIdleConnsPerHost: 4,
			IdleConnTimeout: 60 * time.Second, TLSHandshakeTimeout: 5 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// sendResult is one attempt's answer.
type sendResult struct {
	status  int
	latency time.Duration
	err     error
}

func (r sendResult) ok() bool { return r.err == nil && r.status >= 200 && r.status < 300 }

func (r sendResult) errText() string {
	switch {
	case r.err != nil:
		s := r.err.Error()
		if len(s) > store.MaxDeliveryError {
			s = s[:store.MaxDeliveryError]
		}
		return s
	case !r.ok():
		return "HTTP " + strconv.Itoa(r.status)
	}
	return ""
}

// sendWebhook posts one signed delivery.
func sendWebhook(ctx context.Context, c *http.Client, url, secret, eventID, eventType string, body []byte) sendResult {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return sendResult{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", webhookUserAgent)
	req.Header.Set("Waymark-Event-Id", eventID)
	req.Header.Set("Waymark-Event-Type", eventType)
	req.Header.Set("Waymark-Signature", SignWebhook(secret, time.Now(), body))
	resp, err := c.Do(req)
	if err != nil {
		return sendResult{err: err, latency: time.Since(start)}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return sendResult{status: resp.StatusCode, latency: time.Since(start)}
}

// retryWait is the wait after the attempt-th failure: base·2^(attempt-1),
// at most maxRetryWait, then jittered to between half and all of it.
func retryWait(base time.Duration, attempt uint64) time.Duration {
	w := base
	for i := uint64(1); i < attempt && w < maxRetryWait; i++ {
		w *= 2
	}
	w = min(w, maxRetryWait)
	return w/2 + rand.N(w/2+1)
}

// retryState is the memory of a webhook that fails: how often in a row,
// and when to try again. It is not replicated: a new leader starts every
// webhook at attempt 1 and sends at once.
type retryState struct {
	attempt uint64
	next    time.Time
}

// webhookDeliverer runs on every node that holds a replica and acts only
// while it is the Raft leader. Backoff is per webhook, not per event: a
// receiver that fails gets one probe (its oldest waiting event) per
// backoff step, so a long outage costs a few attempts, not one per event
// per step; once a probe succeeds the rest follow.
type webhookDeliverer struct {
	n      *Node
	cfg    WebhookConfig
	m      *webhookMetrics
	client *http.Client
	retry  map[string]retryState // owner 0x00 webhook id -> state
	swept  time.Time             // last walk that dropped expired events of failing webhooks
}

func (n *Node) startWebhooks(ctx context.Context) {
	cfg := n.cfg.Webhooks
	cfg.setDefaults()
	m := n.webhookMetrics()
	d := &webhookDeliverer{n: n, cfg: cfg, m: m, client: webhookClient(cfg.AllowPrivate), retry: make(map[string]retryState)}
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		d.loop(ctx)
	}()
	if n.clicks != nil { // an aggregator, embedded or ClickHouse
		if err := n.startClickWebhooks(ctx, cfg, m); err != nil {
			n.log.Error("cannot start the link.clicked webhook outbox; clicks are not delivered", "err", err)
		}
	}
}

func (d *webhookDeliverer) loop(ctx context.Context) {
	t := time.NewTicker(webhookRoundEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !d.n.raft.IsLeader() {
			clear(d.retry) // a later leadership starts afresh
			d.m.set(&d.m.depthV, 0)
			d.m.set(&d.m.lagV, 0) // the leader's gauges say it
			continue
		}
		d.round(ctx)
	}
}

// Per round: at most webhookPerHook events of a healthy webhook, one
// probe of a failing one.
const webhookPerHook = 32

// round sends the due entries (up to webhookMaxPerRound) and acks them in
// one record_deliveries entry.
func (d *webhookDeliverer) round(ctx context.Context) {
	srv := d.n.edge.Load()
	if srv == nil {
		return
	}
	now := time.Now()
	// Once a minute (sooner for a short window) the walk also decodes the events of failing webhooks,
	// to drop the ones past their retry window without sending them.
	sweep := now.Sub(d.swept) >= min(time.Minute, d.cfg.RetryWindow/4)
	if sweep {
		d.swept = now
	}
	window := d.cfg.RetryWindow
	taken := make(map[string]int)
	hooks := make(map[string]*store.Webhook)
	seen := make(map[string]struct{})
	var due, expired []store.OutboxEntry
	var oldest int64
	first := true
	depth, err := d.n.store.ScanOutbox(func(owner, id string, _ uint64) bool {
		k := owner + "\x00" + id
		seen[k] = struct{}{}
		if first {
			return true // for the lag
		}
		st := d.retry[k]
		if sweep && st.attempt > 0 {
			return true
		}
		limit := webhookPerHook
		if st.attempt > 0 {
			limit = 1
		}
		return !now.Before(st.next) && taken[k] < limit && len(due) < webhookMaxPerRound
	}, func(e *store.OutboxEntry) bool {
		if first {
			first, oldest = false, e.CreatedAt
		}
		k := e.Owner + "\x00" + e.WebhookID
		st := d.retry[k]
		limit := webhookPerHook
		if st.attempt > 0 {
			limit = 1
		}
		switch {
		case st.attempt > 0 && now.Sub(time.UnixMilli(e.CreatedAt)) >= window:
			expired = append(expired, *e)
		case !now.Before(st.next) && taken[k] < limit && len(due) < webhookMaxPerRound:
			taken[k]++
			due = append(due, *e)
		}
		return len(expired) < webhookMaxPerRound
	})
	if err != nil {
		d.n.log.Warn("cannot read the webhook outbox", "err", err)
		return
	}
	d.m.set(&d.m.depthV, float64(depth))
	lag := 0.0
	if depth > 0 {
		lag = max(0, now.Sub(time.UnixMilli(oldest)).Seconds())
	}
	d.m.set(&d.m.lagV, lag)
	for k := range d.retry { // nothing left to send (acked, by us or an earlier leader)
		if _, ok := seen[k]; !ok {
			delete(d.retry, k)
		}
	}
	if len(due) == 0 && len(expired) == 0 {
		return
	}
	for _, e := range append(due, expired...) {
		hk := e.Owner + "\x00" + e.WebhookID
		if _, ok := hooks[hk]; ok {
			continue
		}
		w, found, err := d.n.store.Webhook(e.Owner, e.WebhookID)
		if err != nil {
			d.n.log.Warn("cannot read webhook", "id", e.WebhookID, "err", err)
			return
		}
		if found {
			hooks[hk] = &w
		} else {
			hooks[hk] = nil
		}
	}
	attempts := make([]store.DeliveryAttempt, len(due), len(due)+len(expired))
	sem := make(chan struct{}, webhookParallel)
	var wg sync.WaitGroup
	for i := range due {
		e := &due[i]
		st := d.retry[e.Owner+"\x00"+e.WebhookID]
		a := &attempts[i]
		*a = store.DeliveryAttempt{Owner: e.Owner, WebhookID: e.WebhookID, Index: e.Index, Seq: e.Seq, EventID: e.EventID(),
			Type: e.Type, At: now.UnixMilli(), Attempt: st.attempt + 1}
		w := hooks[e.Owner+"\x00"+e.WebhookID]
		if w == nil { // deleted: the entry leaves the outbox, nothing is logged
			a.Outcome, a.Error = store.DeliveryDropped, "webhook deleted"
			continue
		}
		if st.attempt > 0 {
			d.m.retries.Inc()
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r := sendWebhook(ctx, d.client, w.URL, w.Secret, a.EventID, e.Type.String(), srv.WebhookEventBody(e))
			a.Status, a.LatencyUS, a.Error = r.status, r.latency.Microseconds(), r.errText()
			switch {
			case r.ok():
				a.Outcome = store.DeliveryDelivered
			case time.Since(time.UnixMilli(e.CreatedAt)) >= window:
				a.Outcome = store.DeliveryDropped
			default:
				a.Outcome = store.DeliveryFailed
			}
		}()
	}
	wg.Wait()
	failed := make(map[string]uint64)
	for i := range attempts {
		a := &attempts[i]
		hk := a.Owner + "\x00" + a.WebhookID
		d.m.count(a.Outcome)
		switch a.Outcome {
		case store.DeliveryFailed:
			failed[hk] = max(failed[hk], a.Attempt)
		case store.DeliveryDelivered:
			if _, bad := failed[hk]; !bad {
				delete(d.retry, hk)
			}
		case store.DeliveryDropped:
			if a.Error != "webhook deleted" {
				d.n.log.Warn("webhook delivery dropped after its retry window", "webhook", a.WebhookID, "event", a.EventID, "attempts", a.Attempt, "err", a.Error)
			}
		}
	}
	for hk, n := range failed {
		d.retry[hk] = retryState{attempt: n, next: time.Now().Add(retryWait(d.cfg.RetryBase, n))}
	}
	for i := range expired {
		e := &expired[i]
		st := d.retry[e.Owner+"\x00"+e.WebhookID]
		a := store.DeliveryAttempt{Owner: e.Owner, WebhookID: e.WebhookID, Index: e.Index, Seq: e.Seq, EventID: e.EventID(),
			Type: e.Type, At: now.UnixMilli(), Attempt: st.attempt, Outcome: store.DeliveryDropped,
			Error: "retry window over while the webhook kept failing"}
		if hooks[e.Owner+"\x00"+e.WebhookID] == nil {
			a.Error = "webhook deleted"
		} else {
			d.m.count(store.DeliveryDropped)
		}
		attempts = append(attempts, a)
	}
	// One entry acks the round. If it fails the entries stay in the
	// outbox and are sent again (receivers dedup by Waymark-Event-Id).
	wctx, cancel := context.WithTimeout(ctx, d.n.cfg.ApplyTimeout)
	defer cancel()
	if err := d.n.raft.RecordDeliveries(wctx, attempts); err != nil {
		d.n.log.Warn("cannot record webhook deliveries; they are sent again", "err", err)
	}
}
