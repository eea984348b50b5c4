package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
)

func TestRenderClickHouseConfig(t *testing.T) {
	config, users := RenderClickHouseConfig("/tmp/ch&x", 18123, 19000)
	for _, want := range []string{
		"<listen_host>127.0.0.1</listen_host>",
		"<http_port>18123</http_port>",
		"<tcp_port>19000</tcp_port>",
		"<path>/tmp/ch&amp;x/data/</path>",
		"<tmp_path>/tmp/ch&amp;x/tmp/</tmp_path>",
		"<user_files_path>/tmp/ch&amp;x/user_files/</user_files_path>",
		"<log>/tmp/ch&amp;x/log/server.log</log>",
		"<users_config>/tmp/ch&amp;x/users.xml</users_config>",
	} {
		if !strings.Contains(string(config), want) {
			t.Errorf("config lacks %q:\n%s", want, config)
		}
	}
	if strings.Contains(string(config), "interserver_http_port") {
		t.Error("config opens the interserver port; nothing here replicates")
	}
	if !strings.Contains(string(users), "<password></password>") || !strings.Contains(string(users), "<ip>127.0.0.1</ip>") {
		t.Errorf("users config lacks a password-less loopback default user:\n%s", users)
	}
}

func TestStartClickHouseInsertsAndReadsBack(t *testing.T) {
	requireTool(t, func() error { _, err := FindClickHouse(""); return err })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ch, err := StartClickHouse(ctx, ClickHouseOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("StartClickHouse: %v", err)
	}
	defer ch.Stop()
	if ch.Version == "" {
		t.Error("no server version")
	}
	if err := ch.Exec(ctx, "CREATE TABLE t (time DateTime, site String, visitor UInt64) ENGINE = MergeTree() PARTITION BY toDate(time) ORDER BY (site, time)"); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	rows := "1764583200\ts1\t5\n1764586800\ts1\t6\n1764669600\ts1\t5\n1764669600\ts2\t7\n"
	if err := ch.Insert(ctx, "INSERT INTO t FORMAT TabSeparated", []byte(rows)); err != nil {
		t.Fatalf("INSERT: %v", err)
	}
	// 1764583200 is 2025-12-01 10:00 UTC; by hand: s1 has two events of
	// two visitors that day and one the next.
	got, err := ch.Query(ctx, "SELECT toDate(time) AS d, count(), uniq(visitor) FROM t WHERE site = 's1' GROUP BY d ORDER BY d")
	if err != nil {
		t.Fatalf("SELECT: %v", err)
	}
	if want := "2025-12-01\t2\t2\n2025-12-02\t1\t1\n"; got != want {
		t.Errorf("SELECT got %q; want %q", got, want)
	}
	if err := ch.Exec(ctx, "SELECT nosuchcolumn FROM t"); err == nil {
		t.Error("a bad query succeeded; want the server's error")
	}
	checkEventsTable(ctx, t, ch)
	pid := ch.Pid()
	t0 := time.Now()
	if err := ch.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("stopped in %v", time.Since(t0))
	if !ProcessGone(pid) {
		t.Errorf("clickhouse-server %d still exists after Stop", pid)
	}
}

// checkEventsTable loads generated events and one with every character
// TabSeparated escapes into EventsTableDDL's table, and reads them back.
func checkEventsTable(ctx context.Context, t *testing.T, ch *ClickHouse) {
	t.Helper()
	if err := ch.Exec(ctx, EventsTableDDL("events")); err != nil {
		t.Fatalf("CREATE TABLE events: %v", err)
	}
	g, err := NewSpreadGen(spreadTestConfig())
	if err != nil {
		t.Fatal(err)
	}
	var rows []byte
	kinds := map[ingest.Kind]int{}
	var ev ingest.Event
	for g.Next(&ev) {
		rows = AppendEventTSV(rows, &ev)
		kinds[ev.Kind]++
	}
	odd := ingest.Event{
		Kind: ingest.KindCustom, Time: 1764583200123, ID: [16]byte{15: 9}, SiteID: "odd",
		Path: "/a\tb\\c\nd'e", Props: []ingest.Prop{{Key: "it's\\", Value: "t\tn\n"}},
	}
	rows = AppendEventTSV(rows, &odd)
	if err := ch.Insert(ctx, EventsInsert("events"), rows); err != nil {
		t.Fatalf("INSERT events: %v", err)
	}
	got, err := ch.Query(ctx, "SELECT kind, count() FROM events WHERE site != 'odd' GROUP BY kind ORDER BY kind")
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, k := range []ingest.Kind{ingest.KindClick, ingest.KindPageview, ingest.KindEngagement, ingest.KindCustom} {
		want += fmt.Sprintf("%d\t%d\n", k, kinds[k])
	}
	if got != want {
		t.Errorf("events by kind:\n got %q\nwant %q", got, want)
	}
	got, err = ch.Query(ctx, "SELECT hex(path), hex(prop_keys[1]), hex(prop_values[1]), toUInt64(time), ms, toString(id) FROM events WHERE site = 'odd'")
	if err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf("%X\t%X\t%X\t1764583200\t123\t00000000-0000-0000-0000-000000000009\n",
		odd.Path, odd.Props[0].Key, odd.Props[0].Value)
	if got != want {
		t.Errorf("odd event read back as\n %q\nwant %q", got, want)
	}
}
