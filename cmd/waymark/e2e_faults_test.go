package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// devNode starts a --dev node (every role, shipping to itself) with a
// fixed name, and returns it with its API key.
func devNode(t *testing.T, dir string, extra ...string) (*proc, string) {
	t.Helper()
	args := append([]string{"--dev", "--name", "edge-1", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
		"--ingest-ip-rate", "100000"}, extra...)
	p := startNode(t, dir, args...)
	base := "http://" + p.http
	waitFor(t, "ready", 30*time.Second, func() bool { return do(t, "GET", base+"/readyz", "", "").status == 200 })
	var key string
	waitFor(t, "dev key", 30*time.Second, func() bool { key = readKeyMaybe(filepath.Join(dir, "dev-api-key")); return key != "" })
	return p, key
}

func clickN(t *testing.T, base, code string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if r := do(t, "GET", base+"/"+code, "", "", "User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"); r.status != 302 {
			t.Fatalf("redirect %d: got %d; want 302", i, r.status)
		}
	}
}

// TestE2EWipedSegmentFolder: a node whose segment folder is wiped starts
// its sequence numbers again at 1 under the same name. Those are new
// segments (a new incarnation), so every click is stored, none taken for
// a duplicate of a segment the aggregator saw before the wipe.
func TestE2EWipedSegmentFolder(t *testing.T) {
	dir := t.TempDir()
	p, key := devNode(t, dir)
	base := "http://" + p.http
	code := do(t, "POST", base+"/v1/links", key, `{"url":"https://dest.example/"}`).json(t)["code"].(string)
	const N, M = 23, 17
	clickN(t, base, code, N)
	waitFor(t, "first clicks stored", 30*time.Second, func() bool { return eventsCount(t, p, "--link", code) == N })
	waitFor(t, "everything shipped", 30*time.Second, func() bool { return shippedAll(t, base) })
	p.stop(t)

	if err := os.RemoveAll(filepath.Join(dir, "segments")); err != nil {
		t.Fatal(err)
	}
	p, _ = devNode(t, dir)
	base = "http://" + p.http
	clickN(t, base, code, M)
	waitFor(t, "restarted node shipped everything", 30*time.Second, func() bool {
		return metric(t, base, "waymark_ingest_shipped_events_total") == M
	})
	if got := eventsCount(t, p, "--link", code); got != N+M {
		t.Fatalf("after wiping the segment folder: %d clicks stored; want %d", got, N+M)
	}
}

// TestE2EReadyWhileShippingLags: an edge whose aggregator is unreachable
// keeps serving redirects and stays ready; the lag shows in /metrics,
// the health detail and `waymark status`.
func TestE2EReadyWhileShippingLags(t *testing.T) {
	dir := t.TempDir()
	p, key := devNode(t, dir, "--role", "voter,edge", "--aggregator-url", "http://127.0.0.1:1", "--max-ship-lag", "1s")
	base := "http://" + p.http
	code := do(t, "POST", base+"/v1/links", key, `{"url":"https://dest.example/"}`).json(t)["code"].(string)
	clickN(t, base, code, 5)
	waitFor(t, "ship lag past --max-ship-lag", 30*time.Second, func() bool {
		return metric(t, base, "waymark_ingest_oldest_pending_age_seconds") > 2
	})
	if r := do(t, "GET", base+"/readyz", "", ""); r.status != 200 {
		t.Fatalf("readyz with a lagging shipper: got %d %s; want 200", r.status, r.body)
	}
	if r := do(t, "GET", base+"/"+code, "", ""); r.status != 302 {
		t.Fatalf("redirect with a lagging shipper: got %d; want 302", r.status)
	}
	if v := metric(t, base, "waymark_ingest_pending_bytes"); v <= 0 {
		t.Fatalf("waymark_ingest_pending_bytes = %v; want > 0", v)
	}

	r := do(t, "GET", base+"/readyz/detail", "", "")
	if r.status != 200 {
		t.Fatalf("readyz/detail: got %d %s; want 200", r.status, r.body)
	}
	var detail struct {
		Ready  bool `json:"ready"`
		Checks []struct {
			Name  string  `json:"name"`
			State string  `json:"state"`
			Value float64 `json:"value"`
			Limit float64 `json:"limit"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(r.body, &detail); err != nil {
		t.Fatalf("readyz/detail is not JSON: %v: %s", err, r.body)
	}
	states := map[string]string{}
	values := map[string]float64{}
	for _, c := range detail.Checks {
		states[c.Name], values[c.Name] = c.State, c.Value
	}
	if !detail.Ready || states["raft"] != "pass" || states["store"] != "pass" {
		t.Fatalf("readyz/detail: %s; want ready with raft and store passing", r.body)
	}
	if states["ship_lag"] != "warn" || values["ship_lag"] <= 1 {
		t.Fatalf("readyz/detail ship_lag: state %q value %v; want warn and over 1s: %s", states["ship_lag"], values["ship_lag"], r.body)
	}
	if values["pending_bytes"] <= 0 {
		t.Fatalf("readyz/detail pending_bytes = %v; want > 0: %s", values["pending_bytes"], r.body)
	}

	env := []string{"WAYMARK_ADMIN_ADDR=" + p.admin, "WAYMARK_TOKEN=" + readKey(t, filepath.Join(dir, "operator-token"))}
	out, errOut, exit := runCLI(t, env, "status", "-format", "json")
	if exit != 0 {
		t.Fatalf("waymark status: exit %d: %s", exit, errOut)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status json: %v: %s", err, out)
	}
	ship, _ := st["shipping"].(map[string]any)
	if lag, _ := ship["oldest_pending_seconds"].(float64); lag <= 1 || st["ready"] != true {
		t.Fatalf("status: shipping %v ready %v; want a lag over 1s and ready", st["shipping"], st["ready"])
	}
	out, _, _ = runCLI(t, env, "status")
	if !strings.Contains(out, "ship lag") || !strings.Contains(out, "bad segments") {
		t.Fatalf("status table lacks the shipping rows:\n%s", out)
	}
}

// TestE2ESaltSurvivesRestart: the same visitor (address, user agent)
// before and after a restart on the same UTC day is one visitor.
func TestE2ESaltSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	p, key := devNode(t, dir)
	base := "http://" + p.http
	site := do(t, "POST", base+"/v1/sites", key, `{"domain":"shop.example","timezone":"UTC"}`)
	if site.status != 201 {
		t.Fatalf("create site: got %d %s", site.status, site.body)
	}
	day := time.Now().UTC().Format(time.DateOnly)
	pageview := func(base, path string) {
		body := fmt.Sprintf(`{"n":"pageview","u":"https://shop.example%s","d":"shop.example"}`, path)
		r := do(t, "POST", base+"/api/event", "", body, "Content-Type", "text/plain", "Origin", "https://shop.example",
			"User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0", "X-Forwarded-For", "198.51.100.7")
		if r.status != 202 {
			t.Fatalf("event: got %d: %s", r.status, r.body)
		}
	}
	query := func(base string) (visitors, pageviews float64) {
		r := do(t, "POST", base+"/api/v2/query", key, `{"site_id":"shop.example","metrics":["visitors","pageviews"],"date_range":"day"}`)
		var out struct {
			Results []struct {
				Metrics []float64 `json:"metrics"`
			} `json:"results"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &out) != nil || len(out.Results) != 1 || len(out.Results[0].Metrics) != 2 {
			return -1, -1
		}
		return out.Results[0].Metrics[0], out.Results[0].Metrics[1]
	}
	pageview(base, "/a")
	waitFor(t, "first pageview counted", 30*time.Second, func() bool { _, pv := query(base); return pv == 1 })
	p.stop(t)

	p, _ = devNode(t, dir)
	base = "http://" + p.http
	pageview(base, "/b")
	waitFor(t, "second pageview counted", 30*time.Second, func() bool { _, pv := query(base); return pv == 2 })
	if time.Now().UTC().Format(time.DateOnly) != day {
		t.Skip("the UTC day changed during the test; the salt rotated as it should")
	}
	if v, _ := query(base); v != 1 {
		t.Fatalf("one visitor before and after a restart: got %v visitors; want 1", v)
	}
	info, err := os.Stat(filepath.Join(dir, "visitor-salts"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("salt file: %v, mode %v; want it with mode 0600", err, info)
	}
}
