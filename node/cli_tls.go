package node

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// tlsFlags parses a `waymark tls` command's flags (no positionals).
func tlsFlags(name, usage string, args []string, add func(*flag.FlagSet)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	add(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: waymark %s %s\n", name, usage)
		fs.PrintDefaults()
	}
	if err := parseInterspersed(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &cliError{ExitUsage, err}
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return &cliError{ExitUsage, fmt.Errorf("waymark %s: unexpected argument %q", name, fs.Arg(0))}
	}
	return nil
}

// writeNew writes a file that must not exist yet: `waymark tls` never
// overwrites a CA or a key.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return &cliError{ExitError, fmt.Errorf("%s already exists; remove it or choose another -dir", path)}
	}
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("cannot sync %s: %w", path, err)
	}
	return f.Close()
}

// CmdTLSCACreate is `waymark tls ca create [-dir D]`: a new cluster CA,
// written as waymark-agent-ca.pem and waymark-agent-ca-key.pem.
func CmdTLSCACreate(args []string) error {
	var dir *string
	if err := tlsFlags("tls ca create", "[-dir DIR]", args, func(fs *flag.FlagSet) {
		dir = fs.String("dir", ".", "folder to write the CA certificate and key into")
	}); err != nil {
		return err
	}
	certPEM, keyPEM, err := NewCA()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fmt.Errorf("cannot create -dir %q: %w", *dir, err)
	}
	certPath, keyPath := filepath.Join(*dir, TLSCAFile), filepath.Join(*dir, TLSCAKeyFile)
	if err := writeNew(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeNew(certPath, certPEM, 0o644); err != nil {
		os.Remove(keyPath)
		return err
	}
	fmt.Printf("==> Saved %s\n==> Saved %s\n", certPath, keyPath)
	return nil
}

// CmdTLSCertCreate is `waymark tls cert create --node NAME`: a node
// certificate signed by the CA, for Raft and node-to-node HTTPS.
func CmdTLSCertCreate(args []string) error {
	var node, roles, ca, caKey, dir, dns, ips *string
	var days *int
	if err := tlsFlags("tls cert create", "--node NAME --role ROLES [--ca FILE] [--ca-key FILE] [-dir DIR]", args, func(fs *flag.FlagSet) {
		node = fs.String("node", "", "node name (its --name); required")
		roles = fs.String("role", "", "the node's roles, as its --role: voter, edge, aggregator, comma-separated; required (raft takes connections only from voters)")
		ca = fs.String("ca", TLSCAFile, "CA certificate")
		caKey = fs.String("ca-key", TLSCAKeyFile, "CA private key")
		dir = fs.String("dir", ".", "folder to write NAME-node.pem and NAME-node-key.pem into")
		days = fs.Int("days", 365, "days the certificate is valid")
		dns = fs.String("additional-dnsname", "", "comma-separated extra DNS names (besides node.waymark, NAME, localhost)")
		ips = fs.String("additional-ipaddress", "", "comma-separated extra IP addresses (besides 127.0.0.1 and ::1)")
	}); err != nil {
		return err
	}
	if *node == "" || strings.ContainsAny(*node, "/\\") || len(*node) > MaxNameLen {
		return &cliError{ExitUsage, errors.New("waymark tls cert create needs --node NAME (the node's --name, no slashes)")}
	}
	roleList := parseRoles(*roles)
	if len(roleList) == 0 {
		return &cliError{ExitUsage, errors.New("waymark tls cert create needs --role (the node's --role: voter, edge, aggregator)")}
	}
	for _, r := range roleList {
		if r != RoleVoter && r != RoleEdge && r != RoleAggregator {
			return &cliError{ExitUsage, fmt.Errorf("--role: unknown role %q (want voter, edge or aggregator)", r)}
		}
	}
	if *days <= 0 {
		return &cliError{ExitUsage, errors.New("--days must be positive")}
	}
	var ipList []net.IP
	for _, s := range splitList(*ips) {
		ip := net.ParseIP(s)
		if ip == nil {
			return &cliError{ExitUsage, fmt.Errorf("--additional-ipaddress %q is not an IP address", s)}
		}
		ipList = append(ipList, ip)
	}
	caPEM, err := os.ReadFile(*ca)
	if err != nil {
		return &cliError{ExitUsage, fmt.Errorf("cannot read --ca (make one with `waymark tls ca create`): %w", err)}
	}
	caKeyPEM, err := os.ReadFile(*caKey)
	if err != nil {
		return &cliError{ExitUsage, fmt.Errorf("cannot read --ca-key: %w", err)}
	}
	certPEM, keyPEM, err := IssueNodeCert(caPEM, caKeyPEM, *node, roleList, *days, splitList(*dns), ipList)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fmt.Errorf("cannot create -dir %q: %w", *dir, err)
	}
	certPath, keyPath := filepath.Join(*dir, NodeCertFile(*node)), filepath.Join(*dir, NodeKeyFile(*node))
	if err := writeNew(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeNew(certPath, certPEM, 0o644); err != nil {
		os.Remove(keyPath)
		return err
	}
	fmt.Printf("==> Using %s and %s\n==> Saved %s\n==> Saved %s\n", *ca, *caKey, certPath, keyPath)
	return nil
}
