package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// receiver is a webhook endpoint on 127.0.0.1 that checks every
// delivery's signature itself (HMAC-SHA256 of "t.body" keyed by the
// secret, as the README describes it), and can go down (its listener
// closed: connection refused) and come back on the same port.
type receiver struct {
	t      *testing.T
	addr   string
	delay  time.Duration
	mu     sync.Mutex
	secret string
	srv    *http.Server
	got    []delivery // every valid delivery, in arrival order, duplicates included
	bad    []string   // deliveries whose signature or id did not check
}

type delivery struct {
	ID        string
	Type      string
	CreatedAt string
	Data      map[string]any
	Header    http.Header
}

func startReceiver(t *testing.T) *receiver {
	r := &receiver{t: t}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.down)
	return r
}

func (r *receiver) url() string { return "http://" + r.addr + "/hook" }

func (r *receiver) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle)}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go srv.Serve(ln)
}

// down closes the listener and every connection: deliveries are refused.
func (r *receiver) down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// up listens again on the same address.
func (r *receiver) up() {
	var ln net.Listener
	waitFor(r.t, "receiver port free again", 10*time.Second, func() bool {
		var err error
		ln, err = net.Listen("tcp", r.addr)
		return err == nil
	})
	r.serve(ln)
}

func (r *receiver) setSecret(s string) { r.mu.Lock(); r.secret = s; r.mu.Unlock() }

func (r *receiver) handle(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if r.delay > 0 {
		time.Sleep(r.delay)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var d delivery
	if err := json.Unmarshal(body, &d); err != nil {
		r.bad = append(r.bad, "not JSON: "+string(body))
		http.Error(w, "bad body", 400)
		return
	}
	if !verifySignature(r.secret, req.Header.Get("Waymark-Signature"), body) {
		r.bad = append(r.bad, "bad signature on "+d.ID)
		http.Error(w, "bad signature", 400)
		return
	}
	if req.Header.Get("Waymark-Event-Id") != d.ID || d.ID == "" {
		r.bad = append(r.bad, fmt.Sprintf("event id header %q, body %q", req.Header.Get("Waymark-Event-Id"), d.ID))
		http.Error(w, "bad id", 400)
		return
	}
	d.Header = req.Header.Clone()
	r.got = append(r.got, d)
	w.WriteHeader(204)
}

// verifySignature checks "t=<unix>,v1=<hex>" against the secret, the way
// a receiver following the README would, and a time within 5 minutes.
func verifySignature(secret, header string, body []byte) bool {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(body)))
	want := hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(want), []byte(sig))
}

// unique returns the valid deliveries, one per event id (the first).
func (r *receiver) unique() map[string]delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]delivery{}
	for _, d := range r.got {
		if _, ok := out[d.ID]; !ok {
			out[d.ID] = d
		}
	}
	return out
}

func (r *receiver) badOnes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}

// seen returns "type code" for every unique delivery.
func (r *receiver) seen() map[string]int {
	out := map[string]int{}
	for _, d := range r.unique() {
		code, _ := d.Data["code"].(string)
		out[d.Type+" "+code]++
	}
	return out
}

func createWebhook(t *testing.T, base, key, url string, events ...string) (id, secret string) {
	t.Helper()
	ev, _ := json.Marshal(events)
	r := do(t, "POST", base+"/v1/webhooks", key, fmt.Sprintf(`{"url":%q,"events":%s}`, url, ev))
	if r.status != 201 {
		t.Fatalf("create webhook: %d %s", r.status, r.body)
	}
	m := r.json(t)
	id, _ = m["id"].(string)
	secret, _ = m["secret"].(string)
	if id == "" || !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("create webhook answered %s", r.body)
	}
	return id, secret
}

func createCode(t *testing.T, base, key, dest string) string {
	t.Helper()
	r := createRetrying(t, base+"/v1/links", key, fmt.Sprintf(`{"url":%q}`, dest), "idem-"+dest)
	if r.status != 201 {
		t.Fatalf("create link: %d %s", r.status, r.body)
	}
	return r.json(t)["code"].(string)
}

// TestE2EWebhooksSignedAndRedelivered: every delivery is signed with the
// webhook's secret and carries its event id; while the receiver is down
// (and across a restart of the node) the events wait in the outbox, and
// once it is back every one of them arrives.
func TestE2EWebhooksSignedAndRedelivered(t *testing.T) {
	dir := t.TempDir()
	flags := []string{"--webhook-allow-private", "--webhook-retry-base", "100ms"}
	p, key := devNode(t, dir, flags...)
	base := "http://" + p.http
	rcv := startReceiver(t)
	id, secret := createWebhook(t, base, key, rcv.url(), "link.created", "link.updated", "link.deleted", "link.blocked")
	rcv.setSecret(secret)

	// The secret is shown once: neither the list nor the webhook has it.
	for _, path := range []string{"/v1/webhooks", "/v1/webhooks/" + id} {
		r := do(t, "GET", base+path, key, "")
		if r.status != 200 || strings.Contains(string(r.body), secret) || !strings.Contains(string(r.body), id) {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
	}

	first := createCode(t, base, key, "https://one.example/")
	waitFor(t, "link.created of the first link", 30*time.Second, func() bool { return rcv.seen()["link.created "+first] == 1 })
	for _, d := range rcv.unique() {
		if d.Data["url"] != "https://one.example/" || d.Header.Get("Waymark-Event-Type") != "link.created" {
			t.Fatalf("delivery %+v", d)
		}
	}

	// Receiver down: 3 creates, an edit and a delete wait.
	rcv.down()
	want := map[string]int{"link.created " + first: 1}
	var codes []string
	for i := 0; i < 3; i++ {
		c := createCode(t, base, key, fmt.Sprintf("https://down%d.example/", i))
		codes = append(codes, c)
		want["link.created "+c] = 1
	}
	if r := do(t, "PATCH", base+"/v1/links/"+codes[0], key, `{"url":"https://edited.example/"}`); r.status != 200 {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	want["link.updated "+codes[0]] = 1
	if r := do(t, "DELETE", base+"/v1/links/"+codes[1], key, ""); r.status/100 != 2 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	want["link.deleted "+codes[1]] = 1
	// An operator's takedown is the owner's event too.
	opEnv := []string{"WAYMARK_ADMIN_ADDR=" + p.admin, "WAYMARK_TOKEN=" + readKey(t, filepath.Join(dir, "operator-token"))}
	if out, errOut, exit := runCLI(t, opEnv, "links", "block", codes[2], "--reason", "phishing"); exit != 0 {
		t.Fatalf("links block: %d %s %s", exit, out, errOut)
	}
	want["link.blocked "+codes[2]] = 1
	waitFor(t, "failed attempts while the receiver is down", 30*time.Second, func() bool {
		return metric(t, base, `waymark_webhook_deliveries_total{outcome="failed"}`) >= 3
	})

	// A restart in between: the outbox is in the replicated store.
	p.stop(t)
	last := ""
	p, _ = devNode(t, dir, flags...)
	base = "http://" + p.http
	last = createCode(t, base, key, "https://after-restart.example/")
	want["link.created "+last] = 1

	rcv.up()
	waitFor(t, "every event delivered", 60*time.Second, func() bool { return len(rcv.seen()) == len(want) })
	if got := rcv.seen(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %v; want %v", got, want)
	}
	if bad := rcv.badOnes(); len(bad) > 0 {
		t.Fatalf("deliveries that did not verify: %v", bad)
	}
	// Each delivery carries the link as its change left it.
	for _, d := range rcv.unique() {
		if d.Type == "link.updated" && d.Data["url"] != "https://edited.example/" ||
			d.Type == "link.deleted" && d.Data["status"] != "disabled" || d.Type == "link.blocked" && d.Data["status"] != "blocked" {
			t.Fatalf("%s carries %v", d.Type, d.Data)
		}
	}

	// The delivery log shows the failures and the deliveries.
	waitFor(t, "outbox empty", 30*time.Second, func() bool {
		return metric(t, base, "waymark_webhook_queue_depth") == 0
	})
	r := do(t, "GET", base+"/v1/webhooks/"+id+"/deliveries", key, "")
	if r.status != 200 {
		t.Fatalf("deliveries: %d %s", r.status, r.body)
	}
	var log struct {
		Deliveries []struct {
			EventID string `json:"event_id"`
			Outcome string `json:"outcome"`
		}
	}
	json.Unmarshal(r.body, &log)
	outcomes := map[string]int{}
	for _, d := range log.Deliveries {
		outcomes[d.Outcome]++
	}
	if outcomes["delivered"] < len(want) || outcomes["failed"] < 3 {
		t.Fatalf("delivery log outcomes %v; want >= %d delivered and >= 3 failed: %s", outcomes, len(want), r.body)
	}

	// Deleted: 404 afterwards, and no more deliveries.
	if r := do(t, "DELETE", base+"/v1/webhooks/"+id, key, ""); r.status != 204 {
		t.Fatalf("delete webhook: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", base+"/v1/webhooks/"+id, key, ""); r.status != 404 || r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("deleted webhook: %d %s", r.status, r.body)
	}
}

// TestE2EWebhookURLsRefused: without --webhook-allow-private, URLs to
// loopback, private and link-local addresses are refused with
// problem+json, and bad bodies with invalid-request.
func TestE2EWebhookURLsRefused(t *testing.T) {
	p, key := devNode(t, t.TempDir())
	base := "http://" + p.http
	for _, u := range []string{"http://127.0.0.1:9/x", "http://10.1.2.3/x", "http://169.254.169.254/latest", "http://[::1]/x",
		"http://localhost:8080/x", "http://192.168.0.1/x", "http://[fe80::1]/x", "http://100.64.0.1/x"} {
		r := do(t, "POST", base+"/v1/webhooks", key, fmt.Sprintf(`{"url":%q,"events":["link.created"]}`, u))
		if r.status != 422 || r.header.Get("Content-Type") != "application/problem+json" || r.json(t)["type"] != "/problems/webhook-url-forbidden" {
			t.Errorf("%s: %d %s", u, r.status, r.body)
		}
	}
	for _, body := range []string{`{"url":"ftp://x.example/","events":["link.created"]}`, `{"url":"https://x.example/","events":[]}`,
		`{"url":"https://x.example/","events":["link.exploded"]}`, `{"url":"https://x.example/","events":["link.created"],"extra":1}`} {
		r := do(t, "POST", base+"/v1/webhooks", key, body)
		if r.status != 400 || r.json(t)["type"] != "/problems/invalid-request" {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}
	if r := do(t, "GET", base+"/v1/webhooks", key, ""); r.status != 200 || strings.TrimSpace(string(r.body)) != `{"webhooks":[]}` {
		t.Fatalf("nothing was created: %d %s", r.status, r.body)
	}
}

// TestE2EWebhookLeaderKill: a three-voter cluster delivers to a slow
// receiver; the leader is SIGKILLed while deliveries are under way, and
// the new leader delivers every event the old one had not acked (some
// twice; the receiver dedups by event id).
func TestE2EWebhookLeaderKill(t *testing.T) {
	c := newCluster(t)
	flags := []string{"--webhook-allow-private", "--webhook-retry-base", "100ms"}
	c.threeVotersAndEdge(flags, flags...)
	key := c.createOwner("v1", "hooks")
	e1 := "http://" + c.nodes["e1"].http
	rcv := startReceiver(t)
	rcv.delay = 500 * time.Millisecond
	_, secret := createWebhook(t, e1, key, rcv.url(), "link.created")
	rcv.setSecret(secret)
	leader := c.leader("e1")
	if leader == "" || leader == "e1" {
		t.Fatalf("leader %q", leader)
	}

	const N = 24
	want := map[string]int{}
	for i := 0; i < N; i++ {
		code := createCode(t, e1, key, fmt.Sprintf("https://kill%d.example/", i))
		want["link.created "+code] = 1
	}
	// 8 at a time, half a second each: the kill lands with most of them
	// still to send, and some sent but not acknowledged.
	waitFor(t, "first deliveries", 30*time.Second, func() bool { return len(rcv.unique()) >= 1 })
	c.nodes[leader].kill()
	delivered := len(rcv.unique())
	if delivered >= N {
		t.Fatalf("all %d delivered before the kill: the test did not kill the leader during delivery", N)
	}
	waitFor(t, "every event delivered after the leader kill", 90*time.Second, func() bool { return len(rcv.seen()) == N })
	if got := rcv.seen(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %v; want %v", got, want)
	}
	if bad := rcv.badOnes(); len(bad) > 0 {
		t.Fatalf("deliveries that did not verify: %v", bad)
	}
	rcv.mu.Lock()
	total := len(rcv.got)
	rcv.mu.Unlock()
	t.Logf("%d unique events, %d deliveries (duplicates from the kill: %d); %d were in before the kill", N, total, total-N, delivered)
}

// TestE2EWebhookClicks: link.clicked deliveries come from the aggregator
// in batches of at most --webhook-click-batch clicks, and together carry
// exactly the clicks made: 7 on one link, 5 on another, 2 on a third
// whose click limit of 2 then takes it out of service (link.limit_reached).
// The receiver is down while the clicks come in and the node restarts
// before it is back: the aggregator's outbox keeps them.
func TestE2EWebhookClicks(t *testing.T) {
	dir := t.TempDir()
	flags := []string{"--webhook-allow-private", "--webhook-click-batch", "4", "--webhook-retry-base", "100ms"}
	p, key := devNode(t, dir, flags...)
	base := "http://" + p.http
	rcv := startReceiver(t)
	_, secret := createWebhook(t, base, key, rcv.url(), "link.clicked", "link.limit_reached")
	rcv.setSecret(secret)
	a := createCode(t, base, key, "https://clicks-a.example/")
	b := createCode(t, base, key, "https://clicks-b.example/")
	r := do(t, "POST", base+"/v1/links", key, `{"url":"https://clicks-c.example/","click_limit":2}`)
	if r.status != 201 {
		t.Fatalf("create limited link: %d %s", r.status, r.body)
	}
	c := r.json(t)["code"].(string)

	rcv.down()
	clickN(t, base, a, 7)
	clickN(t, base, b, 5)
	clickN(t, base, c, 2)
	waitFor(t, "14 clicks in the aggregator's webhook outbox", 60*time.Second, func() bool {
		return metric(t, base, "waymark_webhook_clicks_queued_total") == 14
	})
	waitFor(t, "a failed click delivery", 30*time.Second, func() bool {
		return metric(t, base, `waymark_webhook_deliveries_total{outcome="failed"}`) >= 1
	})
	p.stop(t)
	p, _ = devNode(t, dir, flags...)
	base = "http://" + p.http
	rcv.up()

	count := func() (map[string]int, int, int) {
		per := map[string]int{}
		ids := map[string]bool{}
		maxBatch := 0
		for _, d := range rcv.unique() {
			if d.Type != "link.clicked" {
				continue
			}
			clicks, _ := d.Data["clicks"].([]any)
			maxBatch = max(maxBatch, len(clicks))
			if n, _ := d.Data["count"].(float64); int(n) != len(clicks) {
				t.Fatalf("batch %+v", d)
			}
			for _, c := range clicks {
				m := c.(map[string]any)
				if id := m["id"].(string); !ids[id] {
					ids[id] = true
					per[m["code"].(string)]++
				}
			}
		}
		return per, len(ids), maxBatch
	}
	waitFor(t, "14 clicks delivered", 60*time.Second, func() bool { _, n, _ := count(); return n >= 14 })
	per, n, maxBatch := count()
	if per[a] != 7 || per[b] != 5 || per[c] != 2 || n != 14 {
		t.Fatalf("clicks delivered %v (%d in all); want %s:7 %s:5 %s:2", per, n, a, b, c)
	}
	if maxBatch > 4 {
		t.Fatalf("a batch carried %d clicks; the limit is 4", maxBatch)
	}
	waitFor(t, "link.limit_reached of the limited link", 60*time.Second, func() bool { return rcv.seen()["link.limit_reached "+c] == 1 })
	for _, d := range rcv.unique() {
		if d.Type == "link.limit_reached" && d.Data["status"] != "limited" {
			t.Fatalf("link.limit_reached carries %v", d.Data)
		}
	}
	if bad := rcv.badOnes(); len(bad) > 0 {
		t.Fatalf("deliveries that did not verify: %v", bad)
	}
}

// TestE2EWebhookRetryWindow: events a receiver never takes are dropped
// once their retry window (here 2 s) is over, each with a "dropped" entry
// in the delivery log and the metric; the receiver, back, gets only the
// events made after.
func TestE2EWebhookRetryWindow(t *testing.T) {
	p, key := devNode(t, t.TempDir(), "--webhook-allow-private", "--webhook-retry-base", "100ms", "--webhook-retry-window", "2s")
	base := "http://" + p.http
	rcv := startReceiver(t)
	id, secret := createWebhook(t, base, key, rcv.url(), "link.created")
	rcv.setSecret(secret)
	rcv.down()
	var lost []string
	for i := 0; i < 3; i++ {
		lost = append(lost, createCode(t, base, key, fmt.Sprintf("https://lost%d.example/", i)))
	}
	waitFor(t, "3 events dropped", 60*time.Second, func() bool {
		return metric(t, base, `waymark_webhook_deliveries_total{outcome="dropped"}`) == 3 && metric(t, base, "waymark_webhook_queue_depth") == 0
	})
	rcv.up()
	kept := createCode(t, base, key, "https://kept.example/")
	waitFor(t, "the new event delivered", 30*time.Second, func() bool { return rcv.seen()["link.created "+kept] == 1 })
	if got := rcv.seen(); len(got) != 1 {
		t.Fatalf("delivered %v; want only %s (the others were dropped: %v)", got, kept, lost)
	}
	var log struct {
		Deliveries []struct {
			EventID string `json:"event_id"`
			Outcome string `json:"outcome"`
		}
	}
	json.Unmarshal(do(t, "GET", base+"/v1/webhooks/"+id+"/deliveries", key, "").body, &log)
	dropped := map[string]bool{}
	for _, d := range log.Deliveries {
		if d.Outcome == "dropped" {
			dropped[d.EventID] = true
		}
	}
	if len(dropped) != 3 {
		t.Fatalf("delivery log %+v; want 3 events dropped", log.Deliveries)
	}
}
