package harness

import "testing"

func TestParseListenAddr(t *testing.T) {
	tests := []struct {
		name   string
		line   string
		msg    string
		want   string
		wantOK bool
	}{
		{"slog text", `time=2026-11-30T10:00:00.000Z level=INFO msg="http listening" addr=127.0.0.1:43117`, "http listening", "127.0.0.1:43117", true},
		{"slog text quoted addr", `level=INFO msg="http listening" component=edge addr="127.0.0.1:8080"`, "http listening", "127.0.0.1:8080", true},
		{"slog text ipv6", `level=INFO msg="http listening" addr=[::1]:8080`, "http listening", "[::1]:8080", true},
		{"slog text address key", `level=INFO msg="http listening" address=127.0.0.1:9`, "http listening", "127.0.0.1:9", true},
		{"slog text other msg", `level=INFO msg="admin listening" addr=127.0.0.1:9000`, "http listening", "", false},
		{"slog text prefixed msg", `level=INFO msg="admin http listening" addr=127.0.0.1:9000`, "http listening", "", false},
		{"slog text case", `level=INFO msg="HTTP listening" addr=127.0.0.1:1`, "http listening", "127.0.0.1:1", true},
		{"slog text port zero", `level=INFO msg="http listening" addr=127.0.0.1:0`, "http listening", "", false},
		{"slog text no addr", `level=INFO msg="http listening"`, "http listening", "", false},
		{"slog text escaped quote", `level=INFO msg="http \"listening\"" addr=127.0.0.1:5`, `http "listening"`, "127.0.0.1:5", true},
		{"default logger", `2026/11/30 10:00:00 INFO http listening addr=127.0.0.1:8080`, "http listening", "127.0.0.1:8080", true},
		{"default logger other", `2026/11/30 10:00:00 INFO admin http listening addr=127.0.0.1:8080`, "http listening", "", false},
		{"bare message", `http listening addr=127.0.0.1:8080`, "http listening", "127.0.0.1:8080", true},
		{"json", `{"time":"2026-11-30T10:00:00Z","level":"INFO","msg":"http listening","addr":"127.0.0.1:43117"}`, "http listening", "127.0.0.1:43117", true},
		{"json spaced", `  {"msg": "http listening", "region": "eu", "addr": "127.0.0.1:1"}  `, "http listening", "127.0.0.1:1", true},
		{"json other msg", `{"msg":"raft listening","addr":"127.0.0.1:7000"}`, "http listening", "", false},
		{"json addr not string", `{"msg":"http listening","addr":8080}`, "http listening", "", false},
		{"json broken", `{"msg":"http listening","addr":"127.0.0.1:1"`, "http listening", "", false},
		{"empty", ``, "http listening", "", false},
		{"garbage", `=== "unterminated addr=1`, "http listening", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseListenAddr(tt.line, tt.msg)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseListenAddr(%q) = %q, %v; want %q, %v", tt.line, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzParseListenAddr(f *testing.F) {
	f.Add(`level=INFO msg="http listening" addr=127.0.0.1:43117`)
	f.Add(`{"msg":"http listening","addr":"127.0.0.1:1"}`)
	f.Add(`2026/11/30 10:00:00 INFO http listening addr=[::1]:8080`)
	f.Add(`msg="\" addr=`)
	f.Add(`{"msg":`)
	f.Fuzz(func(t *testing.T, line string) {
		addr, ok := ParseListenAddr(line, "http listening")
		if ok != (addr != "") {
			t.Fatalf("ParseListenAddr(%q) = %q, %v; ok must match a non-empty address", line, addr, ok)
		}
		if ok && !isHostPort(addr) {
			t.Fatalf("ParseListenAddr(%q) = %q; not host:port", line, addr)
		}
	})
}
