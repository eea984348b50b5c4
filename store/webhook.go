package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Issue 13 point 5: signed webhooks. Three tables (store/DESIGN.md key
// layout; the design is node/WEBHOOKS.md):
//
//	W owner 0x00 id            -> webhook record
//	Y index(be64) seq(be16) owner 0x00 id -> outbox entry: one link event for one webhook
//	E owner 0x00 id 0x00 ^seq(be64) -> delivery attempt, newest first
//
// The FSM writes outbox entries in the batch that changes the link, on
// every replica alike: the event id and time come from the entry (its Raft
// index and the command's own time), never from a clock. The leader
// delivers them and removes them with an ack command (raft/webhookcmd.go).
const (
	tabWebhook     = 'W'
	tabOutbox      = 'Y'
	tabDeliveryLog = 'E'
)

// Webhook event types, one bit each.
type WebhookEvents uint8

const (
	EventLinkCreated WebhookEvents = 1 << iota
	EventLinkUpdated
	EventLinkDeleted
	EventLinkBlocked
	EventLinkLimitReached
	EventLinkClicked
	AllWebhookEvents = EventLinkCreated | EventLinkUpdated | EventLinkDeleted | EventLinkBlocked | EventLinkLimitReached | EventLinkClicked
)

var webhookEventNames = [...]string{"link.created", "link.updated", "link.deleted", "link.blocked", "link.limit_reached", "link.clicked"}

// ParseWebhookEvent returns the bit a name such as "link.created" stands for.
func ParseWebhookEvent(name string) (WebhookEvents, bool) {
	for i, n := range webhookEventNames {
		if n == name {
			return 1 << i, true
		}
	}
	return 0, false
}

// WebhookEventNames lists every event name, in bit order.
func WebhookEventNames() []string { return append([]string(nil), webhookEventNames[:]...) }

// Names lists the events of e, in bit order.
func (e WebhookEvents) Names() []string {
	out := []string{}
	for i, n := range webhookEventNames {
		if e&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// String names one event (e must be a single bit).
func (e WebhookEvents) String() string {
	for i, n := range webhookEventNames {
		if e == 1<<i {
			return n
		}
	}
	return fmt.Sprintf("events(%#x)", uint8(e))
}

// Limits of the webhook tables.
const (
	MaxWebhooksPerOwner = 20
	MaxWebhookURLLen    = 2048
	// MaxDeliveryLog is how many attempts the delivery log keeps per
	// webhook; older ones are dropped in the same batch that adds new ones.
	MaxDeliveryLog = 100
	// MaxDeliveryError bounds the error text one attempt keeps.
	MaxDeliveryError = 200
)

// ErrTooManyWebhooks refuses a webhook past MaxWebhooksPerOwner.
var ErrTooManyWebhooks = errors.New("too many webhooks")

// Webhook is one endpoint an owner registered. Secret signs its deliveries
// (replicated, so any leader can sign); the API shows it once.
type Webhook struct {
	ID        string
	Owner     string
	URL       string
	Events    WebhookEvents
	Secret    string
	CreatedAt int64  // ms
	Index     uint64 // Raft index of the create; the id is made from it
}

// WebhookID is the id of the webhook created at Raft index i.
func WebhookID(i uint64) string { return fmt.Sprintf("wh_%016x", i) }

// ValidWebhookID reports whether id has WebhookID's form.
func ValidWebhookID(id string) bool {
	if len(id) != 19 || !strings.HasPrefix(id, "wh_") {
		return false
	}
	for i := 3; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CheckWebhook refuses a webhook the store cannot hold.
func CheckWebhook(w *Webhook) error {
	switch {
	case w.Owner == "" || CheckOwnerID(w.Owner) != nil:
		return errors.New("webhook owner is empty or holds a NUL byte")
	case w.URL == "" || len(w.URL) > MaxWebhookURLLen:
		return fmt.Errorf("webhook url must be 1 to %d bytes", MaxWebhookURLLen)
	case w.Events == 0 || w.Events&^AllWebhookEvents != 0:
		return fmt.Errorf("webhook events %#x", uint8(w.Events))
	case len(w.Secret) < 16 || len(w.Secret) > 128:
		return errors.New("webhook secret must be 16 to 128 bytes")
	}
	return nil
}

const webhookVersion = 1

// AppendWebhook appends w's record (version 1: url, events, secret,
// created, index; id and owner are the key's).
func AppendWebhook(dst []byte, w *Webhook) []byte {
	dst = append(dst, webhookVersion)
	dst = AppendString(dst, w.URL)
	dst = append(dst, byte(w.Events))
	dst = AppendString(dst, w.Secret)
	dst = appendVarint(dst, w.CreatedAt)
	return appendUvarint(dst, w.Index)
}

// DecodeWebhook decodes a record written by AppendWebhook for owner.
func DecodeWebhook(b []byte, owner string, w *Webhook) error {
	r := NewFieldReader(b)
	if r.Byte() != webhookVersion {
		return fmt.Errorf("cannot decode webhook: %w: unknown version", ErrCorrupt)
	}
	*w = Webhook{Owner: owner, URL: r.String(), Events: WebhookEvents(r.Byte()), Secret: r.String(), CreatedAt: r.Varint(), Index: r.Uvarint()}
	if !r.Done() || CheckWebhook(w) != nil || w.Index == 0 {
		return fmt.Errorf("cannot decode webhook: %w", ErrCorrupt)
	}
	w.ID = WebhookID(w.Index)
	return nil
}

func webhookPrefix(owner string) []byte {
	k := make([]byte, 0, len(owner)+2)
	k = append(k, tabWebhook)
	k = append(k, owner...)
	return append(k, 0)
}

func webhookKey(owner, id string) []byte { return append(webhookPrefix(owner), id...) }

func deliveryLogPrefix(owner, id string) []byte {
	k := make([]byte, 0, len(owner)+len(id)+3)
	k = append(k, tabDeliveryLog)
	k = append(k, owner...)
	k = append(k, 0)
	k = append(k, id...)
	return append(k, 0)
}

// webhooks lists owner's webhooks from r, oldest first.
func webhooks(r pebble.Reader, owner string) ([]Webhook, error) {
	lower := webhookPrefix(owner)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return nil, fmt.Errorf("cannot list webhooks: %w", storageErr(err))
	}
	defer it.Close()
	var out []Webhook
	for ok := it.First(); ok; ok = it.Next() {
		var w Webhook
		if err := DecodeWebhook(it.Value(), owner, &w); err != nil {
			return nil, storageErr(err)
		}
		if w.ID != string(it.Key()[len(lower):]) {
			return nil, storageErr(fmt.Errorf("cannot decode webhook: %w: id differs from key", ErrCorrupt))
		}
		out = append(out, w)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("cannot list webhooks: %w", storageErr(err))
	}
	return out, nil
}

// Webhooks lists owner's webhooks, oldest first.
func (s *Store) Webhooks(owner string) ([]Webhook, error) { return webhooks(s.db, owner) }

// Webhook reads one of owner's webhooks.
func (s *Store) Webhook(owner, id string) (Webhook, bool, error) {
	var w Webhook
	found, err := get(s.db, webhookKey(owner, id), func(v []byte) error { return DecodeWebhook(v, owner, &w) })
	if err != nil {
		return Webhook{}, false, fmt.Errorf("cannot read webhook %q: %w", id, err)
	}
	return w, found, nil
}

// AnyWebhooks reports whether some owner has a webhook (the click feed
// skips all its work when none has).
func (s *Store) AnyWebhooks() (bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabWebhook}, UpperBound: []byte{tabWebhook + 1}})
	if err != nil {
		return false, storageErr(err)
	}
	defer it.Close()
	return it.First(), storageErrOrNil(it.Error())
}

func storageErrOrNil(err error) error {
	if err != nil {
		return storageErr(err)
	}
	return nil
}

// CreateWebhook stores w (its Index set, its ID made from it).
func (b *Batch) CreateWebhook(w *Webhook) error {
	if err := CheckWebhook(w); err != nil {
		return fmt.Errorf("cannot create webhook: %w", err)
	}
	if w.Index == 0 {
		return errors.New("BUG: webhook without a raft index")
	}
	w.ID = WebhookID(w.Index)
	have, err := webhooks(b.b, w.Owner)
	if err != nil {
		return err
	}
	if len(have) >= MaxWebhooksPerOwner {
		return fmt.Errorf("cannot create webhook: %w: an owner has at most %d", ErrTooManyWebhooks, MaxWebhooksPerOwner)
	}
	b.whCache = nil
	return b.set(webhookKey(w.Owner, w.ID), AppendWebhook(nil, w))
}

// DeleteWebhook removes one of owner's webhooks and its delivery log. Its
// outbox entries stay until the deliverer meets them and drops them.
func (b *Batch) DeleteWebhook(owner, id string) error {
	found, err := get(b.b, webhookKey(owner, id), func([]byte) error { return nil })
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("cannot delete webhook %q: %w", id, ErrNotFound)
	}
	b.whCache = nil
	if err := b.b.Delete(webhookKey(owner, id), nil); err != nil {
		return storageErr(err)
	}
	p := deliveryLogPrefix(owner, id)
	if err := b.b.DeleteRange(p, prefixEnd(p), nil); err != nil {
		return storageErr(err)
	}
	return nil
}

// OutboxEntry is one link event waiting for one webhook.
type OutboxEntry struct {
	Index     uint64 // Raft index of the change
	Seq       uint16 // the change's place among the events of its entry
	Owner     string
	WebhookID string
	Type      WebhookEvents // one bit
	CreatedAt int64         // ms: the command's own time
	Link      Link          // the link as the change left it
}

// EventID is the id every delivery of the event carries (for dedup); the
// same change has the same id for each of its owner's webhooks.
func (e *OutboxEntry) EventID() string { return fmt.Sprintf("evt_%016x%04x", e.Index, e.Seq) }

// OutboxKey is the entry's key (the ack command names entries by it).
func OutboxKey(index uint64, seq uint16, owner, webhookID string) []byte {
	k := make([]byte, 0, 11+len(owner)+1+len(webhookID))
	k = append(k, tabOutbox)
	k = binary.BigEndian.AppendUint64(k, index)
	k = binary.BigEndian.AppendUint16(k, seq)
	k = append(k, owner...)
	k = append(k, 0)
	return append(k, webhookID...)
}

func parseOutboxKey(k []byte, e *OutboxEntry) bool {
	if len(k) < 12 || k[0] != tabOutbox {
		return false
	}
	e.Index = binary.BigEndian.Uint64(k[1:])
	e.Seq = binary.BigEndian.Uint16(k[9:])
	owner, id, ok := strings.Cut(string(k[11:]), "\x00")
	e.Owner, e.WebhookID = owner, id
	return ok && owner != "" && ValidWebhookID(id)
}

const outboxVersion = 1

func appendOutboxValue(dst []byte, e *OutboxEntry) []byte {
	dst = append(dst, outboxVersion, byte(e.Type))
	dst = appendVarint(dst, e.CreatedAt)
	return AppendBytes(dst, AppendLink(nil, &e.Link))
}

func decodeOutboxValue(v []byte, e *OutboxEntry) error {
	r := NewFieldReader(v)
	if r.Byte() != outboxVersion {
		return fmt.Errorf("cannot decode outbox entry: %w: unknown version", ErrCorrupt)
	}
	e.Type = WebhookEvents(r.Byte())
	e.CreatedAt = r.Varint()
	raw := r.Bytes()
	if !r.Done() || e.Type == 0 || e.Type&(e.Type-1) != 0 || e.Type&^AllWebhookEvents != 0 {
		return fmt.Errorf("cannot decode outbox entry: %w", ErrCorrupt)
	}
	return DecodeLink(raw, &e.Link)
}

// Outbox returns up to limit entries in log order, from after the key
// after (nil: from the start), with the key of the last one.
func (s *Store) Outbox(after []byte, limit int) ([]OutboxEntry, error) {
	lower := []byte{tabOutbox}
	if after != nil {
		lower = append(append([]byte(nil), after...), 0)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{tabOutbox + 1}})
	if err != nil {
		return nil, fmt.Errorf("cannot read the webhook outbox: %w", storageErr(err))
	}
	defer it.Close()
	var out []OutboxEntry
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		var e OutboxEntry
		if !parseOutboxKey(it.Key(), &e) {
			return nil, storageErr(fmt.Errorf("cannot read outbox key %x: %w", it.Key(), ErrCorrupt))
		}
		if err := decodeOutboxValue(it.Value(), &e); err != nil {
			return nil, storageErr(err)
		}
		out = append(out, e)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("cannot read the webhook outbox: %w", storageErr(err))
	}
	return out, nil
}

// ScanOutbox walks the whole outbox in log order. want sees each entry's
// key fields (cheap: no value is decoded); the entries it wants are
// decoded and handed to got, which stops the walk by returning false.
// It returns the number of entries walked.
func (s *Store) ScanOutbox(want func(owner, webhookID string, index uint64) bool, got func(e *OutboxEntry) bool) (int, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabOutbox}, UpperBound: []byte{tabOutbox + 1}})
	if err != nil {
		return 0, fmt.Errorf("cannot read the webhook outbox: %w", storageErr(err))
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
		var e OutboxEntry
		if !parseOutboxKey(it.Key(), &e) {
			return n, storageErr(fmt.Errorf("cannot read outbox key %x: %w", it.Key(), ErrCorrupt))
		}
		if !want(e.Owner, e.WebhookID, e.Index) {
			continue
		}
		if err := decodeOutboxValue(it.Value(), &e); err != nil {
			return n, storageErr(err)
		}
		if !got(&e) {
			break
		}
	}
	if err := it.Error(); err != nil {
		return n, fmt.Errorf("cannot read the webhook outbox: %w", storageErr(err))
	}
	return n, nil
}

// OutboxLen counts the outbox entries (for the queue-depth metric; it
// walks the table, so callers sample it, not per request).
func (s *Store) OutboxLen() (int, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabOutbox}, UpperBound: []byte{tabOutbox + 1}})
	if err != nil {
		return 0, storageErr(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, storageErrOrNil(it.Error())
}

// linkEventOf names what a change from old (nil for a create) to l is.
func linkEventOf(old, l *Link) WebhookEvents {
	if old == nil {
		return EventLinkCreated
	}
	if l.Status != old.Status {
		switch l.Status {
		case StatusDisabled:
			return EventLinkDeleted
		case StatusBlocked, StatusLegalBlock:
			return EventLinkBlocked
		case StatusLimited:
			return EventLinkLimitReached
		}
	}
	return EventLinkUpdated
}

// webhookBatch is a batch's view of the webhooks: the owners' lists read
// once per batch, and the next event number of the entry being applied.
type webhookBatch struct {
	owners map[string][]Webhook
	index  uint64
	seq    uint16
}

// queueLinkEvent writes an outbox entry for each of the link owner's
// webhooks that wants the change from old (nil: created) to l. It runs in
// CreateLink and UpdateLink, inside the FSM's batch, so the entry commits
// with the change on every replica or not at all.
func (b *Batch) queueLinkEvent(old, l *Link) error {
	if b.whCache == nil {
		b.whCache = &webhookBatch{owners: make(map[string][]Webhook)}
	}
	c := b.whCache
	hooks, ok := c.owners[l.Owner]
	if !ok {
		var err error
		if hooks, err = webhooks(b.b, l.Owner); err != nil {
			return err
		}
		c.owners[l.Owner] = hooks
	}
	if len(hooks) == 0 {
		return nil
	}
	typ := linkEventOf(old, l)
	at := l.UpdatedAt
	if old == nil {
		at = l.CreatedAt
	}
	if c.index != l.Index {
		c.index, c.seq = l.Index, 0
	}
	seq := c.seq
	queued := false
	for i := range hooks {
		w := &hooks[i]
		if w.Events&typ == 0 {
			continue
		}
		e := OutboxEntry{Index: l.Index, Seq: seq, Owner: l.Owner, WebhookID: w.ID, Type: typ, CreatedAt: at, Link: *l}
		if err := b.set(OutboxKey(e.Index, e.Seq, e.Owner, e.WebhookID), appendOutboxValue(nil, &e)); err != nil {
			return fmt.Errorf("cannot queue webhook event: %w", err)
		}
		queued = true
	}
	if queued {
		c.seq++
	}
	return nil
}

// Delivery outcomes.
type DeliveryOutcome uint8

const (
	DeliveryDelivered DeliveryOutcome = 1 // 2xx: the entry leaves the outbox
	DeliveryFailed    DeliveryOutcome = 2 // retried later; the entry stays
	DeliveryDropped   DeliveryOutcome = 3 // past the retry window: the entry leaves the outbox
)

var deliveryOutcomeNames = [...]string{"", "delivered", "failed", "dropped"}

func (o DeliveryOutcome) String() string {
	if int(o) < len(deliveryOutcomeNames) && o != 0 {
		return deliveryOutcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// DeliveryAttempt is one try of one event at one webhook. Index and Seq
// name the outbox entry (Index 0: a click batch, which has no entry here).
type DeliveryAttempt struct {
	Owner     string
	WebhookID string
	Index     uint64
	Seq       uint16
	EventID   string
	Type      WebhookEvents
	At        int64 // ms, the deliverer's clock when it sent
	Attempt   uint64
	Status    int   // HTTP status, 0 when none came back
	LatencyUS int64 // microseconds
	Error     string
	Outcome   DeliveryOutcome
}

// CheckDeliveryAttempt refuses an attempt the store cannot hold.
func CheckDeliveryAttempt(d *DeliveryAttempt) error {
	switch {
	case d.Owner == "" || CheckOwnerID(d.Owner) != nil || !ValidWebhookID(d.WebhookID):
		return errors.New("delivery names no valid webhook")
	case d.Type == 0 || d.Type&(d.Type-1) != 0 || d.Type&^AllWebhookEvents != 0:
		return errors.New("delivery type must be one event")
	case d.Outcome < DeliveryDelivered || d.Outcome > DeliveryDropped:
		return errors.New("delivery outcome unknown")
	case d.Status < 0 || d.Status > 999 || d.LatencyUS < 0 || d.At < 0:
		return errors.New("delivery status, latency or time out of range")
	case len(d.Error) > MaxDeliveryError || len(d.EventID) > 64:
		return errors.New("delivery error or event id too long")
	}
	return nil
}

const deliveryVersion = 1

// AppendDeliveryAttempt appends d's delivery-log record (owner and webhook
// are the key's).
func AppendDeliveryAttempt(dst []byte, d *DeliveryAttempt) []byte {
	dst = append(dst, deliveryVersion, byte(d.Type), byte(d.Outcome))
	dst = appendUvarint(dst, d.Index)
	dst = appendUvarint(dst, uint64(d.Seq))
	dst = AppendString(dst, d.EventID)
	dst = appendVarint(dst, d.At)
	dst = appendUvarint(dst, d.Attempt)
	dst = appendUvarint(dst, uint64(d.Status))
	dst = appendVarint(dst, d.LatencyUS)
	return AppendString(dst, d.Error)
}

// DecodeDeliveryAttempt decodes a record written by AppendDeliveryAttempt.
func DecodeDeliveryAttempt(b []byte, d *DeliveryAttempt) error {
	r := NewFieldReader(b)
	if r.Byte() != deliveryVersion {
		return fmt.Errorf("cannot decode delivery attempt: %w: unknown version", ErrCorrupt)
	}
	d.Type = WebhookEvents(r.Byte())
	d.Outcome = DeliveryOutcome(r.Byte())
	d.Index = r.Uvarint()
	seq := r.Uvarint()
	d.EventID = r.String()
	d.At = r.Varint()
	d.Attempt = r.Uvarint()
	status := r.Uvarint()
	d.LatencyUS = r.Varint()
	d.Error = r.String()
	if !r.Done() || seq > 0xffff || status > 999 {
		return fmt.Errorf("cannot decode delivery attempt: %w", ErrCorrupt)
	}
	d.Seq, d.Status = uint16(seq), int(status)
	if err := CheckDeliveryAttempt(d); err != nil {
		return fmt.Errorf("cannot decode delivery attempt: %w: %w", ErrCorrupt, err)
	}
	return nil
}

// RecordDeliveries applies an ack command's attempts (index: its Raft
// index): each is logged under its webhook (unless the webhook is gone),
// a delivered or dropped one removes its outbox entry, and each touched
// webhook's log is cut back to MaxDeliveryLog attempts.
func (b *Batch) RecordDeliveries(ds []DeliveryAttempt, index uint64) error {
	touched := make(map[string][2]string)
	for i := range ds {
		d := &ds[i]
		if err := CheckDeliveryAttempt(d); err != nil {
			return fmt.Errorf("cannot record delivery: %w", err)
		}
		if d.Outcome != DeliveryFailed && d.Index != 0 {
			if err := b.b.Delete(OutboxKey(d.Index, d.Seq, d.Owner, d.WebhookID), nil); err != nil {
				return storageErr(err)
			}
		}
		found, err := get(b.b, webhookKey(d.Owner, d.WebhookID), func([]byte) error { return nil })
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		k := deliveryLogPrefix(d.Owner, d.WebhookID)
		k = binary.BigEndian.AppendUint64(k, ^(index<<16 | uint64(i)))
		if err := b.set(k, AppendDeliveryAttempt(nil, d)); err != nil {
			return err
		}
		touched[d.Owner+"\x00"+d.WebhookID] = [2]string{d.Owner, d.WebhookID}
	}
	for _, ow := range touched {
		if err := b.trimDeliveryLog(ow[0], ow[1]); err != nil {
			return err
		}
	}
	return nil
}

// trimDeliveryLog deletes all but the newest MaxDeliveryLog attempts.
func (b *Batch) trimDeliveryLog(owner, id string) error {
	lower := deliveryLogPrefix(owner, id)
	it, err := b.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return storageErr(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n > MaxDeliveryLog {
			if err := b.b.DeleteRange(append([]byte(nil), it.Key()...), prefixEnd(lower), nil); err != nil {
				return storageErr(err)
			}
			break
		}
	}
	return storageErrOrNil(it.Error())
}

// Deliveries returns a webhook's logged attempts, newest first.
func (s *Store) Deliveries(owner, id string, limit int) ([]DeliveryAttempt, error) {
	lower := deliveryLogPrefix(owner, id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return nil, fmt.Errorf("cannot read deliveries: %w", storageErr(err))
	}
	defer it.Close()
	out := []DeliveryAttempt{}
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		d := DeliveryAttempt{Owner: owner, WebhookID: id}
		if err := DecodeDeliveryAttempt(it.Value(), &d); err != nil {
			return nil, storageErr(err)
		}
		out = append(out, d)
	}
	return out, storageErrOrNil(it.Error())
}
