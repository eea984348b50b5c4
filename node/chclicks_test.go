package node

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/internal/chserver"
	"github.com/waymark/waymark/rollup/clickhouse"
)

// A ClickHouse aggregator queues a segment's clicks for link.clicked
// once per stored copy: the first store queues its 3 clicks; a retry of
// the recorded segment (its ack lost) queues none; a retry after the
// identity was lost between the insert and its record (a crash) queues
// them again: at least once, as node/WEBHOOKS.md says. Bot clicks are
// delivered too (flagged); a segment without clicks on a hooked link
// queues nothing. The webhook's receiver is a closed port, so nothing
// leaves the outbox.
func TestClickHouseQueuesClicksOncePerStoredCopy(t *testing.T) {
	srv := chserver.StartT(t)
	c := newTestCluster(t)
	n := c.start("n1", "--dev", "--analytics-store", "clickhouse", "--clickhouse-url", srv.URL(), "--clickhouse-database", "w",
		"--webhook-allow-private")
	var key string
	deadline := time.Now().Add(60 * time.Second)
	for n.ch == nil || !n.ch.migrated.Load() || key == "" {
		if time.Now().After(deadline) {
			t.Fatal("no migrated ClickHouse and dev key within 60 s")
		}
		if b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, DevAPIKeyFile)); err == nil {
			key = strings.TrimSpace(string(b))
		}
		time.Sleep(20 * time.Millisecond)
	}
	api := func(path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+n.HTTPAddr()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if resp.StatusCode != 201 || json.Unmarshal(b, &m) != nil {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		return m
	}
	api("/v1/webhooks", `{"url":"http://127.0.0.1:1/hook","events":["link.clicked"]}`)
	code := api("/v1/links", `{"url":"https://queued.example/"}`)["code"].(string)

	now := time.Now().UnixMilli()
	evs := []ingest.Event{
		{Kind: ingest.KindClick, Time: now, Code: code, Node: "e9", VisitorHash: 1},
		{Kind: ingest.KindPageview, Name: "pageview", Time: now, SiteID: "s1", Path: "/", Node: "e9", VisitorHash: 2},
		{Kind: ingest.KindClick, Time: now + 1, Code: code, Node: "e9", VisitorHash: 3, Flags: ingest.FlagBot},
		{Kind: ingest.KindClick, Time: now + 2, Code: "unknown-link", Node: "e9", VisitorHash: 4},
		{Kind: ingest.KindClick, Time: now + 3, Code: code, Node: "e9", VisitorHash: 5},
	}
	for i := range evs {
		evs[i].ID[0], evs[i].ID[1] = 0xc1, byte(i)
	}
	raw := ingest.BuildSegment(ingest.SegmentRef{Node: "e9", Inc: 1, Seq: 1}, time.UnixMilli(now), evs)
	noClicks := ingest.BuildSegment(ingest.SegmentRef{Node: "e9", Inc: 1, Seq: 2}, time.UnixMilli(now), evs[1:2])

	depth := func() int {
		_, d, err := n.clicks.heads(1)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, step := range []struct {
		what      string
		raw       []byte
		lose      bool // the identity lost before the call
		outcome   clickhouse.Outcome
		wantDepth int
	}{
		{"first store", raw, false, clickhouse.Stored, 3},
		{"retry of the recorded segment", raw, false, clickhouse.Duplicate, 3},
		{"retry after the identity was lost", raw, true, clickhouse.Stored, 6},
		{"a segment without clicks", noClicks, false, clickhouse.Stored, 6},
	} {
		if step.lose {
			if err := n.ch.client.Exec(ctx, "TRUNCATE TABLE segments"); err != nil {
				t.Fatal(err)
			}
		}
		res, err := n.ch.storeWithClicks(ctx, step.raw)
		if err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if res.Outcome != step.outcome {
			t.Fatalf("%s: %v; want %v", step.what, res.Outcome, step.outcome)
		}
		if d := depth(); d != step.wantDepth {
			t.Fatalf("%s: %d clicks in the outbox; want %d", step.what, d, step.wantDepth)
		}
	}
	// The stored clicks are counted once, though raw went in twice.
	cnt, err := n.ch.backend.CountEvents(clickhouse.EventFilter{Code: code})
	if err != nil || cnt != 3 {
		t.Fatalf("events of %s: %d, %v; want 3", code, cnt, err)
	}
}
