package node

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/waymark/waymark/edge"
)

// The owner's link commands: `waymark links create|list|show|delete`
// against the public API with an API key (ownerClientFlags). `links show`
// also serves the operator (cli_links.go): see CmdLinksShow.

// OwnerLink is a link as the public API shows it to its owner.
type OwnerLink = edge.LinkView

// ownerLinkPage is one page of GET /v1/links.
type ownerLinkPage struct {
	Links      []OwnerLink `json:"links"`
	NextCursor *string     `json:"next_cursor"`
}

// repeated is a flag that may be given more than once (--tag a --tag b);
// a comma inside one value splits it too.
type repeated []string

func (r *repeated) String() string { return strings.Join(*r, ",") }

func (r *repeated) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*r = append(*r, p)
		}
	}
	return nil
}

// parseExpiry reads --expires: an RFC 3339 time, or a duration from now
// (Go syntax such as 90m or 36h, or whole days such as 7d).
func parseExpiry(v string, now time.Time) (string, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC().Format(time.RFC3339), nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 100*365 {
			return "", fmt.Errorf("--expires %q: want an RFC 3339 time (2030-01-02T15:04:05Z) or a duration (90m, 36h, 7d)", v)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			return "", fmt.Errorf("--expires %q: want an RFC 3339 time (2030-01-02T15:04:05Z) or a positive duration (90m, 36h, 7d)", v)
		}
	}
	return now.Add(d).UTC().Format(time.RFC3339), nil
}

// CmdLinksCreate is `waymark links create URL [--alias A] [--domain D]
// [--tag T]... [--expires RFC3339|DURATION] [--redirect 301|302|307|308]`.
func CmdLinksCreate(args []string) error {
	var alias, domain, expires *string
	var redirect *int
	var tags repeated
	fs, mk, err := parseOwnerCommand("links create", args, "URL [flags]", 1, 1, func(fs *flag.FlagSet) {
		alias = fs.String("alias", "", "your own code instead of a generated one")
		domain = fs.String("domain", "", "domain of the short link (default: the cluster's public URL host)")
		fs.Var(&tags, "tag", "a tag (repeatable, or comma-separated): 1 to 32 of a-z, 0-9, '-', '_'; at most 10")
		expires = fs.String("expires", "", "expiry: an RFC 3339 time, or a duration from now (90m, 36h, 7d)")
		redirect = fs.Int("redirect", 302, "redirect status: 301, 302, 307 or 308")
	})
	if err != nil {
		return err
	}
	body := map[string]any{"url": fs.Arg(0), "redirect": *redirect}
	switch *redirect {
	case 301, 302, 307, 308:
	default:
		return &cliError{ExitUsage, fmt.Errorf("--redirect %d: want 301, 302, 307 or 308", *redirect)}
	}
	if *alias != "" {
		body["alias"] = *alias
	}
	if *domain != "" {
		body["domain"] = *domain
	}
	if len(tags) > 0 {
		body["tags"] = []string(tags)
	}
	if *expires != "" {
		at, err := parseExpiry(*expires, time.Now())
		if err != nil {
			return &cliError{ExitUsage, err}
		}
		body["expires_at"] = at
	}
	c, err := mk()
	if err != nil {
		return err
	}
	var l OwnerLink
	if err := c.call("POST", "/v1/links", body, &l); err != nil {
		return err
	}
	return c.print(l, func(w *tabwriter.Writer) { ownerLinkRows(w, &l) })
}

func ownerLinkRows(w *tabwriter.Writer, l *OwnerLink) {
	rows := [][2]string{
		{"code", l.Code}, {"short url", l.ShortURL}, {"destination", l.URL}, {"status", l.Status},
		{"redirect", fmt.Sprint(l.Redirect)}, {"tags", strings.Join(l.Tags, ",")},
		{"forward query", fmt.Sprint(l.ForwardQuery)}, {"created", l.CreatedAt}, {"updated", l.UpdatedAt},
	}
	if l.Domain != nil {
		rows = append(rows, [2]string{"domain", *l.Domain})
	}
	if l.ExpiresAt != nil {
		rows = append(rows, [2]string{"expires", *l.ExpiresAt})
	}
	if l.ClickLimit != nil {
		rows = append(rows, [2]string{"click limit", fmt.Sprint(*l.ClickLimit)})
	}
	if l.ReviewUntil != nil {
		rows = append(rows, [2]string{"edit review until", *l.ReviewUntil})
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\n", r[0], r[1])
	}
}

// listPageMax is the largest page GET /v1/links serves.
const listPageMax = 1000

// CmdLinksList is `waymark links list [--tag T] [--q TEXT] [--domain D]
// [--limit N]`: the owner's links, newest first, fetched page by page
// through the API's cursor.
func CmdLinksList(args []string) error {
	var tag, q, domain, cursor *string
	var limit, pageSize *int
	_, mk, err := parseOwnerCommand("links list", args, "[flags]", 0, 0, func(fs *flag.FlagSet) {
		tag = fs.String("tag", "", "only links with this tag")
		q = fs.String("q", "", "only links whose destination or code contains this text (any case)")
		domain = fs.String("domain", "", "only links on this domain")
		limit = fs.Int("limit", 0, "show at most this many links (0: all); json output then carries next_cursor to go on from")
		pageSize = fs.Int("page-size", 100, fmt.Sprintf("links per API request (1 to %d)", listPageMax))
		cursor = fs.String("cursor", "", "start after this cursor (a next_cursor of an earlier listing)")
	})
	if err != nil {
		return err
	}
	if *limit < 0 {
		return &cliError{ExitUsage, fmt.Errorf("--limit %d: want 0 (all) or more", *limit)}
	}
	if *pageSize < 1 || *pageSize > listPageMax {
		return &cliError{ExitUsage, fmt.Errorf("--page-size %d: want 1 to %d", *pageSize, listPageMax)}
	}
	c, err := mk()
	if err != nil {
		return err
	}
	out := ownerLinkPage{Links: []OwnerLink{}}
	next := *cursor
	for first := true; first || next != ""; first = false {
		n := *pageSize
		if *limit > 0 {
			n = min(n, *limit-len(out.Links))
		}
		v := url.Values{"limit": {strconv.Itoa(n)}}
		for name, val := range map[string]string{"tag": *tag, "q": *q, "domain": *domain, "cursor": next} {
			if val != "" {
				v.Set(name, val)
			}
		}
		var page ownerLinkPage
		if err := c.call("GET", "/v1/links?"+v.Encode(), nil, &page); err != nil {
			return err
		}
		out.Links = append(out.Links, page.Links...)
		next = ""
		if page.NextCursor != nil {
			next = *page.NextCursor
		}
		if *limit > 0 && len(out.Links) >= *limit {
			break
		}
	}
	if next != "" {
		out.NextCursor = &next
	}
	if c.format == "json" {
		return c.print(out, nil)
	}
	err = c.print(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "CODE\tSTATUS\tTAGS\tCREATED\tDESTINATION")
		for _, l := range out.Links {
			name := l.Code // DOMAIN/CODE on a custom domain, as show and delete take it
			if l.Domain != nil {
				name = *l.Domain + "/" + l.Code
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", name, l.Status, strings.Join(l.Tags, ","), l.CreatedAt, l.URL)
		}
	})
	if err == nil && next != "" {
		fmt.Fprintf(os.Stderr, "more links: add --cursor %s\n", next)
	}
	return err
}

// linksShowUsage is the rule `waymark links show -h` prints.
const linksShowUsage = `[flags] CODE

Shows one link. With an API key (--api-key-file or $WAYMARK_API_KEY) it
asks the public API as the link's owner (--url or $WAYMARK_URL names the
node) and shows what the owner sees: tags, short URL, query forwarding.
Without one it asks the admin API with the operator token (--admin-addr,
--token-file) and shows what the operator sees: owner, reason, index.
A link on a custom domain is named DOMAIN/CODE (go.acme.com/launch).`

// CmdLinksShow is `waymark links show CODE`, for an owner or an operator:
// an API key given (--api-key-file or $WAYMARK_API_KEY) means the owner,
// through the public API; otherwise the operator, through the admin API.
func CmdLinksShow(args []string) error {
	var apiKeyFile, ownerURL *string
	_, _, err := parseCommandFlags("links show", args, linksShowUsage, 1, 1, func(fs *flag.FlagSet) {
		ownerFlagsForShow(fs, &apiKeyFile, &ownerURL)
	})
	if err != nil {
		return err
	}
	if *apiKeyFile != "" || os.Getenv("WAYMARK_API_KEY") != "" {
		return ownerLinksShow(args)
	}
	if *ownerURL != "" {
		return &cliError{ExitUsage, errors.New("links show: --url needs an API key (--api-key-file or WAYMARK_API_KEY); without one it asks the admin API (--admin-addr)")}
	}
	return operatorLinksShow(args)
}

// ownerFlagsForShow adds the owner client's own flags (those the operator
// client lacks) to the operator's flag set, so one parse reads both.
func ownerFlagsForShow(fs *flag.FlagSet, apiKeyFile, ownerURL **string) {
	*ownerURL = fs.String("url", "", "public URL of a node, as the owner (default $WAYMARK_URL, then http://127.0.0.1:8080)")
	*apiKeyFile = fs.String("api-key-file", "", "file holding your API key: show the link as its owner (default $WAYMARK_API_KEY)")
}

func ownerLinksShow(args []string) error {
	fs, mk, err := parseOwnerCommand("links show", args, linksShowUsage, 1, 1, func(fs *flag.FlagSet) {
		fs.String("admin-addr", "", "ignored with an API key")
		fs.String("token-file", "", "ignored with an API key")
	})
	if err != nil {
		return err
	}
	c, err := mk()
	if err != nil {
		return err
	}
	var l OwnerLink
	if err := c.call("GET", ownerLinkPath(fs.Arg(0)), nil, &l); err != nil {
		return err
	}
	return c.print(l, func(w *tabwriter.Writer) { ownerLinkRows(w, &l) })
}

// CmdLinksDelete is `waymark links delete CODE`: the link answers 410 from
// then on; its code stays reserved.
func CmdLinksDelete(args []string) error {
	fs, mk, err := parseOwnerCommand("links delete", args, "CODE|DOMAIN/CODE [flags]", 1, 1, nil)
	if err != nil {
		return err
	}
	c, err := mk()
	if err != nil {
		return err
	}
	code := fs.Arg(0)
	if err := c.call("DELETE", ownerLinkPath(code), nil, nil); err != nil {
		return err
	}
	out := map[string]any{"code": code, "deleted": true}
	return c.print(out, func(w *tabwriter.Writer) { fmt.Fprintf(w, "deleted %s\n", code) })
}

// ownerLinkPath is the API path of a link named CODE, or DOMAIN/CODE for a
// link on a custom domain (as the operator's commands name it).
func ownerLinkPath(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return "/v1/links/" + url.PathEscape(name[i+1:]) + "?domain=" + url.QueryEscape(name[:i])
	}
	return "/v1/links/" + url.PathEscape(name)
}
