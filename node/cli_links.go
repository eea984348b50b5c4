package node

import (
	"flag"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
)

// operatorLinksShow is `waymark links show CODE` without an API key (see
// CmdLinksShow): status, destination, owner, times and the reason of the
// latest status change, from the admin API.
func operatorLinksShow(args []string) error {
	var ignored *string
	fs, mk, err := parseCommandFlags("links show", args, linksShowUsage, 1, 1, func(fs *flag.FlagSet) {
		ownerFlagsForShow(fs, &ignored, &ignored)
	})
	if err != nil {
		return err
	}
	c, err := mk()
	if err != nil {
		return err
	}
	var info LinkInfo
	if err := c.call("GET", "/v1/links/"+url.PathEscape(fs.Arg(0)), nil, &info); err != nil {
		return err
	}
	return c.print(info, func(w *tabwriter.Writer) { linkInfoRows(w, &info) })
}

func linkInfoRows(w *tabwriter.Writer, info *LinkInfo) {
	rows := [][2]string{
		{"code", info.Code}, {"status", info.Status}, {"destination", info.URL}, {"owner", info.Owner},
		{"redirect", fmt.Sprint(info.Redirect)}, {"created", info.CreatedAt}, {"updated", info.UpdatedAt},
	}
	if info.ExpiresAt != "" {
		rows = append(rows, [2]string{"expires", info.ExpiresAt})
	}
	if info.ClickLimit != 0 {
		rows = append(rows, [2]string{"click limit", fmt.Sprint(info.ClickLimit)})
	}
	if info.ReviewUntil != "" {
		rows = append(rows, [2]string{"edit review until", info.ReviewUntil})
	}
	if info.ReasonBy != "" {
		reason := info.Reason
		if reason == "" {
			reason = "(none given)"
		}
		rows = append(rows, [2]string{"reason", reason + " (" + info.ReasonBy + ")"})
	}
	rows = append(rows, [2]string{"index", fmt.Sprint(info.Index)})
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\n", r[0], r[1])
	}
}

// CmdLinksBlock is `waymark links block CODE --reason TEXT [--legal]`: a
// warning page without the destination (410), or 451 with --legal.
func CmdLinksBlock(args []string) error {
	var reason *string
	var legal *bool
	fs, mk, err := parseCommandFlags("links block", args, "[flags] CODE --reason TEXT [--legal]", 1, 1, func(fs *flag.FlagSet) {
		reason = fs.String("reason", "", "why the link is blocked (required; kept in its history)")
		legal = fs.Bool("legal", false, "a legal block: 451 Unavailable For Legal Reasons")
	})
	if err != nil {
		return err
	}
	if strings.TrimSpace(*reason) == "" {
		return &cliError{ExitUsage, fmt.Errorf("waymark links block needs --reason TEXT")}
	}
	return linkAction(mk, fs.Arg(0), "block", takedownRequest{Reason: *reason, Legal: *legal})
}

// CmdLinksReview is `waymark links review CODE [--reason TEXT]`: the
// warning interstitial before the redirect.
func CmdLinksReview(args []string) error {
	return reasonOnlyCommand("links review", "review", args)
}

// CmdLinksRestore is `waymark links restore CODE [--reason TEXT]`: lifts a
// block or review (and an edit's review window).
func CmdLinksRestore(args []string) error {
	return reasonOnlyCommand("links restore", "restore", args)
}

func reasonOnlyCommand(name, action string, args []string) error {
	var reason *string
	fs, mk, err := parseCommandFlags(name, args, "[flags] CODE [--reason TEXT]", 1, 1, func(fs *flag.FlagSet) {
		reason = fs.String("reason", "", "why (kept in the link's history)")
	})
	if err != nil {
		return err
	}
	return linkAction(mk, fs.Arg(0), action, takedownRequest{Reason: *reason})
}

func linkAction(mk func() (*client, error), code, action string, req takedownRequest) error {
	c, err := mk()
	if err != nil {
		return err
	}
	var info LinkInfo
	if err := c.call("POST", "/v1/links/"+url.PathEscape(code)+"/"+action, req, &info); err != nil {
		return err
	}
	return c.print(info, func(w *tabwriter.Writer) { linkInfoRows(w, &info) })
}

// CmdLinksHistory is `waymark links history CODE`: every change, oldest
// first, with who made it and why.
func CmdLinksHistory(args []string) error {
	fs, c, err := connect("links history", args, "[flags] CODE", 1, 1)
	if err != nil {
		return err
	}
	var out LinkHistory
	if err := c.call("GET", "/v1/links/"+url.PathEscape(fs.Arg(0))+"/history", nil, &out); err != nil {
		return err
	}
	return c.print(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "TIME\tINDEX\tACTOR\tACTION\tCHANGES\tREASON")
		for _, h := range out.History {
			changes := make([]string, len(h.Changes))
			for i, ch := range h.Changes {
				changes[i] = fmt.Sprintf("%s: %q -> %q", ch.Field, ch.Old, ch.New)
			}
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", h.At, h.Index, h.Actor, h.Action, strings.Join(changes, "; "), h.Reason)
		}
	})
}
