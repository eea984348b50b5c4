package main

import (
	"fmt"
	"strings"
)

// parseYAML reads referers.yml. It understands exactly the subset that
// file uses, so it needs no YAML library:
//
//	medium:                 (column 0)
//	  Source Name:          (column 2, may be quoted)
//	    parameters:|domains: (column 4)
//	      - value           (column 6, may be quoted, may end in a # comment)
//
// Blank lines and lines that start with '#' are skipped. Anything else is
// an error naming the line, so a format change upstream fails loudly.
func parseYAML(raw []byte) (database, error) {
	db := database{}
	var medium, name, list string
	for i, line := range strings.Split(string(raw), "\n") {
		n := i + 1
		line = strings.TrimRight(line, " \t\r")
		trimmed := strings.TrimLeft(line, " ")
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := len(line) - len(trimmed)
		switch {
		case indent == 0 && strings.HasSuffix(trimmed, ":"):
			medium, name, list = strings.TrimSuffix(trimmed, ":"), "", ""
			db[medium] = map[string][]string{}
		case indent == 2 && strings.HasSuffix(trimmed, ":") && medium != "":
			// A source listed twice under one medium (older copies of the
			// file have a few) keeps the domains of both.
			name, list = strings.TrimSpace(unquote(strings.TrimSuffix(trimmed, ":"))), ""
			if _, ok := db[medium][name]; !ok {
				db[medium][name] = nil
			}
		case indent == 4 && strings.HasSuffix(trimmed, ":") && name != "":
			list = strings.TrimSuffix(trimmed, ":")
		case indent >= 4 && strings.HasPrefix(trimmed, "- ") && list != "":
			if list != "domains" {
				continue // parameters: search-term query keys, not needed here
			}
			v := strings.TrimSpace(strings.TrimPrefix(trimmed, "- "))
			if c := strings.Index(v, " #"); c >= 0 {
				v = strings.TrimSpace(v[:c])
			}
			db[medium][name] = append(db[medium][name], unquote(v))
		default:
			return nil, fmt.Errorf("line %d: unexpected %q", n, line)
		}
	}
	return db, nil
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
