package node

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/waymark/waymark/rollup"
)

// Exit codes of the operator CLI.
const (
	ExitOK          = 0
	ExitError       = 1 // the node answered with an error
	ExitUsage       = 2 // bad command line
	ExitUnreachable = 3 // no node at the admin address
	ExitAuth        = 4 // the operator token was refused
)

// cliError carries an exit code with the message.
type cliError struct {
	code int
	err  error
}

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

// ExitCode maps an error from a CLI command to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ce *cliError
	if errors.As(err, &ce) {
		return ce.code
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	return ExitError
}

// client talks to one node's operator API, or (ownerClientFlags) to the
// public API with an owner's key.
type client struct {
	addr   string
	base   string // scheme://host of addr; "http://"+addr when empty
	hint   string // how to point the CLI elsewhere, for "cannot reach"
	token  string
	format string
	out    io.Writer
	http   *http.Client
}

// clientFlags adds the flags every operator command shares.
func clientFlags(fs *flag.FlagSet) func() (*client, error) {
	addr := fs.String("admin-addr", "", "operator API address (default $WAYMARK_ADMIN_ADDR, then DATA_DIR/admin-addr, then 127.0.0.1:8081)")
	tokenFile := fs.String("token-file", "", "operator token file (default $WAYMARK_TOKEN, then DATA_DIR/operator-token)")
	dataDir := fs.String("data-dir", "data", "data folder of a local node, used to find its admin address and token")
	format := new(string)
	*format = "table"
	if fs.Lookup("format") == nil { // `blocklist import --format` names the file's format instead
		format = fs.String("format", "table", "output format: table or json")
	}
	return func() (*client, error) {
		c := &client{addr: *addr, format: *format, out: os.Stdout, http: &http.Client{Timeout: 30 * time.Second}}
		if c.format != "table" && c.format != "json" {
			return nil, &cliError{ExitUsage, fmt.Errorf("-format %q: want table or json", c.format)}
		}
		if c.addr == "" {
			c.addr = os.Getenv("WAYMARK_ADMIN_ADDR")
		}
		if c.addr == "" {
			if b, err := os.ReadFile(filepath.Join(*dataDir, AdminAddrFile)); err == nil {
				c.addr = strings.TrimSpace(string(b))
			}
		}
		if c.addr == "" {
			c.addr = "127.0.0.1:8081"
		}
		token, err := readCredential("token-file", *tokenFile, "WAYMARK_TOKEN", filepath.Join(*dataDir, OperatorTokenFile))
		if err != nil {
			return nil, err
		}
		c.token = token
		return c, nil
	}
}

// readCredential is the secret a command authenticates with: from the
// file its --flag names, else from the environment variable, else from
// the data folder's file (a local node's), else "".
func readCredential(flagName, file, env, local string) (string, error) {
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", &cliError{ExitUsage, fmt.Errorf("cannot read --%s: %w", flagName, err)}
		}
		return strings.TrimSpace(string(b)), nil
	case os.Getenv(env) != "":
		return os.Getenv(env), nil
	}
	if b, err := os.ReadFile(local); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	return "", nil
}

// call sends one request and decodes a JSON answer into out.
func (c *client) call(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.baseURL()+path, rd)
	if err != nil {
		return &cliError{ExitUsage, fmt.Errorf("bad node address %q: %w", c.addr, err)}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("cannot read answer from %s: %w", c.addr, err)
	}
	if resp.StatusCode >= 300 {
		return answerError(method, path, resp, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("cannot decode answer from %s: %w", c.addr, err)
		}
	}
	return nil
}

func (c *client) baseURL() string {
	if c.base != "" {
		return c.base
	}
	return "http://" + c.addr
}

func (c *client) unreachable(err error) error {
	hint := c.hint
	if hint == "" {
		hint = "set --admin-addr or WAYMARK_ADMIN_ADDR"
	}
	return &cliError{ExitUnreachable, fmt.Errorf("cannot reach node at %s: %w (is it running? %s)", c.addr, err, hint)}
}

// print writes v as JSON, or as a table via table().
func (c *client) print(v any, table func(w *tabwriter.Writer)) error {
	if c.format == "json" {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

func parseCommand(name string, args []string, usage string, minArgs, maxArgs int) (*flag.FlagSet, func() (*client, error), error) {
	return parseCommandFlags(name, args, usage, minArgs, maxArgs, nil)
}

// connect parses a command's arguments and returns the client they name.
func connect(name string, args []string, usage string, minArgs, maxArgs int) (*flag.FlagSet, *client, error) {
	fs, mk, err := parseCommand(name, args, usage, minArgs, maxArgs)
	if err != nil {
		return nil, nil, err
	}
	c, err := mk()
	return fs, c, err
}

// parseCommandFlags parses a command's arguments: the shared client flags
// plus whatever addFlags defines. maxArgs < 0 means no upper bound.
func parseCommandFlags(name string, args []string, usage string, minArgs, maxArgs int, addFlags func(*flag.FlagSet)) (*flag.FlagSet, func() (*client, error), error) {
	return parseWith(clientFlags, name, args, usage, minArgs, maxArgs, addFlags)
}

// parseWith parses a command's arguments with the flags addFlags defines
// first (they win a name clash), then the client flags of clientOf.
func parseWith(clientOf func(*flag.FlagSet) func() (*client, error), name string, args []string, usage string, minArgs, maxArgs int, addFlags func(*flag.FlagSet)) (*flag.FlagSet, func() (*client, error), error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	if addFlags != nil {
		addFlags(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: waymark %s %s\n", name, usage)
		fs.PrintDefaults()
	}
	mk := clientOf(fs)
	return fs, mk, parseArgs(fs, args, name, minArgs, maxArgs)
}

// parseArgs parses flags anywhere among the positional arguments and
// checks how many positional arguments there are.
func parseArgs(fs *flag.FlagSet, args []string, name string, minArgs, maxArgs int) error {
	if err := parseInterspersed(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &cliError{ExitUsage, err}
	}
	if fs.NArg() < minArgs || (maxArgs >= 0 && fs.NArg() > maxArgs) {
		fs.Usage()
		return &cliError{ExitUsage, fmt.Errorf("waymark %s: wrong number of arguments", name)}
	}
	return nil
}

// parseInterspersed parses flags before, between and after positional
// arguments (kubectl and gh accept both `add eu -format json` and
// `add -format json eu`); "--" ends the flags. Afterwards fs.Args() holds
// the positional arguments in order.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// CmdOwnersCreate is `waymark owners create NAME`: prints only the API key.
func CmdOwnersCreate(args []string) error {
	fs, c, err := connect("owners create", args, "[flags] NAME", 1, 1)
	if err != nil {
		return err
	}
	var out struct {
		ID     string `json:"id"`
		APIKey string `json:"api_key"`
	}
	if err := c.call("POST", "/v1/owners", map[string]string{"name": fs.Arg(0)}, &out); err != nil {
		return err
	}
	if c.format == "json" {
		return c.print(out, nil)
	}
	_, err = fmt.Fprintln(c.out, out.APIKey)
	return err
}

// CmdStatus is `waymark status`.
func CmdStatus(args []string) error {
	_, c, err := connect("status", args, "[flags]", 0, 0)
	if err != nil {
		return err
	}
	var st Status
	if err := c.call("GET", "/v1/status", nil, &st); err != nil {
		return err
	}
	return c.print(st, func(w *tabwriter.Writer) {
		roles := make([]string, len(st.Roles))
		for i, r := range st.Roles {
			roles[i] = string(r)
		}
		rows := [][2]string{
			{"name", st.Name}, {"region", st.Region}, {"roles", strings.Join(roles, ",")}, {"version", st.Version},
			{"http", st.HTTPAddr}, {"raft", st.RaftAddr}, {"raft state", st.RaftState}, {"leader", st.Leader},
			{"applied index", fmt.Sprint(st.AppliedIndex)}, {"commit index", fmt.Sprint(st.CommitIndex)},
			{"last contact", st.LastContact}, {"ready", fmt.Sprintf("%v %s", st.Ready, st.ReadyDetail)},
			{"store bytes", fmt.Sprint(st.StoreBytes)}, {"cache entries", fmt.Sprint(st.CacheEntries)},
			{"gossip members", fmt.Sprint(st.Members)}, {"uptime", st.Uptime},
		}
		rows = append(rows, shippingRows(st.Shipping)...)
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\n", r[0], r[1])
		}
	})
}

// shippingRows are the analytics shipping lines of `waymark status`.
func shippingRows(sh Shipping) [][2]string {
	lag := (time.Duration(sh.OldestPendingSeconds * float64(time.Second))).Round(time.Second).String()
	if sh.OldestPendingSeconds > sh.MaxShipLagSeconds {
		lag += fmt.Sprintf(" (over --max-ship-lag %s)", time.Duration(sh.MaxShipLagSeconds*float64(time.Second)))
	}
	agg := sh.AggregatorURL
	if agg == "" {
		agg = "none (segments accumulate)"
	}
	bad := fmt.Sprint(sh.BadSegments)
	if sh.BadSegments > 0 && sh.OldestBadAt != nil {
		bad += fmt.Sprintf(" (oldest %s, %s)", sh.OldestBad, sh.OldestBadAt.Format(time.RFC3339))
	}
	rows := [][2]string{
		{"aggregator", agg}, {"ship lag", lag}, {"pending bytes", fmt.Sprint(sh.PendingBytes)},
		{"bad segments", bad},
		{"rejected segments", fmt.Sprintf("malformed %d, conflicts %d", sh.RejectedMalformed, sh.Conflicts)},
	}
	if sh.LastError != "" {
		rows = append(rows, [2]string{"last ship error", sh.LastError})
	}
	return rows
}

// CmdRaftPeers is `waymark raft peers`.
func CmdRaftPeers(args []string) error {
	_, c, err := connect("raft peers", args, "[flags]", 0, 0)
	if err != nil {
		return err
	}
	var peers []Peer
	if err := c.call("GET", "/v1/raft/peers", nil, &peers); err != nil {
		return err
	}
	return c.print(peers, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "ID\tADDRESS\tSUFFRAGE\tLEADER\tAPPLIED\tTRAILING")
		for _, p := range peers {
			applied, trailing := fmt.Sprint(p.Applied), fmt.Sprint(p.Trailing)
			if p.Applied < 0 {
				applied, trailing = "unreachable", "-"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\t%s\n", p.ID, p.Address, p.Suffrage, p.Leader, applied, trailing)
		}
	})
}

// CmdKeygen is `waymark keygen`: a new random cluster key.
func CmdKeygen(args []string) error {
	if len(args) > 0 {
		return &cliError{ExitUsage, errors.New("usage: waymark keygen")}
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	_, err := fmt.Println(base64.StdEncoding.EncodeToString(key))
	return err
}

// CmdMembers is `waymark members`: every gossip member this node knows.
func CmdMembers(args []string) error {
	_, c, err := connect("members", args, "[flags]", 0, 0)
	if err != nil {
		return err
	}
	var members []Member
	if err := c.call("GET", "/v1/members", nil, &members); err != nil {
		return err
	}
	return c.print(members, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "NAME\tADDRESS\tREGION\tROLES\tSTATUS\tVERSION")
		for _, m := range members {
			roles := make([]string, len(m.Roles))
			for i, r := range m.Roles {
				roles[i] = string(r)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.Addr, m.Region, strings.Join(roles, ","), m.Status, m.Version)
		}
	})
}

// CmdJoin is `waymark join ADDR...`: gossip with existing members.
func CmdJoin(args []string) error {
	fs, c, err := connect("join", args, "[flags] GOSSIP_ADDR...", 1, -1)
	if err != nil {
		return err
	}
	var out struct {
		Contacted int `json:"contacted"`
	}
	if err := c.call("POST", "/v1/join", map[string]any{"addrs": fs.Args()}, &out); err != nil {
		return err
	}
	return c.print(out, func(w *tabwriter.Writer) { fmt.Fprintf(w, "joined: contacted %d member(s)\n", out.Contacted) })
}

// CmdLeave is `waymark leave`: graceful departure of the addressed node.
func CmdLeave(args []string) error {
	_, c, err := connect("leave", args, "[flags]", 0, 0)
	if err != nil {
		return err
	}
	var out map[string]string
	if err := c.call("POST", "/v1/leave", map[string]string{}, &out); err != nil {
		return err
	}
	return c.print(out, func(w *tabwriter.Writer) { fmt.Fprintf(w, "%s left the cluster\n", out["left"]) })
}

// CmdRemovePeer is `waymark raft remove-peer ID`.
func CmdRemovePeer(args []string) error {
	fs, mk, err := parseCommand("raft remove-peer", args, "[flags] ID", 1, 1)
	if err != nil {
		return err
	}
	return membershipCommand(mk, "/v1/raft/remove-peer", fs.Arg(0), "removed peer %s\n")
}

// CmdTransferLeader is `waymark raft transfer-leader [ID]`.
func CmdTransferLeader(args []string) error {
	fs, mk, err := parseCommand("raft transfer-leader", args, "[flags] [ID]", 0, 1)
	if err != nil {
		return err
	}
	return membershipCommand(mk, "/v1/raft/transfer-leader", fs.Arg(0), "leadership transferred %s\n")
}

func membershipCommand(mk func() (*client, error), path, id, done string) error {
	c, err := mk()
	if err != nil {
		return err
	}
	var out map[string]string
	if err := c.call("POST", path, map[string]string{"id": id}, &out); err != nil {
		return err
	}
	return c.print(out, func(w *tabwriter.Writer) { fmt.Fprintf(w, done, id) })
}

// CmdEventsCount is `waymark events count [--link CODE] [--site ID] [--bots]`:
// prints only the number of raw events the aggregator holds.
func CmdEventsCount(args []string) error {
	var link, site *string
	var bots *bool
	_, mk, err := parseCommandFlags("events count", args, "[--link CODE] [--site ID] [--bots]", 0, 0, func(fs *flag.FlagSet) {
		link, site = eventFilterFlags(fs)
		bots = fs.Bool("bots", false, "only bot-flagged events")
	})
	if err != nil {
		return err
	}
	c, err := mk()
	if err != nil {
		return err
	}
	var out EventsCount
	q := url.Values{"link": {*link}, "site": {*site}, "bots": {strconv.FormatBool(*bots)}}
	if err := c.call("GET", "/v1/events/count?"+q.Encode(), nil, &out); err != nil {
		return err
	}
	if c.format == "json" {
		return c.print(out, nil)
	}
	_, err = fmt.Fprintln(c.out, out.Count)
	return err
}

// CmdEventsTail is `waymark events tail [-n N]`: the newest raw events.
func CmdEventsTail(args []string) error {
	var link, site *string
	var limit *int
	_, mk, err := parseCommandFlags("events tail", args, "[-n N] [--link CODE] [--site ID]", 0, 0, func(fs *flag.FlagSet) {
		link, site = eventFilterFlags(fs)
		limit = fs.Int("n", 20, "how many events (at most "+strconv.Itoa(rollup.MaxTail)+")")
	})
	if err != nil {
		return err
	}
	if *limit <= 0 || *limit > rollup.MaxTail {
		return &cliError{ExitUsage, fmt.Errorf("events tail: -n must be from 1 to %d", rollup.MaxTail)}
	}
	c, err := mk()
	if err != nil {
		return err
	}
	var out []TailEvent
	q := url.Values{"n": {strconv.Itoa(*limit)}, "link": {*link}, "site": {*site}}
	if err := c.call("GET", "/v1/events/tail?"+q.Encode(), nil, &out); err != nil {
		return err
	}
	return c.print(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "TIME\tKIND\tCODE/SITE\tPATH\tREFERRER\tCOUNTRY\tDEVICE\tBROWSER\tBOT\tNODE")
		for _, e := range out {
			target := e.Code
			if target == "" {
				target = e.Site
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%v\t%s\n", e.Time.Format(time.RFC3339), e.Kind, target, e.Path, e.Referrer, e.Country, e.Device, e.Browser, e.Bot, e.Node)
		}
	})
}

func eventFilterFlags(fs *flag.FlagSet) (link, site *string) {
	return fs.String("link", "", "only clicks of this link code"), fs.String("site", "", "only events of this site id")
}

// CmdRollupRebuild is `waymark rollup rebuild --from DAY --to DAY`:
// recompute rollups from the raw events (safe to re-run).
func CmdRollupRebuild(args []string) error {
	var from, to *string
	_, mk, err := parseCommandFlags("rollup rebuild", args, "--from YYYY-MM-DD --to YYYY-MM-DD", 0, 0, func(fs *flag.FlagSet) {
		from = fs.String("from", "", "first UTC day to rebuild")
		to = fs.String("to", "", "last UTC day to rebuild")
	})
	if err != nil {
		return err
	}
	if *from == "" || *to == "" {
		return &cliError{ExitUsage, errors.New("waymark rollup rebuild needs --from and --to (YYYY-MM-DD)")}
	}
	c, err := mk()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "rebuilding rollups %s .. %s ...\n", *from, *to)
	var out map[string]any
	if err := c.call("POST", "/v1/rollup/rebuild", map[string]string{"from": *from, "to": *to}, &out); err != nil {
		return err
	}
	return c.print(out, func(w *tabwriter.Writer) {
		if hours, ok := out["hours"]; ok { // a ClickHouse aggregator: its rows of closed hours
			fmt.Fprintf(w, "rebuilt %s .. %s (%v closed hours written from the raw events) in %v\n", *from, *to, hours, out["took"])
			return
		}
		fmt.Fprintf(w, "rebuilt %s .. %s in %v\n", *from, *to, out["took"])
	})
}

// answerError turns an admin API answer that is not a success into a CLI
// error carrying its problem detail (or its body), with the exit code of
// its kind.
func answerError(method, path string, resp *http.Response, body []byte) error {
	var p struct{ Detail string }
	json.Unmarshal(body, &p)
	if p.Detail == "" {
		p.Detail = strings.TrimSpace(string(body))
	}
	code := ExitError
	if resp.StatusCode == http.StatusUnauthorized {
		code = ExitAuth
	}
	return &cliError{code, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, p.Detail)}
}
