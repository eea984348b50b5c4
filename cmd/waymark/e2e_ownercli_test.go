package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ownerCLI runs an owner command of the CLI and decodes its -format json
// output into out, failing on any exit code but 0.
func ownerCLI(t *testing.T, env []string, out any, args ...string) {
	t.Helper()
	stdout, stderr, code := runCLI(t, env, append(args, "-format", "json")...)
	if code != 0 {
		t.Fatalf("waymark %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(stdout), out); err != nil {
			t.Fatalf("waymark %s: output is not JSON: %v: %s", strings.Join(args, " "), err, stdout)
		}
	}
}

type cliLink struct {
	Code     string   `json:"code"`
	ShortURL string   `json:"short_url"`
	URL      string   `json:"url"`
	Status   string   `json:"status"`
	Redirect int      `json:"redirect"`
	Expires  *string  `json:"expires_at"`
	Tags     []string `json:"tags"`
	Owner    string   `json:"owner"` // only in the operator's view
}

type cliPage struct {
	Links      []cliLink `json:"links"`
	NextCursor *string   `json:"next_cursor"`
}

func (p cliPage) codes() []string {
	out := []string{}
	for _, l := range p.Links {
		out = append(out, l.Code)
	}
	return out
}

// TestE2EOwnerCLI drives the owner CLI against a voter and an edge (real
// processes): links with tags created through the edge (forwarded to the
// leader), listed by tag, by substring and by domain across pages,
// retagged through the API, shown both as the owner and as the operator,
// and deleted. Every expected list is worked out by hand from the five
// links below, newest first.
func TestE2EOwnerCLI(t *testing.T) {
	c := newCluster(t)
	v1, e1, key := c.voterAndEdge("us", "alice")
	owner := []string{"WAYMARK_URL=http://" + e1.http, "WAYMARK_API_KEY=" + key}
	reader := []string{"WAYMARK_URL=http://" + v1.http, "WAYMARK_API_KEY=" + key} // the leader: applied before it answers

	// L1..L5, oldest first.
	type spec struct{ url, alias, tags string }
	specs := []spec{
		{"https://shop.example/spring-sale", "", "Spring,sms"},
		{"https://shop.example/winter", "", "winter"},
		{"https://blog.example/Spring-notes", "spring-notes", "spring"},
		{"https://shop.example/spring-promo", "", "spring,EMAIL"},
		{"https://news.example/x", "promo-news", ""},
	}
	var L []string
	for i, s := range specs {
		args := []string{"links", "create", s.url}
		if s.alias != "" {
			args = append(args, "--alias", s.alias)
		}
		for _, tag := range strings.Split(s.tags, ",") {
			if tag != "" {
				args = append(args, "--tag", tag)
			}
		}
		if i == 1 {
			args = append(args, "--expires", "36h", "--redirect", "307")
		}
		var l cliLink
		ownerCLI(t, owner, &l, args...)
		if l.URL != s.url || (s.alias != "" && l.Code != s.alias) || l.ShortURL != "http://"+e1.http+"/"+l.Code {
			t.Fatalf("create %v: got %+v", args, l)
		}
		L = append(L, l.Code)
	}
	var l2 cliLink
	ownerCLI(t, reader, &l2, "links", "show", L[1])
	if l2.Redirect != 307 || l2.Expires == nil {
		t.Fatalf("L2 --redirect 307 --expires 36h: got %+v", l2)
	}
	if exp, err := time.Parse(time.RFC3339, *l2.Expires); err != nil || time.Until(exp) < 35*time.Hour || time.Until(exp) > 37*time.Hour {
		t.Fatalf("L2 expires %v (%v); want about 36h from now", *l2.Expires, err)
	}
	var l1 cliLink
	ownerCLI(t, reader, &l1, "links", "show", L[0])
	if fmt.Sprint(l1.Tags) != "[sms spring]" {
		t.Fatalf("L1 tags %v; want [sms spring] (lower-cased, sorted)", l1.Tags)
	}

	list := func(env []string, args ...string) cliPage {
		t.Helper()
		var p cliPage
		ownerCLI(t, env, &p, append([]string{"links", "list"}, args...)...)
		return p
	}
	want := func(what string, got cliPage, idx ...int) {
		t.Helper()
		var codes []string
		for _, i := range idx {
			codes = append(codes, L[i-1])
		}
		if codes == nil {
			codes = []string{}
		}
		if !slices.Equal(got.codes(), codes) {
			t.Errorf("%s: got %v; want %v", what, got.codes(), codes)
		}
	}
	t.Run("filters", func(t *testing.T) {
		// Pages of one and two: the CLI follows the cursor to the end.
		want("all, pages of 2", list(reader, "--page-size", "2"), 5, 4, 3, 2, 1)
		want("tag spring, pages of 1", list(reader, "--tag", "spring", "--page-size", "1"), 4, 3, 1)
		want("tag SPRING (any case)", list(reader, "--tag", "SPRING"), 4, 3, 1)
		want("tag sms", list(reader, "--tag", "sms"), 1)
		want("tag email", list(reader, "--tag", "email"), 4)
		want("tag nobody", list(reader, "--tag", "nobody"))
		// q: the destination or the code, any case.
		want("q spring", list(reader, "--q", "spring", "--page-size", "2"), 4, 3, 1)
		want("q SHOP", list(reader, "--q", "SHOP"), 4, 2, 1)
		want("q promo (URL of L4, alias of L5)", list(reader, "--q", "promo"), 5, 4)
		want("tag spring and q shop", list(reader, "--tag", "spring", "--q", "shop"), 4, 1)
		// Every link is on the public URL's host until links carry a domain.
		want("domain 127.0.0.1", list(reader, "--domain", "127.0.0.1"), 5, 4, 3, 2, 1)
		want("domain elsewhere", list(reader, "--domain", "go.other.example"))
		// The edge serves the same answer from its own replica of the
		// tag index once it has applied the writes.
		waitFor(t, "e1 lists tag spring", 10*time.Second, func() bool {
			return slices.Equal(list(owner, "--tag", "spring").codes(), []string{L[3], L[2], L[0]})
		})
	})

	t.Run("cursor", func(t *testing.T) {
		first := list(reader, "--tag", "spring", "--limit", "2")
		want("tag spring, first 2", first, 4, 3)
		if first.NextCursor == nil {
			t.Fatal("--limit 2 of 3 links gave no next_cursor")
		}
		// A create after the cursor was handed out neither shifts nor
		// joins the later pages; it leads a fresh first page.
		var l6 cliLink
		ownerCLI(t, owner, &l6, "links", "create", "https://shop.example/spring-new", "--tag", "spring")
		L = append(L, l6.Code) // L6, deleted below: a deleted link stays listed, as disabled
		rest := list(reader, "--tag", "spring", "--cursor", *first.NextCursor)
		want("tag spring after the cursor", rest, 1)
		if rest.NextCursor != nil {
			t.Errorf("last page has next_cursor %q", *rest.NextCursor)
		}
		if got := list(reader, "--tag", "spring").codes(); !slices.Equal(got, []string{l6.Code, L[3], L[2], L[0]}) {
			t.Errorf("tag spring after the create: %v; want %v first", got, l6.Code)
		}
		ownerCLI(t, owner, nil, "links", "delete", l6.Code)
		// The plain listing keeps its cursor too.
		all := list(reader, "--limit", "3")
		rest = list(reader, "--cursor", *all.NextCursor)
		if n := len(all.Links) + len(rest.Links); n != 6 || rest.Links[len(rest.Links)-1].Code != L[0] {
			t.Errorf("plain listing in two parts: %v then %v; want 6 links ending with %s", all.codes(), rest.codes(), L[0])
		}
		if _, stderr, code := runCLI(t, reader, "links", "list", "--cursor", "not-a-cursor"); code != 1 || !strings.Contains(stderr, "cursor is not valid") {
			t.Errorf("bad cursor: exit %d %q; want 1 and the API's problem", code, stderr)
		}
	})

	t.Run("retag through the API", func(t *testing.T) {
		// Through the edge, so the leader's answer (tags included) is
		// forwarded back.
		r := do(t, "PATCH", "http://"+e1.http+"/v1/links/"+L[1], key, `{"tags":["Spring","spring"]}`)
		if r.status != 200 || fmt.Sprint(r.json(t)["tags"]) != "[spring]" {
			t.Fatalf("PATCH tags: %d %s", r.status, r.body)
		}
		want("tag spring after retag", list(reader, "--tag", "spring"), 6, 4, 3, 2, 1)
		want("tag winter after retag", list(reader, "--tag", "winter"))
		r = do(t, "PATCH", "http://"+e1.http+"/v1/links/"+L[1], key, `{"tags":["no spaces allowed"]}`)
		if r.status != 400 || !strings.Contains(string(r.body), "tags") {
			t.Fatalf("PATCH bad tag: %d %s; want 400 naming the field", r.status, r.body)
		}
		r = do(t, "PATCH", "http://"+e1.http+"/v1/links/"+L[1], key, `{"tags":null}`)
		if r.status != 200 || fmt.Sprint(r.json(t)["tags"]) != "[]" {
			t.Fatalf("PATCH tags null: %d %s; want 200 and []", r.status, r.body)
		}
		want("tag spring after clearing", list(reader, "--tag", "spring"), 6, 4, 3, 1)
	})

	t.Run("show as owner or operator", func(t *testing.T) {
		// With an API key: the owner's view, from the public API.
		var asOwner cliLink
		ownerCLI(t, owner, &asOwner, "links", "show", L[0])
		if asOwner.ShortURL == "" || asOwner.Owner != "" || fmt.Sprint(asOwner.Tags) != "[sms spring]" {
			t.Errorf("links show with WAYMARK_API_KEY: %+v; want the owner's view", asOwner)
		}
		keyFile := filepath.Join(t.TempDir(), "key")
		if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var viaFile cliLink
		ownerCLI(t, []string{"WAYMARK_API_KEY="}, &viaFile, "links", "show", L[0], "--url", "http://"+e1.http, "--api-key-file", keyFile)
		if viaFile.ShortURL == "" || viaFile.Owner != "" {
			t.Errorf("links show --api-key-file: %+v; want the owner's view", viaFile)
		}
		// Without one: the operator's view, from the admin API.
		var asOperator cliLink
		ownerCLI(t, append(c.env("v1"), "WAYMARK_API_KEY="), &asOperator, "links", "show", L[0])
		if asOperator.Owner == "" || asOperator.ShortURL != "" || asOperator.URL != specs[0].url {
			t.Errorf("links show without an API key: %+v; want the operator's view", asOperator)
		}
		table, _, code := runCLI(t, owner, "links", "show", L[0])
		if code != 0 || !strings.Contains(table, "tags") || !strings.Contains(table, "sms,spring") {
			t.Errorf("links show table: exit %d\n%s", code, table)
		}
		if _, stderr, code := runCLI(t, []string{"WAYMARK_URL=http://" + e1.http, "WAYMARK_API_KEY=wm_wrong"}, "links", "show", L[0]); code != 4 {
			t.Errorf("links show with a wrong key: exit %d (%s); want 4", code, stderr)
		}
		if _, _, code := runCLI(t, append(c.env("v1"), "WAYMARK_API_KEY="), "links", "show", L[0], "--url", "http://"+e1.http); code != 2 {
			t.Errorf("links show --url without an API key: exit %d; want 2", code)
		}
		if _, _, code := runCLI(t, owner, "links", "show", "nosuchcode"); code != 1 {
			t.Errorf("links show of an unknown code: exit %d; want 1", code)
		}
		if _, _, code := runCLI(t, []string{"WAYMARK_URL=http://" + deadAddr(t), "WAYMARK_API_KEY=" + key}, "links", "list"); code != 3 {
			t.Errorf("links list against no node: exit %d; want 3", code)
		}
	})

	t.Run("table and delete", func(t *testing.T) {
		out, _, code := runCLI(t, reader, "links", "list", "--tag", "sms")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "CODE") || !strings.HasPrefix(lines[1], L[0]+" ") ||
			!strings.Contains(lines[1], "sms,spring") || !strings.Contains(lines[1], specs[0].url) {
			t.Errorf("links list table: exit %d\n%s", code, out)
		}
		out, _, code = runCLI(t, owner, "links", "delete", "promo-news")
		if code != 0 || strings.TrimSpace(out) != "deleted promo-news" {
			t.Fatalf("links delete: exit %d %q", code, out)
		}
		var gone cliLink
		ownerCLI(t, reader, &gone, "links", "show", "promo-news")
		if gone.Status != "disabled" {
			t.Errorf("deleted link status %q; want disabled", gone.Status)
		}
		waitFor(t, "promo-news answers 410 on e1", 10*time.Second, func() bool {
			return do(t, "GET", "http://"+e1.http+"/promo-news", "", "").status == 410
		})
		if _, _, code := runCLI(t, owner, "links", "create"); code != 2 {
			t.Errorf("links create without a URL: exit %d; want 2", code)
		}
		if _, _, code := runCLI(t, owner, "links", "create", "https://a.example", "--expires", "soon"); code != 2 {
			t.Errorf("links create --expires soon: exit %d; want 2", code)
		}
		if _, stderr, code := runCLI(t, owner, "links", "create", "https://a.example", "--tag", "-bad"); code != 1 || !strings.Contains(stderr, `"tags"`) {
			t.Errorf("links create --tag -bad: exit %d %q; want 1 and the API's problem", code, stderr)
		}
	})
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestE2ECLIFlagsAnywhere runs every command of the CLI (each one main.go
// registers; a command without a row fails the test) through the built
// binary with its flags before, after and around its positional
// arguments, and checks each time that the flags were honoured: the
// environment points every command at a dead node with no token or key,
// so only the flags can make it reach the --dev node and answer with
// -format json (or, for commands that must not run for real, reach the
// dead address the flag names: exit 3 and that address in the message).
func TestE2ECLIFlagsAnywhere(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, dir, "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0")
	base := "http://" + p.http
	waitFor(t, "readyz", 30*time.Second, func() bool { return do(t, "GET", base+"/readyz", "", "").status == 200 })
	var key string
	waitFor(t, "dev-api-key", 30*time.Second, func() bool { key = readKeyMaybe(filepath.Join(dir, "dev-api-key")); return key != "" })
	tokenFile, keyFile := filepath.Join(dir, "operator-token"), filepath.Join(dir, "dev-api-key")
	opEnv := []string{"WAYMARK_ADMIN_ADDR=" + p.admin, "WAYMARK_TOKEN=" + readKey(t, tokenFile)}
	ownEnv := []string{"WAYMARK_URL=" + base, "WAYMARK_API_KEY=" + key}

	// Fixtures made the plain way, before the table.
	var owner2 struct {
		ID string `json:"id"`
	}
	ownerCLI(t, opEnv, &owner2, "owners", "create", "flags-suspendee")
	mk := func(u string) string {
		var l cliLink
		ownerCLI(t, ownEnv, &l, "links", "create", u)
		return l.Code
	}
	shown, deleted := mk("https://flags.example/show"), mk("https://flags.example/delete")
	// One link per order of the arguments ("{mod}"): each goes through
	// review, block and restore once.
	moderated := []string{mk("https://flags.example/m0"), mk("https://flags.example/m1"), mk("https://flags.example/m2")}
	snap := filepath.Join(t.TempDir(), "snap")
	ownerCLI(t, opEnv, nil, "snapshot", "save", snap)
	feed := filepath.Join(t.TempDir(), "feed.txt")
	if err := os.WriteFile(feed, []byte("feed-evil.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bitly := filepath.Join(t.TempDir(), "bitly.csv") // Bitly's export columns, two good rows
	if err := os.WriteFile(bitly, []byte("id,link,long_url,title,created_at,archived,tags,custom_bitlinks\n"+
		"bit.ly/flagsA1,https://bit.ly/flagsA1,https://flags.example/imported-1,One,2024-03-01T10:00:00+0000,false,,\n"+
		"bit.ly/flagsA2,https://bit.ly/flagsA2,https://flags.example/imported-2,Two,2024-03-01T10:00:00+0000,false,,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	caDir := t.TempDir()
	if _, stderr, code := runCLI(t, nil, "tls", "ca", "create", "-dir", caDir); code != 0 {
		t.Fatalf("tls ca create: %s", stderr)
	}
	today := time.Now().UTC().Format(time.DateOnly)

	dead, deadEnv := deadAddr(t), deadAddr(t)
	env := []string{"WAYMARK_ADMIN_ADDR=" + deadEnv, "WAYMARK_TOKEN=", "WAYMARK_URL=http://" + deadEnv, "WAYMARK_API_KEY="}
	admin := []string{"--admin-addr", p.admin, "--token-file", tokenFile, "-format", "json"}
	own := []string{"--url", base, "--api-key-file", keyFile, "-format", "json"}
	with := func(a []string, more ...string) []string { return append(slices.Clone(a), more...) }

	const unreachable = "UNREACHABLE" // want: exit 3 naming the dead address
	rows := []struct {
		cmd   string
		pos   []string
		flags []string
		want  string // a substring of stdout ("{dir}" expanded); JSON output unless the command prints text
		text  bool   // the command prints text, not JSON
	}{
		{"node", nil, []string{"--check-config", "--dev", "--data-dir", "{dir}", "--name", "flags-node"}, `"flags-node"`, false},
		{"node", nil, []string{"--check-config", "--dev", "--data-dir", "{dir}", "--name", "flags-ch", "--analytics-store", "clickhouse",
			"--clickhouse-url", "http://127.0.0.1:1", "--clickhouse-database", "wm_flags", "--aggregator-url", "http://127.0.0.1:2,http://127.0.0.1:3"}, `"ClickHouseDatabase": "wm_flags"`, false},
		{"owners create", []string{"flags-owner"}, admin, `"api_key"`, false},
		{"owners suspend", []string{owner2.ID}, with(admin, "--reason", "flags test"), `"suspended": true`, false},
		{"owners unsuspend", []string{owner2.ID}, admin, `"suspended": false`, false},
		{"status", nil, admin, `"applied_index"`, false},
		{"members", nil, admin, `"status"`, false},
		{"join", []string{p.gossip}, admin, `"contacted"`, false},
		{"leave", nil, []string{"--admin-addr", dead}, unreachable, false},
		{"raft peers", nil, admin, `"suffrage"`, false},
		{"raft remove-peer", []string{"nobody"}, []string{"--admin-addr", dead}, unreachable, false},
		{"raft transfer-leader", []string{"nobody"}, []string{"--admin-addr", dead}, unreachable, false},
		{"regions list", nil, admin, `"slot"`, false},
		{"regions add", []string{"flagregion"}, admin, `"flagregion"`, false},
		{"blocklist add", []string{"flags-evil.example"}, with(admin, "--reason", "flags test"), `flags-evil.example`, false},
		{"blocklist remove", []string{"flags-evil.example"}, admin, `flags-evil.example`, false},
		{"blocklist list", nil, admin, `[`, false},
		{"blocklist import", []string{feed}, []string{"--admin-addr", p.admin, "--token-file", tokenFile, "--format", "domains"}, "", true},
		{"domains list", nil, admin, `[`, false},
		{"domains add", []string{"flags.example.org"}, with(admin, "--owner", owner2.ID), `"approved"`, false},
		{"domains approve", []string{"flags.example.org"}, []string{"--admin-addr", dead}, unreachable, false},
		{"keys create", nil, with(admin, "--owner", owner2.ID, "--name", "flags", "--scope", "links:read"), `"links:read"`, false},
		{"keys list", nil, with(admin, "--owner", owner2.ID), `"flags"`, false},
		{"keys revoke", []string{"0123456789abcdef"}, []string{"--admin-addr", dead}, unreachable, false},
		{"links import", []string{bitly}, []string{"--url", base, "--api-key-file", keyFile, "--format", "bitly", "--progress", "none"}, "2 rows", true},
		{"links export", nil, []string{"--url", base, "--api-key-file", keyFile, "--format", "json"}, "https://flags.example/show", true},
		{"links create", []string{"https://flags.example/new"}, with(own, "--tag", "flagtag"), `"flagtag"`, false},
		{"links list", nil, with(own, "--tag", "flagtag"), `https://flags.example/new`, false},
		{"links show", []string{shown}, admin, `"owner"`, false},
		{"links delete", []string{deleted}, own, `"deleted": true`, false},
		{"links review", []string{"{mod}"}, with(admin, "--reason", "flags test"), `"status": "review"`, false},
		{"links block", []string{"{mod}"}, with(admin, "--reason", "flags test"), `"status": "blocked"`, false},
		{"links restore", []string{"{mod}"}, with(admin, "--reason", "flags test"), `"status": "active"`, false},
		{"links history", []string{"{mod}"}, admin, `"history"`, false},
		{"webhooks create", []string{"https://93.184.215.14/flags"}, with(own, "--event", "link.created,link.clicked"), `"whsec_`, false},
		{"webhooks list", nil, own, `https://93.184.215.14/flags`, false},
		{"webhooks delete", []string{"wh_0000000000000001"}, []string{"--url", "http://" + dead, "--api-key-file", keyFile}, unreachable, false},
		{"reports list", nil, admin, `[`, false},
		{"reports resolve", []string{"1"}, []string{"--action", "dismiss", "--admin-addr", dead}, unreachable, false},
		{"events count", nil, with(admin, "--link", shown), `"count"`, false},
		{"events tail", nil, with(admin, "-n", "1"), `[`, false},
		{"rollup rebuild", nil, with(admin, "--from", today, "--to", today), `{`, false},
		{"snapshot save", []string{"{dir}/snap"}, admin, `"index"`, false},
		{"snapshot restore", []string{snap}, []string{"--admin-addr", dead}, unreachable, false},
		{"tls ca create", nil, []string{"-dir", "{dir}"}, "Saved {dir}/waymark-agent-ca.pem", true},
		{"tls cert create", nil, []string{"--node", "n1", "--role", "voter", "--ca", filepath.Join(caDir, "waymark-agent-ca.pem"),
			"--ca-key", filepath.Join(caDir, "waymark-agent-ca-key.pem"), "-dir", "{dir}"}, "Saved {dir}/n1-node.pem", true},
		{"keygen", nil, nil, "=", true},        // takes no flags and no arguments
		{"version", nil, nil, "waymark", true}, // takes no flags and no arguments
	}
	covered := map[string]bool{}
	for _, r := range rows {
		covered[r.cmd] = true
	}
	for _, c := range commands {
		if !covered[c.name] {
			t.Errorf("command %q has no row in this table", c.name)
		}
	}
	for _, r := range rows {
		// Every order of flags and positionals: flags first, flags last,
		// and (with two or more flag words) split around the positionals.
		orders := [][]string{with(r.flags, r.pos...)}
		if len(r.pos) > 0 {
			orders = append(orders, with(r.pos, r.flags...))
			if len(r.flags) >= 2 {
				orders = append(orders, with(with(r.flags[:2], r.pos...), r.flags[2:]...))
			}
		}
		for n, args := range orders {
			runDir := t.TempDir()
			args = slices.Clone(args)
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "{dir}", runDir)
				args[i] = strings.ReplaceAll(args[i], "{mod}", moderated[n])
			}
			full := append(strings.Fields(r.cmd), args...)
			stdout, stderr, code := runCLI(t, env, full...)
			name := "waymark " + strings.Join(full, " ")
			switch {
			case r.want == unreachable:
				if code != 3 || !strings.Contains(stderr, dead) {
					t.Errorf("%s: exit %d %q; want 3 naming %s", name, code, stderr, dead)
				}
			case code != 0:
				t.Errorf("%s: exit %d: %s", name, code, stderr)
			case !strings.Contains(stdout, strings.ReplaceAll(r.want, "{dir}", runDir)):
				t.Errorf("%s: output lacks %q:\n%s", name, r.want, stdout)
			case !r.text && !json.Valid([]byte(stdout)):
				t.Errorf("%s: output is not JSON:\n%s", name, stdout)
			}
		}
	}
}
