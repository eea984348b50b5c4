package node

import (
	"flag"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/store"
)

// The owner's webhook commands (issue 13 point 5), on the public API with
// an API key like `links create`.

// CmdWebhooksCreate is `waymark webhooks create URL --event E...`: it
// prints the id and the signing secret, shown only this once.
func CmdWebhooksCreate(args []string) error {
	var events scopeList
	fs, mk, err := parseOwnerCommand("webhooks create", args, "URL --event EVENT [--event EVENT]... [flags]", 1, 1, func(fs *flag.FlagSet) {
		fs.Var(&events, "event", "an event to deliver, repeatable or comma-separated: "+strings.Join(store.WebhookEventNames(), ", "))
	})
	if err != nil {
		return err
	}
	var names []string
	for _, e := range events {
		for _, part := range strings.Split(e, ",") {
			if part = strings.TrimSpace(part); part != "" {
				names = append(names, part)
			}
		}
	}
	u := fs.Arg(0)
	req := edge.WebhookRequest{URL: &u, Events: names}
	c, err := mk()
	if err != nil {
		return err
	}
	var out edge.WebhookView
	if err := c.call("POST", "/v1/webhooks", req, &out); err != nil {
		return err
	}
	return c.print(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "id\t%s\nsecret\t%s\n", out.ID, out.Secret)
	})
}

// CmdWebhooksList is `waymark webhooks list`.
func CmdWebhooksList(args []string) error {
	_, mk, err := parseOwnerCommand("webhooks list", args, "[flags]", 0, 0, nil)
	if err != nil {
		return err
	}
	c, err := mk()
	if err != nil {
		return err
	}
	var out struct {
		Webhooks []edge.WebhookView `json:"webhooks"`
	}
	if err := c.call("GET", "/v1/webhooks", nil, &out); err != nil {
		return err
	}
	return c.print(out.Webhooks, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "ID\tURL\tEVENTS\tCREATED")
		for _, h := range out.Webhooks {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", h.ID, h.URL, strings.Join(h.Events, ","), h.CreatedAt)
		}
	})
}

// CmdWebhooksDelete is `waymark webhooks delete ID`.
func CmdWebhooksDelete(args []string) error {
	fs, mk, err := parseOwnerCommand("webhooks delete", args, "ID [flags]", 1, 1, nil)
	if err != nil {
		return err
	}
	c, err := mk()
	if err != nil {
		return err
	}
	id := fs.Arg(0)
	if err := c.call("DELETE", "/v1/webhooks/"+url.PathEscape(id), nil, nil); err != nil {
		return err
	}
	return c.print(map[string]any{"id": id, "deleted": true}, func(w *tabwriter.Writer) { fmt.Fprintf(w, "deleted webhook %s\n", id) })
}
