package store

import (
	"bytes"
	"errors"
	"testing"
)

func TestLinkEventOf(t *testing.T) {
	base := Link{Status: StatusActive}
	for _, c := range []struct {
		old  *Link
		to   Status
		want WebhookEvents
	}{
		{nil, StatusActive, EventLinkCreated},
		{&base, StatusActive, EventLinkUpdated},
		{&base, StatusDisabled, EventLinkDeleted},
		{&base, StatusBlocked, EventLinkBlocked},
		{&base, StatusLegalBlock, EventLinkBlocked},
		{&base, StatusLimited, EventLinkLimitReached},
		{&base, StatusReview, EventLinkUpdated},
		{&Link{Status: StatusBlocked}, StatusActive, EventLinkUpdated}, // restored
	} {
		l := Link{Status: c.to}
		if got := linkEventOf(c.old, &l); got != c.want {
			t.Errorf("%v -> %v: %v; want %v", c.old, c.to, got, c.want)
		}
	}
	if n := WebhookEventNames(); len(n) != 6 || n[5] != "link.clicked" {
		t.Fatalf("names %v", n)
	}
	if e, ok := ParseWebhookEvent("link.limit_reached"); !ok || e != EventLinkLimitReached || e.String() != "link.limit_reached" {
		t.Fatalf("parse: %v %v", e, ok)
	}
}

// TestWebhookOutboxSurvivesReopen: the outbox is ordinary replicated
// state: written in the link's batch, it is there after a reopen.
func TestWebhookOutboxSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	w := Webhook{Owner: "o1", URL: "https://h.example/", Events: AllWebhookEvents, Secret: "whsec_0123456789abcdef", Index: 1}
	apply(t, s, 1, func(b *Batch) error { return b.CreateWebhook(&w) })
	l := sampleLink("abc", "o1", 2)
	apply(t, s, 2, func(b *Batch) error { return b.CreateLink(&l) })
	closeStore(t, s)
	s = openStore(t, dir)
	defer closeStore(t, s)
	out, err := s.Outbox(nil, 10)
	if err != nil || len(out) != 1 || out[0].Type != EventLinkCreated || out[0].Link != l || out[0].WebhookID != WebhookID(1) {
		t.Fatalf("outbox %+v %v", out, err)
	}
	if n, err := s.OutboxLen(); n != 1 || err != nil {
		t.Fatalf("len %d %v", n, err)
	}
	if more, err := s.Outbox(OutboxKey(out[0].Index, out[0].Seq, out[0].Owner, out[0].WebhookID), 10); err != nil || len(more) != 0 {
		t.Fatalf("after the last key: %+v %v", more, err)
	}
}

func FuzzDecodeWebhook(f *testing.F) {
	f.Add(AppendWebhook(nil, &Webhook{URL: "https://h.example/", Events: EventLinkCreated, Secret: "whsec_0123456789abcdef", CreatedAt: 5, Index: 3}))
	f.Add([]byte{webhookVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		var w Webhook
		if err := DecodeWebhook(b, "o1", &w); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v; want ErrCorrupt", err)
			}
			return
		}
		if again := AppendWebhook(nil, &w); !bytes.Equal(again, b) {
			t.Fatalf("one encoding: got %x; want %x", again, b)
		}
	})
}

func FuzzDecodeDeliveryAttempt(f *testing.F) {
	f.Add(AppendDeliveryAttempt(nil, &DeliveryAttempt{Index: 4, Seq: 1, EventID: "evt_1", Type: EventLinkBlocked, At: 9, Attempt: 2, Status: 500, LatencyUS: 70, Error: "HTTP 500", Outcome: DeliveryFailed}))
	f.Add([]byte{deliveryVersion, 1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := DeliveryAttempt{Owner: "o1", WebhookID: WebhookID(1)}
		if err := DecodeDeliveryAttempt(b, &d); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v; want ErrCorrupt", err)
			}
			return
		}
		if again := AppendDeliveryAttempt(nil, &d); !bytes.Equal(again, b) {
			t.Fatalf("one encoding: got %x; want %x", again, b)
		}
	})
}

func FuzzDecodeOutboxValue(f *testing.F) {
	l := sampleLink("abc", "o1", 2)
	f.Add(appendOutboxValue(nil, &OutboxEntry{Type: EventLinkDeleted, CreatedAt: 7, Link: l}))
	f.Add([]byte{outboxVersion, 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var e OutboxEntry
		if err := decodeOutboxValue(b, &e); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v; want ErrCorrupt", err)
			}
			return
		}
		if again := appendOutboxValue(nil, &e); !bytes.Equal(again, b) {
			t.Fatalf("one encoding: got %x; want %x", again, b)
		}
	})
}

// BenchmarkApplyCreatesWebhook is BenchmarkApplyCreates for an owner with
// one webhook that wants link.created: each create also writes its outbox
// entry. ns/op is per batch of 100.
func BenchmarkApplyCreatesWebhook(b *testing.B) {
	s := newTestStore(b)
	p := newPermuter(b, testKey)
	w := Webhook{Owner: "own_1", URL: "https://h.example/", Events: EventLinkCreated, Secret: "whsec_0123456789abcdef", Index: 1}
	apply(b, s, 1, func(bt *Batch) error { return bt.CreateWebhook(&w) })
	id := uint64(1)
	b.ReportAllocs()
	for b.Loop() {
		batch := s.NewBatch()
		for range 100 {
			l := sampleLink(string(p.AppendCodeFor(nil, id)), "own_1", id+1)
			if err := batch.CreateLink(&l); err != nil {
				b.Fatal(err)
			}
			id++
		}
		if err := batch.Commit(id); err != nil {
			b.Fatal(err)
		}
		batch.Close()
	}
}
