package harness

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
)

// addrKeys are the attribute names that may carry a bound address, in order
// of preference. "addr" is what Waymark logs; the others keep the parser
// working if a component words it differently.
var addrKeys = []string{"addr", "address", "http_addr", "listen"}

// ParseListenAddr looks for a log line announcing a bound address. It accepts
// log/slog JSON lines ({"msg":"http listening","addr":"127.0.0.1:8080"}),
// slog text lines (msg="http listening" addr=127.0.0.1:8080), and the
// default-logger form (2026/11/30 10:00:00 INFO http listening
// addr=127.0.0.1:8080). msg is compared without regard to case. It returns
// the address and true only when the value parses as host:port.
func ParseListenAddr(line, msg string) (string, bool) {
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "{") {
		return parseJSONListenAddr(line, msg)
	}
	return parseTextListenAddr(line, msg)
}

func parseJSONListenAddr(line, msg string) (string, bool) {
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		return "", false
	}
	got, _ := rec["msg"].(string)
	if !strings.EqualFold(strings.TrimSpace(got), msg) {
		return "", false
	}
	for _, k := range addrKeys {
		if v, ok := rec[k].(string); ok && isHostPort(v) {
			return v, true
		}
	}
	return "", false
}

func parseTextListenAddr(line, msg string) (string, bool) {
	attrs, bare := splitLogfmt(line)
	if m, ok := attrs["msg"]; ok {
		if !strings.EqualFold(strings.TrimSpace(m), msg) {
			return "", false
		}
	} else if !isBareMessage(bare, msg) {
		return "", false
	}
	for _, k := range addrKeys {
		if v, ok := attrs[k]; ok && isHostPort(v) {
			return v, true
		}
	}
	return "", false
}

// splitLogfmt splits a logfmt-style line into key=value attributes (values
// may be Go-quoted) and the words that are not attributes, joined by single
// spaces. It never fails: malformed pieces become bare words.
func splitLogfmt(line string) (map[string]string, string) {
	attrs := make(map[string]string)
	var bare []string
	for s := line; ; {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			break
		}
		var tok string
		tok, s = nextToken(s)
		key, val, ok := strings.Cut(tok, "=")
		if !ok || key == "" || strings.ContainsAny(key, `"`) {
			bare = append(bare, tok)
			continue
		}
		if strings.HasPrefix(val, `"`) {
			if uq, err := strconv.Unquote(val); err == nil {
				val = uq
			}
		}
		attrs[key] = val
	}
	return attrs, strings.Join(bare, " ")
}

// nextToken returns the text up to the first space that is not inside a
// double-quoted section, and the rest.
func nextToken(s string) (string, string) {
	inQuote, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case inQuote && c == '\\':
			escaped = true
		case c == '"':
			inQuote = !inQuote
		case !inQuote && (c == ' ' || c == '\t'):
			return s[:i], s[i:]
		}
	}
	return s, ""
}

// isBareMessage reports whether the non-attribute words of a default-logger
// line ("2026/11/30 10:00:00 INFO http listening") are exactly msg, either
// alone or right after a level name, ignoring case.
func isBareMessage(bare, msg string) bool {
	bare, msg = strings.ToLower(bare), strings.ToLower(strings.TrimSpace(msg))
	if msg == "" {
		return false
	}
	if bare == msg {
		return true
	}
	head, ok := strings.CutSuffix(bare, " "+msg)
	if !ok {
		return false
	}
	words := strings.Fields(head)
	if len(words) == 0 {
		return false
	}
	switch words[len(words)-1] {
	case "debug", "info", "warn", "warning", "error":
		return true
	}
	return false
}

func isHostPort(v string) bool {
	_, port, err := net.SplitHostPort(v)
	if err != nil || port == "" {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n < 65536
}
