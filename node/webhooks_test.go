package node

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestSignWebhook checks the signature against a value computed outside
// Go: printf '%s' '1700000000.{"id":"evt_1","type":"link.created"}' |
// openssl dgst -sha256 -hmac 'whsec_0123456789abcdef'.
func TestSignWebhook(t *testing.T) {
	got := SignWebhook("whsec_0123456789abcdef", time.Unix(1700000000, 0), []byte(`{"id":"evt_1","type":"link.created"}`))
	const want = "t=1700000000,v1=44f97fa949ceb0b3e6e266aafa4bee828d3c84b350bedfc1f1ef2f43e3e3b3bf"
	if got != want {
		t.Fatalf("got %s; want %s", got, want)
	}
}

func TestRetryWait(t *testing.T) {
	for attempt, want := range map[uint64]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 13: time.Hour, 60: time.Hour} {
		for range 50 {
			if w := retryWait(time.Second, attempt); w < want/2 || w > want {
				t.Fatalf("attempt %d: waited %v; want between %v and %v", attempt, w, want/2, want)
			}
		}
	}
}

// TestWebhookClientRefusesPrivateAtDial: the delivery client checks the
// address it connects to, after name resolution, so a name that now
// resolves to loopback ("localhost" here) is refused without a
// connection; with private addresses allowed the same request goes
// through.
func TestWebhookClientRefusesPrivateAtDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hits := 0
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits++; w.WriteHeader(204) })}
	go srv.Serve(ln)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	url := "http://localhost:" + port + "/hook"
	r := sendWebhook(context.Background(), webhookClient(false), url, "whsec_0123456789abcdef", "evt_1", "link.created", []byte(`{}`))
	if !errors.Is(r.err, errPrivateAddr) || r.ok() || hits != 0 {
		t.Fatalf("private dial: %+v, %d hits; want refused before connecting", r, hits)
	}
	r = sendWebhook(context.Background(), webhookClient(true), url, "whsec_0123456789abcdef", "evt_1", "link.created", []byte(`{}`))
	if !r.ok() || r.status != 204 || hits != 1 {
		t.Fatalf("allowed dial: %+v, %d hits; want 204 once", r, hits)
	}
}
