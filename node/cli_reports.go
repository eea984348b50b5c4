package node

import (
	"flag"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/waymark/waymark/store"
)

// CmdReportsList is `waymark reports list [--status open|resolved|all]`.
func CmdReportsList(args []string) error {
	var status *string
	_, mk, err := parseCommandFlags("reports list", args, "[--status open|resolved|all]", 0, 0, func(fs *flag.FlagSet) {
		status = fs.String("status", "open", "which cases: open, resolved or all")
	})
	if err != nil {
		return err
	}
	switch *status {
	case "open", "resolved", "all":
	default:
		return &cliError{ExitUsage, fmt.Errorf("reports list: --status %q: want open, resolved or all", *status)}
	}
	c, err := mk()
	if err != nil {
		return err
	}
	var out []ReportView
	if err := c.call("GET", "/v1/reports?"+url.Values{"status": {*status}}.Encode(), nil, &out); err != nil {
		return err
	}
	return c.print(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "ID\tCODE\tDESTINATION\tOWNER\tCOUNT\tREASONS\tFIRST\tLAST\tSTATUS")
		for _, r := range out {
			st := r.Status
			if r.Action != "" {
				st += " (" + r.Action + ")"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ID, r.Code, r.Destination, r.Owner, r.Count,
				strings.Join(r.Reasons, ","), r.FirstAt.Format(time.RFC3339), r.LastAt.Format(time.RFC3339), st)
		}
	})
}

// CmdReportsResolve is `waymark reports resolve ID --action
// block|legal|review|dismiss [--reason TEXT]`: one log entry closes the
// case and sets the link's operator status.
func CmdReportsResolve(args []string) error {
	var action, reason *string
	fs, mk, err := parseCommandFlags("reports resolve", args, "ID --action block|legal|review|dismiss [--reason TEXT]", 1, 1, func(fs *flag.FlagSet) {
		action = fs.String("action", "", "block (410), legal (451), review (interstitial) or dismiss (no change to the link)")
		reason = fs.String("reason", "", "why, kept with the case")
	})
	if err != nil {
		return err
	}
	if _, ok := store.ParseReportAction(*action); !ok {
		return &cliError{ExitUsage, fmt.Errorf("reports resolve: --action %q: want block, legal, review or dismiss", *action)}
	}
	c, err := mk()
	if err != nil {
		return err
	}
	var out ReportView
	body := map[string]string{"action": *action, "reason": *reason}
	if err := c.call("POST", "/v1/reports/"+url.PathEscape(fs.Arg(0))+"/resolve", body, &out); err != nil {
		return err
	}
	return c.print(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "report %s resolved (%s): link %s is now %s\n", out.ID, out.Action, out.Code, out.LinkStatus)
	})
}
