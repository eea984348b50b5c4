package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/store"
)

// link.clicked webhooks (issue 13 point 5). The aggregator hands each
// apply's clicks to queueClicks before it commits them (rollup
// clickhook.go), never the redirect path. queueClicks writes one record
// per click and webhook into this node's own Pebble database
// (DATA_DIR/webhook-clicks), synced, so a restart loses none; the sender
// posts at most one batch of up to --webhook-click-batch clicks per
// webhook per second and deletes the batch once the receiver answered
// 2xx. Keys:
//
//	q owner 0x00 webhook 0x00 seq(be64) -> click JSON object
//	n                                   -> next seq (be64)

var errClickOutboxClosed = errors.New("click webhook outbox closed")

// clickOutbox is the aggregator's durable queue of clicks for webhooks.
type clickOutbox struct {
	mu     sync.Mutex // guards db against Close, and next
	db     *pebble.DB
	closed bool
	next   uint64
}

// ClickView is one click as a link.clicked delivery carries it.
type ClickView struct {
	ID       string `json:"id"` // the click event's id, for dedup
	Code     string `json:"code"`
	Domain   string `json:"domain,omitempty"`
	At       string `json:"at"`
	Country  string `json:"country,omitempty"`
	Device   string `json:"device,omitempty"`
	Browser  string `json:"browser,omitempty"`
	OS       string `json:"os,omitempty"`
	Referrer string `json:"referrer_host,omitempty"`
	Bot      bool   `json:"bot"`
}

func (n *Node) openClickOutbox() error {
	dir := filepath.Join(n.cfg.DataDir, "webhook-clicks")
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		return fmt.Errorf("cannot open the click webhook outbox %q: %w", dir, err)
	}
	o := &clickOutbox{db: db}
	v, closer, err := db.Get([]byte("n"))
	switch {
	case err == nil:
		if len(v) == 8 {
			o.next = binary.BigEndian.Uint64(v)
		}
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		db.Close()
		return fmt.Errorf("cannot read the click webhook outbox: %w", err)
	}
	n.clicks = o
	return nil
}

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("BUG: pebble: "+format, args...))
}

func (o *clickOutbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.closed = true
		o.db.Close()
	}
}

func clickPrefix(owner, id string) []byte {
	k := make([]byte, 0, 3+len(owner)+len(id))
	k = append(k, 'q')
	k = append(k, owner...)
	k = append(k, 0)
	k = append(k, id...)
	return append(k, 0)
}

// queueClicks is rollup's OnStoredClicks: it stores, synced, a record for
// every click whose link's owner has a link.clicked webhook.
func (n *Node) queueClicks(evs []*ingest.Event) error {
	_, err := n.queueClickKeys(evs)
	return err
}

// queueClickKeys is queueClicks that returns the keys of the records it
// stored (none when no webhook wants the clicks), so that a ClickHouse
// aggregator can take them back when the segment turns out stored
// already (chclicks.go).
func (n *Node) queueClickKeys(evs []*ingest.Event) ([][]byte, error) {
	o := n.clicks
	if o == nil {
		return nil, nil
	}
	has, err := n.store.AnyWebhooks()
	if err != nil || !has {
		return nil, err
	}
	hooks := make(map[string][]store.Webhook) // owner -> webhooks that want clicks
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, errClickOutboxClosed
	}
	var keys [][]byte
	b := o.db.NewBatch()
	defer b.Close()
	next, queued := o.next, 0
	for _, ev := range evs {
		var l store.Link
		found, err := n.store.GetLink([]byte(ev.Code), &l)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		hs, ok := hooks[l.Owner]
		if !ok {
			all, err := n.store.Webhooks(l.Owner)
			if err != nil {
				return nil, err
			}
			for _, w := range all {
				if w.Events&store.EventLinkClicked != 0 {
					hs = append(hs, w)
				}
			}
			hooks[l.Owner] = hs
		}
		if len(hs) == 0 {
			continue
		}
		domain, code := store.SplitLinkID(ev.Code)
		body, err := json.Marshal(ClickView{ID: hex.EncodeToString(ev.ID[:]), Code: code, Domain: domain,
			At: time.UnixMilli(ev.Time).UTC().Format("2006-01-02T15:04:05.999Z07:00"), Country: ev.Country, Device: ev.Device,
			Browser: ev.Browser, OS: ev.OS, Referrer: ev.ReferrerHost, Bot: ev.Bot()})
		if err != nil {
			return nil, err
		}
		for _, w := range hs {
			k := binary.BigEndian.AppendUint64(clickPrefix(w.Owner, w.ID), next)
			next++
			if err := b.Set(k, body, nil); err != nil {
				return nil, err
			}
			keys = append(keys, k)
			queued++
		}
	}
	if queued == 0 {
		return nil, nil
	}
	if err := b.Set([]byte("n"), binary.BigEndian.AppendUint64(nil, next), nil); err != nil {
		return nil, err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return nil, fmt.Errorf("cannot store clicks for webhooks: %w", err)
	}
	o.next = next
	n.webhookMetrics().clicksQueued.Add(queued)
	return keys, nil
}

// webhookMetrics returns the node's webhook metrics (one set per node).
func (n *Node) webhookMetrics() *webhookMetrics {
	n.whOnce.Do(func() { n.whMetrics = newWebhookMetrics(n.metrics) })
	return n.whMetrics
}

// clickBatch is the head of one webhook's queue.
type clickBatch struct {
	owner, id string
	keys      [][]byte
	bodies    [][]byte
	firstSeq  uint64
}

// heads reads the first max records of every webhook's queue.
func (o *clickOutbox) heads(max int) ([]*clickBatch, int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, 0, errClickOutboxClosed
	}
	it, err := o.db.NewIter(&pebble.IterOptions{LowerBound: []byte("q"), UpperBound: []byte("r")})
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	var out []*clickBatch
	var cur *clickBatch
	depth := 0
	for ok := it.First(); ok; ok = it.Next() {
		depth++
		k := it.Key()
		if len(k) < 10 {
			continue
		}
		owner, rest, ok1 := strings.Cut(string(k[1:len(k)-8]), "\x00")
		id, _, ok2 := strings.Cut(rest, "\x00")
		if !ok1 || !ok2 {
			continue
		}
		if cur == nil || cur.owner != owner || cur.id != id {
			cur = &clickBatch{owner: owner, id: id, firstSeq: binary.BigEndian.Uint64(k[len(k)-8:])}
			out = append(out, cur)
		}
		if len(cur.keys) < max {
			cur.keys = append(cur.keys, append([]byte(nil), k...))
			cur.bodies = append(cur.bodies, append([]byte(nil), it.Value()...))
		}
	}
	return out, depth, it.Error()
}

func (o *clickOutbox) remove(keys [][]byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return errClickOutboxClosed
	}
	b := o.db.NewBatch()
	defer b.Close()
	for _, k := range keys {
		if err := b.Delete(k, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// firstMS is the time of the batch's first click (ms).
func (c *clickBatch) firstMS() int64 {
	var first struct {
		At time.Time `json:"at"`
	}
	if json.Unmarshal(c.bodies[0], &first) != nil {
		return 0
	}
	return first.At.UnixMilli()
}

// body is the delivery of one batch.
func (c *clickBatch) body() (eventID string, body []byte) {
	eventID = fmt.Sprintf("clk_%s_%016x_%d", strings.TrimPrefix(c.id, "wh_"), c.firstSeq, len(c.bodies))
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"id":%q,"type":"link.clicked","created_at":%q,"data":{"count":%d,"clicks":[`, eventID,
		time.UnixMilli(c.firstMS()).UTC().Format("2006-01-02T15:04:05.999Z07:00"), len(c.bodies))
	for i, b := range c.bodies {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(b)
	}
	buf.WriteString("]}}\n")
	return eventID, buf.Bytes()
}

// startClickWebhooks runs the click sender until ctx ends, then closes
// the outbox.
func (n *Node) startClickWebhooks(ctx context.Context, cfg WebhookConfig, m *webhookMetrics) error {
	o := n.clicks
	if o == nil {
		return errors.New("no click outbox")
	}
	client := webhookClient(cfg.AllowPrivate)
	retry := make(map[string]retryState)
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		defer o.close()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			n.sendClickBatches(ctx, o, client, cfg, m, retry)
		}
	}()
	return nil
}

func (n *Node) sendClickBatches(ctx context.Context, o *clickOutbox, client *http.Client, cfg WebhookConfig, m *webhookMetrics, retry map[string]retryState) {
	batches, depth, err := o.heads(cfg.ClickBatch)
	if err != nil {
		if !errors.Is(err, errClickOutboxClosed) {
			n.log.Warn("cannot read the click webhook outbox", "err", err)
		}
		return
	}
	m.set(&m.clickDepthV, float64(depth))
	now := time.Now()
	var wg sync.WaitGroup
	attempts := make([]store.DeliveryAttempt, 0, len(batches))
	sent := make([]*clickBatch, 0, len(batches))
	for _, c := range batches {
		hk := c.owner + "\x00" + c.id
		st := retry[hk]
		if now.Before(st.next) {
			continue
		}
		w, found, err := n.store.Webhook(c.owner, c.id)
		if err != nil {
			n.log.Warn("cannot read webhook", "id", c.id, "err", err)
			continue
		}
		if !found || w.Events&store.EventLinkClicked == 0 {
			if err := o.remove(c.keys); err == nil {
				m.clicksDropped.Add(len(c.keys))
			}
			delete(retry, hk)
			continue
		}
		if st.attempt > 0 {
			m.retries.Inc()
		}
		attempts = append(attempts, store.DeliveryAttempt{Owner: c.owner, WebhookID: c.id, Type: store.EventLinkClicked,
			At: now.UnixMilli(), Attempt: st.attempt + 1})
		sent = append(sent, c)
		a := &attempts[len(attempts)-1]
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, body := c.body()
			r := sendWebhook(ctx, client, w.URL, w.Secret, id, store.EventLinkClicked.String(), body)
			a.EventID, a.Status, a.LatencyUS, a.Error = id, r.status, r.latency.Microseconds(), r.errText()
			switch {
			case r.ok():
				a.Outcome = store.DeliveryDelivered
			case now.Sub(time.UnixMilli(c.firstMS())) >= cfg.RetryWindow:
				a.Outcome = store.DeliveryDropped
			default:
				a.Outcome = store.DeliveryFailed
			}
		}()
	}
	wg.Wait()
	for i := range attempts {
		a, c := &attempts[i], sent[i]
		hk := c.owner + "\x00" + c.id
		m.count(a.Outcome)
		switch a.Outcome {
		case store.DeliveryDelivered:
			if err := o.remove(c.keys); err != nil {
				n.log.Warn("cannot remove delivered clicks; they are sent again", "err", err)
			}
			m.clicksSent.Add(len(c.keys))
			delete(retry, hk)
		case store.DeliveryDropped:
			n.log.Warn("link.clicked delivery dropped after its retry window", "webhook", c.id, "clicks", len(c.keys), "err", a.Error)
			if err := o.remove(c.keys); err == nil {
				m.clicksDropped.Add(len(c.keys))
			}
			delete(retry, hk)
		default:
			retry[hk] = retryState{attempt: a.Attempt, next: time.Now().Add(retryWait(cfg.RetryBase, a.Attempt))}
		}
	}
	if len(attempts) == 0 {
		return
	}
	// The attempts go to the replicated delivery log, so GET
	// .../deliveries shows clicks too; losing one only loses a log line.
	wctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
	defer cancel()
	if err := n.raft.RecordDeliveries(wctx, attempts); err != nil {
		n.log.Warn("cannot log click webhook deliveries", "err", err)
	}
}
