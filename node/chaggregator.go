package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/rollup"
	"github.com/waymark/waymark/rollup/clickhouse"
)

// chAggregator is the aggregator role with --analytics-store clickhouse:
// segments received on the usual endpoint go into ClickHouse (exactly
// once: rollup/clickhouse/DESIGN.md) and the stats APIs answer from it,
// as do `waymark events count|tail` (aggregator.go). What the embedded
// aggregator does with a segment's clicks happens around each store:
// link.clicked webhooks (chclicks.go) and click limits (chlimits.go).
// Any number of aggregators may share one ClickHouse. The schema is
// migrated in the background at start, retried until ClickHouse answers;
// until then, and while a probe fails, the node is not ready and
// batches get 503 (the edges keep their segments and retry).
type chAggregator struct {
	n       *Node
	client  *clickhouse.Client
	backend *clickhouse.Backend
	handler fasthttp.RequestHandler
	limits  *chLimits // click limits (chlimits.go)
	m       chMetrics

	migrated  atomic.Bool
	reachable atomic.Bool
	mu        sync.Mutex
	lastErr   string

	cancel context.CancelFunc
	done   chan struct{}
	bg     sync.WaitGroup // run, limitLoop and the materializer
}

// chMetrics are the node's own waymark_clickhouse_ series.
type chMetrics struct {
	clicksTakenBack *metrics.Counter // link.clicked records taken back (segment stored before)
}

// chProbeInterval is how often a migrated aggregator checks that
// ClickHouse answers (readiness); chRetryMax bounds the wait between
// migration attempts.
const (
	chProbeInterval     = 2 * time.Second
	chRetryMax          = 10 * time.Second
	chRetentionInterval = time.Hour
	// chMaterializeInterval: how often closed hours are written as rows;
	// questions read the raw events past the last one written.
	chMaterializeInterval = 30 * time.Second
)

func (n *Node) openClickHouse() error {
	pass := ""
	if n.cfg.ClickHousePasswordFile != "" {
		var err error
		if pass, err = clickhouse.ReadPasswordFile(n.cfg.ClickHousePasswordFile); err != nil {
			return err
		}
	}
	client, err := clickhouse.New(clickhouse.Config{
		URL: n.cfg.ClickHouseURL, Database: n.cfg.ClickHouseDatabase,
		User: n.cfg.ClickHouseUser, Password: pass, Metrics: n.metrics,
	})
	if err != nil {
		return fmt.Errorf("cannot open clickhouse: %w", err)
	}
	// link.clicked webhooks: the same outbox as the embedded aggregator's
	// (webhookclicks.go), fed before each segment is stored (chclicks.go).
	if err := n.openClickOutbox(); err != nil {
		return err
	}
	ch := &chAggregator{n: n, client: client,
		backend: clickhouse.NewBackend(client, clickhouse.BackendConfig{Retention: n.cfg.Retention, Lateness: n.cfg.ClickHouseLateness, MarkSettle: n.cfg.ClickHouseMarkSettle}),
		limits:  newCHLimits(n.metrics), done: make(chan struct{}),
		m: chMetrics{clicksTakenBack: n.metrics.GetOrCreateCounter("waymark_clickhouse_webhook_clicks_taken_back_total")}}
	ch.handler = rollup.StoreHandler(rollup.StoreHandlerConfig{
		Token:      n.internalToken,
		Store:      ch.store,
		StoreBatch: ch.storeBatch,
		Ready:      ch.readyErr,
		Logger:     n.log.With("component", "clickhouse"),
		Metrics:    n.metrics,
	})
	n.metrics.GetOrCreateGauge("waymark_clickhouse_reachable", func() float64 {
		if ch.migrated.Load() && ch.reachable.Load() {
			return 1
		}
		return 0
	})
	ctx, cancel := context.WithCancel(context.Background())
	ch.cancel = cancel
	ch.bg.Add(2)
	go func() { defer ch.bg.Done(); ch.run(ctx, n) }()
	go func() { defer ch.bg.Done(); ch.limitLoop(ctx) }()
	go func() { ch.bg.Wait(); close(ch.done) }()
	n.ch = ch
	return nil
}

// run migrates (retrying with a growing wait), then probes ClickHouse
// and applies --retention (dropping whole raw days) once an hour.
func (ch *chAggregator) run(ctx context.Context, n *Node) {
	log := n.log.With("component", "clickhouse")
	attempts := n.metrics.GetOrCreateCounter("waymark_clickhouse_migrate_attempts_total")
	wait := 250 * time.Millisecond
	for ctx.Err() == nil {
		attempts.Inc()
		mctx, cancel := context.WithTimeout(ctx, time.Minute)
		applied, err := ch.client.Migrate(mctx)
		cancel()
		if err == nil {
			ch.migrated.Store(true)
			ch.reachable.Store(true)
			ch.setErr("")
			log.Info("clickhouse schema current", "url", n.cfg.ClickHouseURL, "database", ch.client.Database(), "applied", fmt.Sprint(applied))
			// Closed hours become site and link rows (rollup/clickhouse
			// DESIGN.md, "Site rows"); every aggregator runs it, and one
			// finds clean what another wrote.
			ch.bg.Add(1)
			go func() {
				defer ch.bg.Done()
				ch.backend.MaterializeLoop(ctx, chMaterializeInterval, func(err error) {
					log.Warn("cannot materialize closed hours in clickhouse; questions read raw events past the last written hour until it can", "err", err)
				})
			}()
			break
		}
		ch.setErr(err.Error())
		if errors.Is(err, clickhouse.ErrSchemaNewer) {
			log.Error("clickhouse schema is newer than this binary; not storing anything (upgrade this node)", "err", err)
		} else {
			log.Warn("cannot migrate the clickhouse schema yet; retrying", "err", err, "retry_in", wait)
		}
		if sleepCtx(ctx, wait) != nil {
			return
		}
		wait = min(wait*2, chRetryMax)
	}
	t := time.NewTicker(chProbeInterval)
	defer t.Stop()
	var retained time.Time
	for {
		if time.Since(retained) >= chRetentionInterval && ch.reachable.Load() {
			// Every aggregator runs it; a second run drops nothing more.
			rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			days, err := ch.backend.ApplyRetention(rctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				log.Warn("cannot apply retention in clickhouse; will try again", "err", err)
			} else if len(days) > 0 {
				log.Info("retention dropped raw days in clickhouse", "days", fmt.Sprint(days), "retention", n.cfg.Retention)
			}
			retained = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, chProbeInterval)
		_, err := ch.client.Query(pctx, "SELECT 1")
		cancel()
		if ctx.Err() != nil {
			return
		}
		was := ch.reachable.Swap(err == nil)
		if err != nil {
			ch.setErr(err.Error())
			if was {
				log.Warn("clickhouse does not answer; not ready, batches refused until it does", "err", err)
			}
		} else if !was {
			ch.setErr("")
			log.Info("clickhouse answers again")
		}
	}
}

func (ch *chAggregator) setErr(s string) {
	ch.mu.Lock()
	ch.lastErr = s
	ch.mu.Unlock()
}

// readyErr is nil when ClickHouse is migrated and answered the last probe.
func (ch *chAggregator) readyErr() error {
	ch.mu.Lock()
	last := ch.lastErr
	ch.mu.Unlock()
	switch {
	case !ch.migrated.Load():
		return fmt.Errorf("clickhouse schema not migrated yet: %s", last)
	case !ch.reachable.Load():
		return fmt.Errorf("clickhouse does not answer: %s", last)
	}
	return nil
}

// store is the receiver's store: ClickHouse's verdict on one segment
// (its clicks fed to link.clicked and the click limits on the way:
// chclicks.go). An error that is neither a conflict nor damage leaves it
// unacknowledged.
func (ch *chAggregator) store(ctx context.Context, raw []byte) (rollup.StoreVerdict, error) {
	_, err := ch.storeWithClicks(ctx, raw)
	return storeVerdict(err)
}

// storeBatch is store for a whole shipped batch, with one insert.
func (ch *chAggregator) storeBatch(ctx context.Context, raws [][]byte) ([]rollup.StoreVerdict, []error) {
	_, errs := ch.storeBatchWithClicks(ctx, raws)
	verdicts := make([]rollup.StoreVerdict, len(raws))
	for i, err := range errs {
		verdicts[i], errs[i] = storeVerdict(err)
	}
	return verdicts, errs
}

// storeVerdict is the receiver's verdict on a StoreSegment error.
func storeVerdict(err error) (rollup.StoreVerdict, error) {
	switch {
	case err == nil:
		return rollup.StoreAcked, nil
	case errors.Is(err, clickhouse.ErrConflict):
		return rollup.StoreConflict, nil
	case errors.Is(err, ingest.ErrCorruptSegment):
		return rollup.StoreMalformed, nil
	}
	return 0, err
}

// isRefusal is a StoreSegment error that means the segment is never
// stored as sent (a conflicting identity, damaged bytes).
func isRefusal(err error) bool {
	return errors.Is(err, clickhouse.ErrConflict) || errors.Is(err, ingest.ErrCorruptSegment)
}

// healthCheck is the readiness line of a ClickHouse aggregator.
func (ch *chAggregator) healthCheck() HealthCheck {
	c := HealthCheck{Name: "clickhouse", State: checkPass, Readiness: true, Detail: "migrated; answers"}
	if err := ch.readyErr(); err != nil {
		c.State, c.Detail = checkFail, err.Error()
	}
	return c
}

// close stops the migrate/probe/retention loop and the click-limit
// check, then the backend, then
// drops the connections: the reverse of openClickHouse. The receiver
// stopped before (the public listener shuts first).
func (ch *chAggregator) close() error {
	ch.cancel()
	<-ch.done
	err := ch.backend.Close()
	ch.client.Close()
	return err
}
