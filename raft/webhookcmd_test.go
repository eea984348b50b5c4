package raft

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/waymark/waymark/store"
)

const testSecret = "whsec_0123456789abcdef0123456789abcdef"

func sampleWebhookCommands() []command {
	return []command{
		&createWebhookCmd{W: store.Webhook{Owner: "o1", URL: "https://hooks.example/in", Events: store.EventLinkCreated | store.EventLinkClicked, Secret: testSecret, CreatedAt: 1_700_000_000_000}},
		&deleteWebhookCmd{Owner: "o1", ID: store.WebhookID(7)},
		&recordDeliveriesCmd{Attempts: []store.DeliveryAttempt{
			{Owner: "o1", WebhookID: store.WebhookID(7), Index: 9, Seq: 2, EventID: "evt_x", Type: store.EventLinkUpdated, At: 5, Attempt: 3, Status: 503, LatencyUS: 1200, Error: "HTTP 503", Outcome: store.DeliveryFailed},
			{Owner: "o1", WebhookID: store.WebhookID(7), Index: 0, EventID: "clk_1", Type: store.EventLinkClicked, At: 6, Attempt: 1, Status: 204, Outcome: store.DeliveryDelivered},
		}},
	}
}

func TestWebhookCommandsRoundTrip(t *testing.T) {
	for _, c := range sampleWebhookCommands() {
		b := appendCommand(nil, c)
		h, got, err := decodeCommand(b)
		if err != nil || h.typ != c.kind() || h.skippable() || !reflect.DeepEqual(got, c) {
			t.Fatalf("%T: got %+v %+v %v; want %+v", c, h, got, err, c)
		}
	}
}

// TestWebhookCommandsRefuseBad: commands no correct writer makes decode
// as corrupt, the same on every replica.
func TestWebhookCommandsRefuseBad(t *testing.T) {
	good := store.Webhook{Owner: "o1", URL: "https://h.example/", Events: store.EventLinkCreated, Secret: testSecret}
	mod := func(f func(w *store.Webhook)) []byte {
		w := good
		f(&w)
		return appendCommand(nil, &createWebhookCmd{W: w})
	}
	okAttempt := store.DeliveryAttempt{Owner: "o1", WebhookID: store.WebhookID(1), Index: 1, Type: store.EventLinkCreated, Outcome: store.DeliveryDelivered}
	att := func(f func(d *store.DeliveryAttempt)) []byte {
		d := okAttempt
		f(&d)
		return appendCommand(nil, &recordDeliveriesCmd{Attempts: []store.DeliveryAttempt{d}})
	}
	many := make([]store.DeliveryAttempt, MaxDeliveriesPerEntry+1)
	for i := range many {
		many[i] = okAttempt
	}
	for name, b := range map[string][]byte{
		"no events":        mod(func(w *store.Webhook) { w.Events = 0 }),
		"unknown event":    mod(func(w *store.Webhook) { w.Events = 1 << 7 }),
		"short secret":     mod(func(w *store.Webhook) { w.Secret = "short" }),
		"no owner":         mod(func(w *store.Webhook) { w.Owner = "" }),
		"NUL owner":        mod(func(w *store.Webhook) { w.Owner = "a\x00b" }),
		"long url":         mod(func(w *store.Webhook) { w.URL = "https://h.example/" + strings.Repeat("a", store.MaxWebhookURLLen) }),
		"bad id":           appendCommand(nil, &deleteWebhookCmd{Owner: "o1", ID: "wh_zz"}),
		"no attempts":      appendCommand(nil, &recordDeliveriesCmd{}),
		"too many":         appendCommand(nil, &recordDeliveriesCmd{Attempts: many}),
		"two types":        att(func(d *store.DeliveryAttempt) { d.Type = store.EventLinkCreated | store.EventLinkUpdated }),
		"unknown outcome":  att(func(d *store.DeliveryAttempt) { d.Outcome = 9 }),
		"long error":       att(func(d *store.DeliveryAttempt) { d.Error = strings.Repeat("e", store.MaxDeliveryError+1) }),
		"trailing garbage": append(appendCommand(nil, &deleteWebhookCmd{Owner: "o1", ID: store.WebhookID(1)}), 0),
	} {
		if _, _, err := decodeCommand(b); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s: got %v; want ErrCorrupt", name, err)
		}
	}
}

// TestFSMWebhookOutbox: the FSM queues one outbox entry per matching
// webhook for each link change, typed by what changed, with the id and
// time of the entry; the ack removes delivered ones and logs attempts.
func TestFSMWebhookOutbox(t *testing.T) {
	f, st, _ := newTestFSM(t)
	hook := store.Webhook{Owner: "o1", URL: "https://h.example/", Events: store.EventLinkCreated | store.EventLinkDeleted | store.EventLinkLimitReached, Secret: testSecret, CreatedAt: 1}
	other := hook
	other.Owner = "o2"
	l := testLink("abc")
	l2 := testLink("other")
	l2.Owner = "o2"
	del := store.LinkPatch{Code: "abc", Owner: "o1", UpdatedAt: 1700000005000, SetStatus: true, Status: store.StatusDisabled}
	edit := store.LinkPatch{Code: "abc", Owner: "o1", UpdatedAt: 1700000004000, SetURL: true, URL: "https://example.com/new"}
	resps := f.ApplyBatch(logsOf(1,
		appendCommand(nil, &createWebhookCmd{W: hook}),  // 1
		appendCommand(nil, &createWebhookCmd{W: other}), // 2: o2's, matches nothing of o1
		appendCreateLink(nil, l, nil),                   // 3: link.created
		appendUpdateLink(nil, &edit),                    // 4: link.updated: not subscribed
		appendUpdateLink(nil, &del),                     // 5: link.deleted
		appendCreateLink(nil, l2, nil),                  // 6: o2's link.created
	))
	for i, r := range resps {
		if err := result(t, r).Err; err != nil {
			t.Fatalf("entry %d: %v", i+1, err)
		}
	}
	out, err := st.Outbox(nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		idx     uint64
		hook    string
		typ     store.WebhookEvents
		at      int64
		url     string
		eventID string
	}
	var got []row
	for _, e := range out {
		got = append(got, row{e.Index, e.WebhookID, e.Type, e.CreatedAt, e.Link.URL, e.EventID()})
	}
	want := []row{
		{3, store.WebhookID(1), store.EventLinkCreated, 1700000000000, "https://example.com/abc", "evt_00000000000000030000"},
		{5, store.WebhookID(1), store.EventLinkDeleted, 1700000005000, "https://example.com/new", "evt_00000000000000050000"},
		{6, store.WebhookID(2), store.EventLinkCreated, 1700000000000, "https://example.com/other", "evt_00000000000000060000"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("outbox %+v; want %+v", got, want)
	}

	// Ack: the first delivered, the second failed; both logged.
	acks := []store.DeliveryAttempt{
		{Owner: "o1", WebhookID: out[0].WebhookID, Index: out[0].Index, Seq: out[0].Seq, EventID: out[0].EventID(), Type: out[0].Type, At: 10, Attempt: 1, Status: 200, Outcome: store.DeliveryDelivered},
		{Owner: "o1", WebhookID: out[1].WebhookID, Index: out[1].Index, Seq: out[1].Seq, EventID: out[1].EventID(), Type: out[1].Type, At: 11, Attempt: 1, Error: "connection refused", Outcome: store.DeliveryFailed},
	}
	if err := result(t, f.Apply(logsOf(7, appendCommand(nil, &recordDeliveriesCmd{Attempts: acks}))[0])).Err; err != nil {
		t.Fatal(err)
	}
	out, _ = st.Outbox(nil, 100)
	if len(out) != 2 || out[0].Index != 5 || out[1].Index != 6 {
		t.Fatalf("after the ack the outbox holds %+v; want entries 5 and 6", out)
	}
	log, err := st.Deliveries("o1", store.WebhookID(1), 10)
	if err != nil || len(log) != 2 || log[0].Outcome != store.DeliveryFailed || log[1].Outcome != store.DeliveryDelivered || log[0].Error != "connection refused" {
		t.Fatalf("delivery log %+v %v; want the failure first, then the delivery", log, err)
	}

	// Deleting the webhook drops its log; its outbox entry is dropped by
	// the deliverer's ack, which then logs nothing.
	if err := result(t, f.Apply(logsOf(8, appendCommand(nil, &deleteWebhookCmd{Owner: "o1", ID: store.WebhookID(1)}))[0])).Err; err != nil {
		t.Fatal(err)
	}
	drop := acks[1]
	drop.Outcome = store.DeliveryDropped
	if err := result(t, f.Apply(logsOf(9, appendCommand(nil, &recordDeliveriesCmd{Attempts: []store.DeliveryAttempt{drop}}))[0])).Err; err != nil {
		t.Fatal(err)
	}
	out, _ = st.Outbox(nil, 100)
	log, _ = st.Deliveries("o1", store.WebhookID(1), 10)
	if len(out) != 1 || out[0].Index != 6 || len(log) != 0 {
		t.Fatalf("after delete: outbox %+v, log %+v; want only o2's entry and no log", out, log)
	}
	if err := result(t, f.Apply(logsOf(10, appendCommand(nil, &deleteWebhookCmd{Owner: "o1", ID: store.WebhookID(1)}))[0])).Err; !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v; want ErrNotFound", err)
	}
}

// TestFSMWebhookLimitAndLogBound: an owner has at most
// store.MaxWebhooksPerOwner webhooks; the delivery log keeps the newest
// store.MaxDeliveryLog attempts.
func TestFSMWebhookLimitAndLogBound(t *testing.T) {
	f, st, _ := newTestFSM(t)
	hook := store.Webhook{Owner: "o1", URL: "https://h.example/", Events: store.EventLinkCreated, Secret: testSecret}
	var cmds [][]byte
	for i := 0; i <= store.MaxWebhooksPerOwner; i++ {
		cmds = append(cmds, appendCommand(nil, &createWebhookCmd{W: hook}))
	}
	resps := f.ApplyBatch(logsOf(1, cmds...))
	for i, r := range resps {
		err := result(t, r).Err
		if i < store.MaxWebhooksPerOwner && err != nil {
			t.Fatalf("webhook %d: %v", i+1, err)
		}
		if i == store.MaxWebhooksPerOwner && !errors.Is(err, store.ErrTooManyWebhooks) {
			t.Fatalf("webhook %d: %v; want ErrTooManyWebhooks", i+1, err)
		}
	}
	// The wire carries the refusal as itself.
	if code := codeOf(store.ErrTooManyWebhooks); code != errCodeTooManyWebhooks || !errors.Is(sentinelOf(code), store.ErrTooManyWebhooks) {
		t.Fatalf("wire code %d", code)
	}
	id := store.WebhookID(1)
	next := uint64(len(cmds) + 1)
	const total = store.MaxDeliveryLog + 30
	for sent := 0; sent < total; {
		var batch []store.DeliveryAttempt
		for j := 0; j < 50 && sent < total; j++ {
			batch = append(batch, store.DeliveryAttempt{Owner: "o1", WebhookID: id, Index: 1, EventID: "e" + string(rune('a'+sent%26)), Type: store.EventLinkCreated, At: int64(sent), Attempt: uint64(sent + 1), Outcome: store.DeliveryFailed})
			sent++
		}
		if err := result(t, f.Apply(logsOf(next, appendCommand(nil, &recordDeliveriesCmd{Attempts: batch}))[0])).Err; err != nil {
			t.Fatal(err)
		}
		next++
	}
	log, err := st.Deliveries("o1", id, 1000)
	if err != nil || len(log) != store.MaxDeliveryLog {
		t.Fatalf("log holds %d (%v); want %d", len(log), err, store.MaxDeliveryLog)
	}
	if log[0].Attempt != total || log[len(log)-1].Attempt != total-store.MaxDeliveryLog+1 {
		t.Fatalf("log runs from attempt %d to %d; want the newest %d, %d down to %d", log[0].Attempt, log[len(log)-1].Attempt, store.MaxDeliveryLog, total, total-store.MaxDeliveryLog+1)
	}
}

func FuzzDecodeWebhookCommand(f *testing.F) {
	for _, c := range sampleWebhookCommands() {
		f.Add(appendCommand(nil, c))
	}
	f.Add([]byte{byte(cmdRecordDeliveries), 1, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 0 && (data[0] < byte(cmdCreateWebhook) || data[0] > byte(cmdRecordDeliveries)) {
			return // the other types are FuzzDecodeCommand's
		}
		_, c, err := decodeCommand(data)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) && !errors.Is(err, errUnknownCommand) {
				t.Fatalf("got error %v; want ErrCorrupt or errUnknownCommand", err)
			}
			return
		}
		_, c2, err := decodeCommand(appendCommand(nil, c))
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip: got %+v %v; want %+v", c2, err, c)
		}
	})
}
