package raft

import (
	"context"
	"fmt"

	"github.com/waymark/waymark/store"
)

// Issue 13 point 5: signed webhooks (store/webhook.go, node/WEBHOOKS.md).
// create_webhook and delete_webhook change which endpoints
// exist; record_deliveries is the leader's batched ack: it removes the
// outbox entries it delivered (or gave up on) and logs every attempt.
// The outbox entries themselves are written by the link commands, in
// their own batch (store.Batch.queueLinkEvent), so they need no command.
const (
	cmdCreateWebhook    cmdType = 22
	cmdDeleteWebhook    cmdType = 23
	cmdRecordDeliveries cmdType = 24
	// 25 is reserved for webhooks (an edit of a webhook, say).
)

func init() {
	commandTable[cmdCreateWebhook] = commandSpec{name: "create_webhook", version: 1, decode: decodeCreateWebhook}
	commandTable[cmdDeleteWebhook] = commandSpec{name: "delete_webhook", version: 1, decode: decodeDeleteWebhook}
	commandTable[cmdRecordDeliveries] = commandSpec{name: "record_deliveries", version: 1, decode: decodeRecordDeliveries}
	// Owners add and remove webhooks through any node; the aggregator
	// logs its click deliveries from wherever it runs.
	forwardable[cmdCreateWebhook] = true
	forwardable[cmdDeleteWebhook] = true
	forwardable[cmdRecordDeliveries] = true
}

// createWebhookCmd registers an endpoint. Version 1 payload:
//
//	owner    string
//	url      string (checked by the edge; the store only bounds it)
//	events   byte, store.WebhookEvents, non-zero, known bits
//	secret   string, 16 to 128 bytes
//	created  varint, ms
//
// The id is the entry's index (store.WebhookID), the same on every replica.
type createWebhookCmd struct {
	W store.Webhook
}

func (c *createWebhookCmd) kind() cmdType { return cmdCreateWebhook }

func (c *createWebhookCmd) appendPayload(dst []byte) []byte {
	dst = appendString(dst, c.W.Owner)
	dst = appendString(dst, c.W.URL)
	dst = append(dst, byte(c.W.Events))
	dst = appendString(dst, c.W.Secret)
	return appendVarints(dst, c.W.CreatedAt)
}

func decodeCreateWebhook(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &createWebhookCmd{}
	c.W.Owner = r.String()
	c.W.URL = r.String()
	c.W.Events = store.WebhookEvents(r.Byte())
	c.W.Secret = r.String()
	c.W.CreatedAt = r.Varint()
	if !r.Done() {
		return nil, corrupt("create_webhook")
	}
	if err := store.CheckWebhook(&c.W); err != nil {
		return nil, invalid("create_webhook", err)
	}
	return c, nil
}

func (c *createWebhookCmd) apply(a *applier, index uint64, res *applyResult) {
	w := c.W
	w.Index = index
	if err := a.b.CreateWebhook(&w); err != nil {
		a.reject(res, err)
	}
}

// deleteWebhookCmd removes an endpoint and its delivery log. Version 1
// payload: owner string, id string (store.ValidWebhookID).
type deleteWebhookCmd struct {
	Owner, ID string
}

func (c *deleteWebhookCmd) kind() cmdType { return cmdDeleteWebhook }

func (c *deleteWebhookCmd) appendPayload(dst []byte) []byte {
	return appendString(appendString(dst, c.Owner), c.ID)
}

func decodeDeleteWebhook(_ byte, b []byte) (command, error) {
	r := newReader(b)
	c := &deleteWebhookCmd{Owner: r.String(), ID: r.String()}
	if !r.Done() || c.Owner == "" || !store.ValidWebhookID(c.ID) {
		return nil, corrupt("delete_webhook")
	}
	if err := store.CheckOwnerID(c.Owner); err != nil {
		return nil, invalid("delete_webhook", err)
	}
	return c, nil
}

func (c *deleteWebhookCmd) apply(a *applier, _ uint64, res *applyResult) {
	if err := a.b.DeleteWebhook(c.Owner, c.ID); err != nil {
		a.reject(res, err)
	}
}

// MaxDeliveriesPerEntry bounds the attempts one record_deliveries entry
// carries.
const MaxDeliveriesPerEntry = 256

// recordDeliveriesCmd is the deliverer's ack. Version 1 payload:
//
//	count  uvarint, 1 to MaxDeliveriesPerEntry
//	count × {owner string, webhook string, index uvarint (0: a click batch), seq uvarint ≤ 0xffff,
//	         event id string, type byte, outcome byte, at varint, attempt uvarint,
//	         status uvarint, latency varint µs, error string}
type recordDeliveriesCmd struct {
	Attempts []store.DeliveryAttempt
}

func (c *recordDeliveriesCmd) kind() cmdType { return cmdRecordDeliveries }

func (c *recordDeliveriesCmd) appendPayload(dst []byte) []byte {
	dst = appendUvarint(dst, uint64(len(c.Attempts)))
	for i := range c.Attempts {
		d := &c.Attempts[i]
		dst = appendString(dst, d.Owner)
		dst = appendString(dst, d.WebhookID)
		dst = appendUvarint(dst, d.Index)
		dst = appendUvarint(dst, uint64(d.Seq))
		dst = appendString(dst, d.EventID)
		dst = append(dst, byte(d.Type), byte(d.Outcome))
		dst = appendVarints(dst, d.At)
		dst = appendUvarint(dst, d.Attempt)
		dst = appendUvarint(dst, uint64(d.Status))
		dst = appendVarints(dst, d.LatencyUS)
		dst = appendString(dst, d.Error)
	}
	return dst
}

func decodeRecordDeliveries(_ byte, b []byte) (command, error) {
	r := newReader(b)
	n := r.Uvarint()
	if n == 0 || n > MaxDeliveriesPerEntry {
		return nil, corrupt("record_deliveries")
	}
	c := &recordDeliveriesCmd{Attempts: make([]store.DeliveryAttempt, 0, n)}
	for i := uint64(0); i < n; i++ {
		var d store.DeliveryAttempt
		d.Owner = r.String()
		d.WebhookID = r.String()
		d.Index = r.Uvarint()
		seq := r.Uvarint()
		d.EventID = r.String()
		d.Type = store.WebhookEvents(r.Byte())
		d.Outcome = store.DeliveryOutcome(r.Byte())
		d.At = r.Varint()
		d.Attempt = r.Uvarint()
		status := r.Uvarint()
		d.LatencyUS = r.Varint()
		d.Error = r.String()
		if seq > 0xffff || status > 999 {
			r.Fail()
		}
		d.Seq, d.Status = uint16(seq), int(status)
		c.Attempts = append(c.Attempts, d)
	}
	if !r.Done() {
		return nil, corrupt("record_deliveries")
	}
	for i := range c.Attempts {
		if err := store.CheckDeliveryAttempt(&c.Attempts[i]); err != nil {
			return nil, invalid("record_deliveries", err)
		}
	}
	return c, nil
}

func (c *recordDeliveriesCmd) apply(a *applier, index uint64, res *applyResult) {
	if err := a.b.RecordDeliveries(c.Attempts, index); err != nil {
		a.reject(res, err)
	}
}

// CreateWebhook registers w through the log and returns it as this node's
// store holds it (with its id). Past store.MaxWebhooksPerOwner it fails
// with store.ErrTooManyWebhooks.
func (n *Node) CreateWebhook(ctx context.Context, w *store.Webhook) (store.Webhook, error) {
	res, err := n.apply(ctx, appendCommand(nil, &createWebhookCmd{W: *w}))
	if err != nil {
		return store.Webhook{}, fmt.Errorf("cannot create webhook: %w", err)
	}
	n.waitApplied(ctx, res.Index)
	id := store.WebhookID(res.Index)
	got, found, err := n.st.Webhook(w.Owner, id)
	if err != nil {
		return store.Webhook{}, err
	}
	if !found {
		return store.Webhook{}, fmt.Errorf("cannot read webhook %s after index %d: %w", id, res.Index, store.ErrNotFound)
	}
	return got, nil
}

// DeleteWebhook removes one of owner's webhooks; an unknown one (or
// another owner's) is store.ErrNotFound.
func (n *Node) DeleteWebhook(ctx context.Context, owner, id string) error {
	if !store.ValidWebhookID(id) {
		return fmt.Errorf("cannot delete webhook %q: %w", id, store.ErrNotFound)
	}
	res, err := n.apply(ctx, appendCommand(nil, &deleteWebhookCmd{Owner: owner, ID: id}))
	if err != nil {
		return fmt.Errorf("cannot delete webhook %s: %w", id, err)
	}
	n.waitApplied(ctx, res.Index)
	return nil
}

// RecordDeliveries writes delivery attempts through the log, in entries of
// at most MaxDeliveriesPerEntry; it stops at the first that fails.
func (n *Node) RecordDeliveries(ctx context.Context, ds []store.DeliveryAttempt) error {
	for len(ds) > 0 {
		part := ds[:min(len(ds), MaxDeliveriesPerEntry)]
		ds = ds[len(part):]
		res, err := n.apply(ctx, appendCommand(nil, &recordDeliveriesCmd{Attempts: part}))
		if err != nil {
			return fmt.Errorf("cannot record webhook deliveries: %w", err)
		}
		n.waitApplied(ctx, res.Index)
	}
	return nil
}
