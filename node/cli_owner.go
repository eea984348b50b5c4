package node

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The owner CLI (`waymark links create|list|...`) talks to the public API
// as an owner, with an API key, the way curl would; the operator commands
// talk to the admin API with the operator token (clientFlags).

// ownerClientFlags adds the flags every owner command shares and returns
// a constructor for the client they name:
//
//	--url           $WAYMARK_URL, then http://127.0.0.1:8080
//	--api-key-file  $WAYMARK_API_KEY, then DATA_DIR/dev-api-key (a --dev node's key)
func ownerClientFlags(fs *flag.FlagSet) func() (*client, error) {
	base := fs.String("url", "", "public URL of a node (default $WAYMARK_URL, then http://127.0.0.1:8080)")
	keyFile := fs.String("api-key-file", "", "file holding your API key (default $WAYMARK_API_KEY, then DATA_DIR/dev-api-key)")
	dataDir := fs.String("data-dir", "data", "data folder of a local --dev node, used to find its API key")
	// A command whose --format names a file format (links import and
	// export) defines it first; its output is then a table.
	format := new(string)
	if *format = "table"; fs.Lookup("format") == nil {
		format = fs.String("format", "table", "output format: table or json")
	}
	return func() (*client, error) {
		c := &client{format: *format, out: os.Stdout, http: &http.Client{Timeout: 60 * time.Second},
			hint: "set --url or WAYMARK_URL"}
		if c.format != "table" && c.format != "json" {
			return nil, &cliError{ExitUsage, fmt.Errorf("-format %q: want table or json", c.format)}
		}
		raw := *base
		if raw == "" {
			raw = os.Getenv("WAYMARK_URL")
		}
		if raw == "" {
			raw = "http://127.0.0.1:8080"
		}
		u, err := url.Parse(strings.TrimRight(raw, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, &cliError{ExitUsage, fmt.Errorf("--url %q: want http://HOST[:PORT] or https://HOST[:PORT]", raw)}
		}
		c.addr, c.base = u.Host, u.Scheme+"://"+u.Host+u.Path
		token, err := readCredential("api-key-file", *keyFile, "WAYMARK_API_KEY", filepath.Join(*dataDir, DevAPIKeyFile))
		if err != nil {
			return nil, err
		}
		c.token = token
		if c.token == "" {
			return nil, &cliError{ExitUsage, errors.New("no API key: set --api-key-file or WAYMARK_API_KEY")}
		}
		return c, nil
	}
}

// parseOwnerCommand parses an owner command's arguments: the owner client
// flags plus whatever addFlags defines, flags before or after positional
// arguments. maxArgs < 0 means no upper bound.
func parseOwnerCommand(name string, args []string, usage string, minArgs, maxArgs int, addFlags func(*flag.FlagSet)) (*flag.FlagSet, func() (*client, error), error) {
	return parseWith(ownerClientFlags, name, args, usage, minArgs, maxArgs, addFlags)
}
