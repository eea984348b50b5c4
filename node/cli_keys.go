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

// scopeList is a repeatable --scope flag; each value may itself be a
// comma-separated list.
type scopeList []string

func (s *scopeList) String() string { return strings.Join(*s, ",") }

func (s *scopeList) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// CmdKeysCreate is `waymark keys create --owner ID --name NAME --scope
// SCOPE...`: it prints only the new key's secret (every field with
// -format json).
func CmdKeysCreate(args []string) error {
	var owner, name *string
	var scopes scopeList
	_, mk, err := parseCommandFlags("keys create", args, "--owner ID --name NAME --scope SCOPE [--scope SCOPE]...", 0, 0, func(fs *flag.FlagSet) {
		owner = fs.String("owner", "", "the owner the key belongs to (required)")
		name = fs.String("name", "", "what the key is for, shown in `keys list` (required)")
		fs.Var(&scopes, "scope", "a scope the key has, repeatable or comma-separated: "+strings.Join(store.ScopeNames(), ", "))
	})
	if err != nil {
		return err
	}
	if *owner == "" || store.CheckOwnerID(*owner) != nil {
		return &cliError{ExitUsage, fmt.Errorf("--owner is required")}
	}
	req := edge.KeyRequest{Name: name, Scopes: scopes}
	if _, _, err := req.Check(); err != nil {
		return &cliError{ExitUsage, fmt.Errorf("--name/--scope: %w", err)}
	}
	c, err := mk()
	if err != nil {
		return err
	}
	body := struct {
		Owner string `json:"owner"`
		edge.KeyRequest
	}{*owner, req}
	var out edge.KeyView
	if err := c.call("POST", "/v1/keys", body, &out); err != nil {
		return err
	}
	if c.format == "json" {
		return c.print(out, nil)
	}
	_, err = fmt.Fprintln(c.out, out.Secret)
	return err
}

// CmdKeysList is `waymark keys list --owner ID`.
func CmdKeysList(args []string) error {
	var owner *string
	_, mk, err := parseCommandFlags("keys list", args, "--owner ID", 0, 0, func(fs *flag.FlagSet) {
		owner = fs.String("owner", "", "the owner whose keys to list (required)")
	})
	if err != nil {
		return err
	}
	if *owner == "" {
		return &cliError{ExitUsage, fmt.Errorf("--owner is required")}
	}
	c, err := mk()
	if err != nil {
		return err
	}
	var out KeyList
	if err := c.call("GET", "/v1/keys?owner="+url.QueryEscape(*owner), nil, &out); err != nil {
		return err
	}
	return c.print(out.Keys, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "ID\tNAME\tSCOPES\tCREATED\tLAST USED")
		for _, k := range out.Keys {
			used := "never"
			if k.LastUsedAt != nil {
				used = *k.LastUsedAt
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, strings.Join(k.Scopes, ","), k.CreatedAt, used)
		}
	})
}

// CmdKeysRevoke is `waymark keys revoke ID`: every node refuses the key
// once it has applied the revoke.
func CmdKeysRevoke(args []string) error {
	fs, c, err := connect("keys revoke", args, "[flags] ID", 1, 1)
	if err != nil {
		return err
	}
	id := strings.ToLower(fs.Arg(0))
	if err := c.call("DELETE", "/v1/keys/"+url.PathEscape(id), nil, nil); err != nil {
		return err
	}
	if c.format == "json" {
		return c.print(map[string]string{"revoked": id}, nil)
	}
	_, err = fmt.Fprintf(c.out, "revoked key %s\n", id)
	return err
}
