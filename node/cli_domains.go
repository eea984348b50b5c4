package node

import (
	"flag"
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"
)

// CmdDomainsList is `waymark domains list`: every custom domain.
func CmdDomainsList(args []string) error {
	_, mk, err := parseCommandFlags("domains list", args, "", 0, 0, nil)
	if err != nil {
		return err
	}
	c, err := mk()
	if err != nil {
		return err
	}
	var out []DomainView
	if err := c.call("GET", "/v1/domains", nil, &out); err != nil {
		return err
	}
	return c.print(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "DOMAIN\tOWNER\tSTATUS\tCREATED\tAPPROVED")
		for _, d := range out {
			approved := "-"
			if d.ApprovedAt != nil {
				approved = d.ApprovedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", d.Domain, d.Owner, d.Status, d.CreatedAt.Format(time.RFC3339), approved)
		}
	})
}

// CmdDomainsApprove is `waymark domains approve DOMAIN`: links may then
// be created on it and it serves redirects, on every node.
func CmdDomainsApprove(args []string) error {
	fs, mk, err := parseCommandFlags("domains approve", args, "DOMAIN", 1, 1, nil)
	if err != nil {
		return err
	}
	c, err := mk()
	if err != nil {
		return err
	}
	var out DomainView
	if err := c.call("POST", "/v1/domains/"+url.PathEscape(fs.Arg(0))+"/approve", nil, &out); err != nil {
		return err
	}
	return c.print(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "domain %s of owner %s is %s\n", out.Domain, out.Owner, out.Status)
	})
}

// CmdDomainsAdd is `waymark domains add DOMAIN --owner ID`: the domain is
// added already approved.
func CmdDomainsAdd(args []string) error {
	var owner *string
	fs, mk, err := parseCommandFlags("domains add", args, "DOMAIN --owner ID", 1, 1, func(fs *flag.FlagSet) {
		owner = fs.String("owner", "", "the owner id the domain belongs to (required)")
	})
	if err != nil {
		return err
	}
	if *owner == "" {
		return &cliError{ExitUsage, fmt.Errorf("domains add: --owner is required")}
	}
	c, err := mk()
	if err != nil {
		return err
	}
	var out DomainView
	if err := c.call("POST", "/v1/domains", map[string]string{"domain": fs.Arg(0), "owner": *owner}, &out); err != nil {
		return err
	}
	return c.print(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "domain %s of owner %s is %s\n", out.Domain, out.Owner, out.Status)
	})
}
