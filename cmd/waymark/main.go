// Package main is the waymark command. It is the single Waymark binary: every node role and the
// operator CLI. It parses the subcommand and hands off to package node.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/waymark/waymark/node"
)

// commands lists every subcommand in one place.
var commands = []struct {
	name string
	help string
	run  func(args []string) error
}{
	{"node", "run a node (waymark node --dev for a complete single node)", node.CmdNode},
	{"owners create", "create an owner; prints only its API key", node.CmdOwnersCreate},
	{"owners suspend", "suspend an owner: its links answer 410 and its API keys 401 (--reason TEXT)", node.CmdOwnersSuspend},
	{"owners unsuspend", "lift an owner's suspension", node.CmdOwnersUnsuspend},
	{"keys create", "make an API key: --owner ID --name NAME --scope SCOPE (repeatable or comma-separated); prints only the key", node.CmdKeysCreate},
	{"keys list", "list an owner's API keys (--owner ID): scopes, created, last used", node.CmdKeysList},
	{"keys revoke", "revoke an API key by id, on every node", node.CmdKeysRevoke},
	{"status", "show this node: roles, leader, applied index, readiness", node.CmdStatus},
	{"members", "list gossip members: address, region, roles, status, version", node.CmdMembers},
	{"join", "join this node to existing members by gossip address", node.CmdJoin},
	{"leave", "leave the cluster gracefully and stop the node", node.CmdLeave},
	{"raft peers", "show the Raft configuration and how far each peer trails", node.CmdRaftPeers},
	{"raft remove-peer", "remove a peer from the Raft configuration", node.CmdRemovePeer},
	{"raft transfer-leader", "hand leadership to another voter (any if no ID)", node.CmdTransferLeader},
	{"regions list", "list the claimed region slots of the ID space", node.CmdRegionsList},
	{"regions add", "claim a region slot, so nodes of that --region can generate codes", node.CmdRegionsAdd},
	{"blocklist add", "block destinations: DOMAIN|IP|CIDR [--reason] [--kind block|shortener], on every node", node.CmdBlocklistAdd},
	{"blocklist remove", "remove blocklist entries", node.CmdBlocklistRemove},
	{"blocklist list", "list the replicated blocklist", node.CmdBlocklistList},
	{"blocklist import", "import a threat feed FILE --format hosts|urlhaus|domains, in batches", node.CmdBlocklistImport},
	{"links create", "create a link as its owner: URL [--alias A] [--tag T]... [--expires T|DURATION] [--redirect N]", node.CmdLinksCreate},
	{"links list", "list your links, newest first [--tag T] [--q TEXT] [--domain D] [--limit N]", node.CmdLinksList},
	{"links show", "show a link: as its owner with an API key, else as the operator (see -h)", node.CmdLinksShow},
	{"links delete", "delete one of your links: it answers 410, its code stays reserved", node.CmdLinksDelete},
	{"links block", "block a link (--reason TEXT; --legal for 451)", node.CmdLinksBlock},
	{"links review", "put a link under review: a warning interstitial first", node.CmdLinksReview},
	{"links restore", "lift a block or review", node.CmdLinksRestore},
	{"links history", "show every change to a link: who, when, what, why", node.CmdLinksHistory},
	{"links import", "import links from FILE: an export of Bitly, YOURLS, Kutt, Shlink or ours (--format, --domain); rerun to resume", node.CmdLinksImport},
	{"links export", "write every link of the owner to stdout or -o FILE (--format csv|json), streaming", node.CmdLinksExport},
	{"webhooks create", "register a signed webhook as its owner: URL --event E (repeatable or comma-separated); prints its id and secret", node.CmdWebhooksCreate},
	{"webhooks list", "list your webhooks (never their secrets)", node.CmdWebhooksList},
	{"webhooks delete", "remove one of your webhooks: ID", node.CmdWebhooksDelete},
	{"reports list", "list public abuse reports (--status open|resolved|all)", node.CmdReportsList},
	{"reports resolve", "resolve a report: --action block|legal|review|dismiss [--reason TEXT]", node.CmdReportsResolve},
	{"domains list", "list custom domains and their owners and status", node.CmdDomainsList},
	{"domains approve", "approve a custom DOMAIN an owner registered", node.CmdDomainsApprove},
	{"domains add", "add a custom DOMAIN --owner ID, approved", node.CmdDomainsAdd},
	{"events count", "print the number of raw events the aggregator holds", node.CmdEventsCount},
	{"events tail", "show the newest raw events", node.CmdEventsTail},
	{"rollup rebuild", "recompute rollups from raw events for a range of days", node.CmdRollupRebuild},
	{"snapshot save", "save a backup of the whole cluster state to FILE", node.CmdSnapshotSave},
	{"snapshot restore", "replace the whole cluster state with a backup FILE (on the leader)", node.CmdSnapshotRestore},
	{"tls ca create", "create the cluster CA for node-to-node TLS", node.CmdTLSCACreate},
	{"tls cert create", "create a node certificate signed by the cluster CA (--node NAME)", node.CmdTLSCertCreate},
	{"keygen", "print a new random cluster key", node.CmdKeygen},
	{"version", "print the version", func([]string) error { fmt.Println("waymark", node.Version); return nil }},
}

func main() {
	args := os.Args[1:]
	for _, c := range commands {
		words := strings.Fields(c.name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == c.name {
			err := c.run(args[len(words):])
			if err != nil && node.ExitCode(err) != node.ExitOK {
				fmt.Fprintln(os.Stderr, "waymark:", err)
			}
			os.Exit(node.ExitCode(err))
		}
	}
	usage()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		os.Exit(node.ExitOK)
	}
	fmt.Fprintf(os.Stderr, "waymark: unknown command %q\n", strings.Join(args, " "))
	os.Exit(node.ExitUsage)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: waymark COMMAND [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-16s %s\n", c.name, c.help)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'waymark COMMAND -h' for a command's flags.")
}
