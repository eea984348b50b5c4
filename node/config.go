package node

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/waymark/waymark/edge"
	"github.com/waymark/waymark/ingest"
	"github.com/waymark/waymark/raft"
	"github.com/waymark/waymark/rollup"
	"github.com/waymark/waymark/rollup/clickhouse"
)

// Role names a job a node can do.
type Role string

const (
	RoleVoter      Role = "voter"
	RoleEdge       Role = "edge"
	RoleAggregator Role = "aggregator"
)

// Config is the validated runtime configuration of one node. Build it with
// ParseFlags (or by hand in tests) and call Validate before Start.
type Config struct {
	Name     string
	Region   string
	Roles    []Role
	Dev      bool
	DataDir  string
	HTTPAddr string
	RaftAddr string
	// RaftAdvertise is the Raft address other nodes dial, when it is not
	// the bound one (NAT, a proxy in front of the transport); "" = bound.
	RaftAdvertise string
	AdminAddr     string
	PublicURL     string

	GossipAddr      string
	Join            []string
	BootstrapExpect int
	ClusterKey      []byte // 32 bytes; encrypts gossip, authenticates node-to-node calls
	// TLSCert, TLSKey and TLSCA are this node's certificate and key and the
	// cluster CA (`waymark tls`), for Raft and the internal endpoints. All
	// empty: a CA derived from the cluster key (tlsfiles.go).
	TLSCert   string
	TLSKey    string
	TLSCA     string
	DeadGrace time.Duration

	// Raft log compaction; zero keeps raft's defaults (raft/config.go).
	// Small values let a test make a lagging node install a snapshot.
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64

	CacheEntries    int
	BlockCacheBytes int64
	PrivateMaxAge   time.Duration
	PermanentMaxAge time.Duration
	EditReview      time.Duration // 0 disables the bait-and-switch window
	ApplyTimeout    time.Duration
	BlockedHosts    []string
	AggregatorURL   string
	TrustedProxies  []netip.Prefix
	CountryHeader   string
	GeoIPPath       string
	IngestIPRate    float64
	IngestSiteRate  float64
	WriteRate       float64
	ReportBurst     int   // POST /v1/reports per client IP: burst, refilled at one a minute
	MaxConns        int   // public connections in all...
	MaxConnsPerIP   int   // ...and from one client address
	MinFreeDisk     int64 // bytes; below it the node refuses writes (storage-full mode)
	CaptureClicks   bool
	IngestMaxBytes  int64
	MaxShipLag      time.Duration
	// DeferBusy: how long a node that aggregates its own events holds
	// them back while it is busy serving (ingest/shippace.go); 0 never.
	DeferBusy time.Duration
	Retention time.Duration
	// Create limits (edge/createlimits.go) in creates/s; 0 turns one off.
	CreateRateIP, CreateRateDomain, CreateRateKey float64
	// PurgeAfter: a deleted link's destination is purged this long after
	// the delete (raft/purge.go); 0 never purges.
	PurgeAfter time.Duration
	// KeyUseFlush: how often this node writes the last-used times of the
	// API keys it saw through the log (node/keys.go); at least 1 s.
	KeyUseFlush time.Duration
	// CheckpointInterval: how long folded events wait in the aggregator's
	// memory before their rollups are written (rollup/DESIGN.md).
	CheckpointInterval time.Duration
	// Webhooks (node/webhooks.go): private addresses allowed (tests),
	// how long a delivery is retried, the first retry's wait, and the
	// clicks one link.clicked delivery carries at most.
	Webhooks WebhookConfig

	// AnalyticsStore is where an aggregator keeps analytics: "pebble"
	// (embedded, one aggregator) or "clickhouse" (shared by any number
	// of aggregators; chaggregator.go). The ClickHouse fields are read
	// with "clickhouse" only; the password is read from its file at start.
	AnalyticsStore     string
	ClickHouseURL      string
	ClickHouseDatabase string
	// ClickHouseLateness: how long past an hour's end (and the visit
	// gap) its rows wait for late segments before they are written.
	ClickHouseLateness time.Duration
	// ClickHouseMarkSettle: how long after a site's newest late mark its
	// rows wait before they are written again (0: no wait).
	ClickHouseMarkSettle   time.Duration
	ClickHouseUser         string
	ClickHousePasswordFile string

	LogFormat string // text or json
	LogLevel  string // debug, info, warn, error
}

// HasRole reports whether the node plays role r.
func (c *Config) HasRole(r Role) bool {
	for _, have := range c.Roles {
		if have == r {
			return true
		}
	}
	return false
}

// ErrBadConfig marks configuration errors, reported before anything starts.
var ErrBadConfig = errors.New("invalid configuration")

// MaxNameLen bounds --name and --region in bytes: every event carries
// both, and the aggregator refuses an event with a longer one.
const MaxNameLen = ingest.MaxShortLen

// defaultNodeName is the node name when --name is not given: the host
// name, or for a host name over MaxNameLen (a long FQDN) its start and a
// short hash of the whole, so two long names that share a start still
// differ. Host names that fit are used unchanged, so upgrading never
// renames a node.
func defaultNodeName(host string) string {
	if len(host) <= MaxNameLen {
		return host
	}
	sum := sha256.Sum256([]byte(host))
	suffix := "-" + hex.EncodeToString(sum[:4])
	head := host[:MaxNameLen-len(suffix)]
	for len(head) > 0 && !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	return strings.TrimRight(head, ".-") + suffix
}

// ParseFlags reads `waymark node` flags, falling back to WAYMARK_<FLAG>
// environment variables (dashes as underscores) for flags not given, then
// to a --config file.
func ParseFlags(args []string) (Config, bool, error) {
	return ParseFlagsOutput(args, os.Stderr)
}

// ParseFlagsOutput is ParseFlags with usage and errors written to out.
func ParseFlagsOutput(args []string, out io.Writer) (Config, bool, error) {
	var c Config
	var roles, blocked, proxies, joins, keyFile, configFile string
	var checkOnly bool
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Name, "name", "", "node name, unique in the cluster (default: host name)")
	fs.StringVar(&c.Region, "region", "local", "region this node serves; owns a slice of the code space")
	fs.StringVar(&roles, "role", "", "comma-separated roles: voter, edge, aggregator (default with --dev: all)")
	fs.BoolVar(&c.Dev, "dev", false, "single node with every role and embedded defaults, on loopback")
	fs.StringVar(&c.DataDir, "data-dir", "data", "folder for the store, Raft log, segments and tokens")
	fs.StringVar(&c.HTTPAddr, "http-addr", "127.0.0.1:8080", "public HTTP address (port 0 picks one)")
	fs.StringVar(&c.RaftAddr, "raft-addr", "127.0.0.1:0", "Raft TCP address (port 0 picks one)")
	fs.StringVar(&c.RaftAdvertise, "raft-advertise", "", "Raft address other nodes dial, when not the bound --raft-addr (a NAT or proxy in front of it)")
	fs.StringVar(&c.AdminAddr, "admin-addr", "127.0.0.1:8081", "operator API address (loopback by default)")
	fs.StringVar(&c.PublicURL, "public-url", "", "base URL of short links (default http://<http-addr>)")
	fs.StringVar(&c.GossipAddr, "gossip-addr", "127.0.0.1:0", "memberlist gossip address, TCP and UDP (port 0 picks one)")
	fs.StringVar(&joins, "join", "", "comma-separated gossip addresses of existing members to join")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", 0, "voters to wait for before bootstrapping a new cluster")
	fs.StringVar(&keyFile, "cluster-key-file", "", "file holding the base64 cluster key (or WAYMARK_CLUSTER_KEY; `waymark keygen` makes one)")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "this node's certificate (PEM) for Raft and node-to-node HTTPS (`waymark tls cert create`); with --tls-key and --tls-ca. Without all three, a CA derived from the cluster key signs one at start")
	fs.StringVar(&c.TLSKey, "tls-key", "", "private key (PEM) of --tls-cert")
	fs.StringVar(&c.TLSCA, "tls-ca", "", "cluster CA certificate (PEM) that signed every node's --tls-cert (`waymark tls ca create`)")
	fs.DurationVar(&c.DeadGrace, "dead-grace", 2*time.Minute, "how long a failed member stays in the Raft configuration before it is removed")
	fs.DurationVar(&c.SnapshotInterval, "raft-snapshot-interval", 0, "how often Raft checks whether to snapshot (0: 5m)")
	fs.Uint64Var(&c.SnapshotThreshold, "raft-snapshot-threshold", 0, "new log entries that trigger a Raft snapshot (0: 65536)")
	fs.Uint64Var(&c.TrailingLogs, "raft-trailing-logs", 0, "log entries kept behind a snapshot, so a lagging node can catch up without one (0: 262144)")
	fs.StringVar(&configFile, "config", "", "optional JSON file of flag values (flags and WAYMARK_* win over it)")
	fs.IntVar(&c.CacheEntries, "cache-entries", 1<<20, "redirect cache size in entries")
	fs.Int64Var(&c.BlockCacheBytes, "block-cache-bytes", 128<<20, "Pebble block cache size")
	fs.DurationVar(&c.PrivateMaxAge, "redirect-max-age", 60*time.Second, "Cache-Control max-age of 302/307 redirects")
	fs.DurationVar(&c.PermanentMaxAge, "permanent-max-age", time.Hour, "Cache-Control max-age of 301/308 redirects: browsers never re-ask within it, so a takedown reaches them only after it")
	fs.DurationVar(&c.EditReview, "edit-review", 24*time.Hour, "how long an edit that changes a link's destination shows the review interstitial first (0 disables)")
	fs.DurationVar(&c.ApplyTimeout, "apply-timeout", 5*time.Second, "deadline of every replicated write")
	fs.StringVar(&blocked, "blocked-hosts", "", "deprecated: use `waymark blocklist add`, which every node applies; comma-separated destination hosts this node alone refuses at create and edit")
	fs.StringVar(&c.AggregatorURL, "aggregator-url", "", "where segments ship: one aggregator URL, or several comma-separated (each sealed segment is then split by site or link and each part ships to its owner); default: the aggregators gossip knows (with --dev: this node)")
	fs.StringVar(&c.AnalyticsStore, "analytics-store", "pebble", "aggregator: where analytics live: pebble (embedded, one aggregator) or clickhouse (any number of aggregators against one ClickHouse; needs --clickhouse-url)")
	fs.StringVar(&c.ClickHouseURL, "clickhouse-url", "", "aggregator with --analytics-store clickhouse: ClickHouse's HTTP interface, http://HOST:8123")
	fs.StringVar(&c.ClickHouseDatabase, "clickhouse-database", "waymark", "aggregator with --analytics-store clickhouse: the database (created and migrated at start)")
	fs.DurationVar(&c.ClickHouseMarkSettle, "clickhouse-mark-settle", clickhouse.DefaultMarkSettle, "aggregator with --analytics-store clickhouse: a site whose late segments are still arriving (its newest dirty mark younger than this) has its rows written again only once they pause, or after 6 times this at most (0: at every pass)")
	fs.DurationVar(&c.ClickHouseLateness, "clickhouse-lateness", clickhouse.DefaultLateness, "aggregator with --analytics-store clickhouse: how long past an hour's end and the 30-minute visit gap its pre-aggregated rows wait for late segments (later ones rewrite them)")
	fs.StringVar(&c.ClickHouseUser, "clickhouse-user", "", "aggregator with --analytics-store clickhouse: the ClickHouse user (default: the server's default user)")
	fs.StringVar(&c.ClickHousePasswordFile, "clickhouse-password-file", "", "aggregator with --analytics-store clickhouse: file holding the ClickHouse user's password")
	fs.StringVar(&proxies, "trusted-proxies", "", "comma-separated CIDRs whose X-Forwarded-For is believed (--dev: loopback)")
	fs.StringVar(&c.CountryHeader, "country-header", "CF-IPCountry", "trusted header carrying the visitor's country")
	fs.StringVar(&c.GeoIPPath, "geoip-db", "", "MaxMind-format GeoIP database file: a country database gives visit:country, a city database (make geoip: data/geoip/city.mmdb) also visit:region and visit:city")
	fs.Float64Var(&c.WriteRate, "write-rate", 100, "link API writes per second per API key (token bucket, burst 2x)")
	fs.IntVar(&c.ReportBurst, "report-burst", 5, "public reports (POST /v1/reports) a client IP may send at once; one more a minute after that")
	fs.Float64Var(&c.CreateRateIP, "create-rate-ip", edge.DefaultCreateRateIP, "link creates per second per client address (IPv6 per /64), burst 10 s of it; 0 turns the limit off")
	fs.Float64Var(&c.CreateRateKey, "create-rate-key", edge.DefaultCreateRateKey, "link creates per second per API key, burst 10 s of it; 0 turns the limit off")
	fs.Float64Var(&c.CreateRateDomain, "create-rate-domain", edge.DefaultCreateRateDomain, "link creates per second per destination domain (registrable domain), burst 10 s of it; only creates that are made count; 0 turns the limit off")
	fs.DurationVar(&c.KeyUseFlush, "key-use-flush", DefaultKeyUseFlush, "how often this node writes the last-used times of the API keys it saw through the log (one entry per flush); at least 1s")
	fs.DurationVar(&c.PurgeAfter, "purge-after", raft.DefaultPurgeAfter, "a deleted link's destination is purged this long after the delete (its code stays reserved); 0 keeps destinations for ever")
	fs.IntVar(&c.MaxConns, "max-conns", 16384, "open public HTTP connections at most; past it new ones get 503")
	fs.IntVar(&c.MaxConnsPerIP, "max-conns-per-ip", 1024, "open public HTTP connections from one client address at most; past it new ones get 429")
	fs.Int64Var(&c.MinFreeDisk, "min-free-disk", 256<<20, "bytes kept free in the data folder's file system: below it the node refuses writes with 503 and fails readiness on voters and aggregators, until space is freed")
	fs.BoolVar(&c.CaptureClicks, "capture-clicks", true, "record a click event for every redirect")
	fs.Float64Var(&c.IngestSiteRate, "ingest-site-rate", 1000, "events per second one site may send to /api/event (burst 2x)")
	fs.Float64Var(&c.IngestIPRate, "ingest-ip-rate", 100, "events per second one client address may send to /api/event (burst 10x)")
	fs.Int64Var(&c.IngestMaxBytes, "ingest-max-pending-bytes", 1<<30, "byte cap on event segments not yet shipped; past it new events are dropped and counted")
	fs.DurationVar(&c.MaxShipLag, "max-ship-lag", time.Hour, "ship lag past this shows as a warning in /readyz/detail and `waymark status` (readiness does not depend on it)")
	fs.DurationVar(&c.DeferBusy, "analytics-defer-busy", 30*time.Second, "a node that aggregates its own events (aggregator role, no --aggregator-url) folds them in the CPU time serving leaves: while redirects and events keep its CPUs busy it holds them back, at most this long, then catches up (0: fold at once)")
	fs.DurationVar(&c.Retention, "retention", 90*24*time.Hour, "aggregator: raw events older than this are dropped, by whole days")
	fs.DurationVar(&c.CheckpointInterval, "analytics-checkpoint-interval", rollup.DefaultCheckpointInterval, "aggregator: how long folded events wait in memory before their rollups are written (a query writes them at once; after a crash they are refolded from the stored segments)")
	c.Webhooks.flags(fs)
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&checkOnly, "check-config", false, "print the validated configuration and exit")
	// Flags anywhere, as every command takes them; a stray argument is
	// still refused below.
	if err := parseInterspersed(fs, args); err != nil {
		return Config{}, false, err
	}
	if err := applyEnv(fs); err != nil {
		return Config{}, false, err
	}
	if configFile != "" {
		if err := applyConfigFile(fs, configFile); err != nil {
			return Config{}, false, err
		}
	}
	c.Join = splitList(joins)
	key, err := loadClusterKey(keyFile)
	if err != nil {
		return Config{}, false, err
	}
	c.ClusterKey = key
	if fs.NArg() > 0 {
		return Config{}, false, fmt.Errorf("%w: unexpected argument %q", ErrBadConfig, fs.Arg(0))
	}
	c.Roles = parseRoles(roles)
	c.BlockedHosts = splitList(blocked)
	for _, p := range splitList(proxies) {
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			return Config{}, false, fmt.Errorf("%w: --trusted-proxies %q: %w", ErrBadConfig, p, err)
		}
		c.TrustedProxies = append(c.TrustedProxies, prefix)
	}
	return c, checkOnly, c.Validate()
}

// applyEnv fills every flag not given on the command line from
// WAYMARK_<NAME>, so containers can be configured without arguments.
func applyEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		env := "WAYMARK_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%w: %s=%q: %w", ErrBadConfig, env, v, e)
			}
		}
	})
	return err
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func parseRoles(s string) []Role {
	var roles []Role
	for _, r := range splitList(s) {
		roles = append(roles, Role(strings.ToLower(r)))
	}
	return roles
}

// Validate checks the configuration and fills in derived defaults.
func (c *Config) Validate() error {
	if c.Dev && len(c.Roles) == 0 {
		c.Roles = []Role{RoleVoter, RoleEdge, RoleAggregator}
	}
	if len(c.Roles) == 0 {
		return fmt.Errorf("%w: no --role given (voter, edge, aggregator) and not --dev", ErrBadConfig)
	}
	for _, r := range c.Roles {
		if r != RoleVoter && r != RoleEdge && r != RoleAggregator {
			return fmt.Errorf("%w: unknown role %q (want voter, edge or aggregator)", ErrBadConfig, r)
		}
	}
	if !c.Dev && c.ClusterKey == nil {
		return fmt.Errorf("%w: a cluster key is required outside --dev: pass --cluster-key-file or WAYMARK_CLUSTER_KEY (make one with `waymark keygen`)", ErrBadConfig)
	}
	if c.BootstrapExpect < 0 || (c.BootstrapExpect > 0 && !c.HasRole(RoleVoter)) {
		return fmt.Errorf("%w: --bootstrap-expect needs a positive count on a voter", ErrBadConfig)
	}
	if c.SnapshotInterval < 0 || (c.SnapshotInterval > 0 && c.SnapshotInterval < 10*time.Millisecond) {
		return fmt.Errorf("%w: --raft-snapshot-interval %v: want 0 (the default) or at least 10ms", ErrBadConfig, c.SnapshotInterval)
	}
	if set := btoi(c.TLSCert != "") + btoi(c.TLSKey != "") + btoi(c.TLSCA != ""); set != 0 && set != 3 {
		return fmt.Errorf("%w: --tls-cert, --tls-key and --tls-ca go together (make them with `waymark tls ca create` and `waymark tls cert create`)", ErrBadConfig)
	}
	if c.DeadGrace <= 0 {
		return fmt.Errorf("%w: --dead-grace must be positive", ErrBadConfig)
	}
	if c.Name == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "waymark"
		}
		c.Name = defaultNodeName(host)
	}
	if len(c.Name) > MaxNameLen {
		return fmt.Errorf("%w: --name %q is %d bytes; at most %d (every event carries it, and the aggregator refuses longer)", ErrBadConfig, c.Name, len(c.Name), MaxNameLen)
	}
	if c.Region == "" {
		return fmt.Errorf("%w: --region must not be empty", ErrBadConfig)
	}
	if len(c.Region) > MaxNameLen {
		return fmt.Errorf("%w: --region %q is %d bytes; at most %d (every event carries it, and the aggregator refuses longer)", ErrBadConfig, c.Region, len(c.Region), MaxNameLen)
	}
	if c.DataDir == "" {
		return fmt.Errorf("%w: --data-dir must not be empty", ErrBadConfig)
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("%w: --data-dir %q: %w", ErrBadConfig, c.DataDir, err)
	}
	c.DataDir = abs
	for name, addr := range map[string]string{"--http-addr": c.HTTPAddr, "--raft-addr": c.RaftAddr, "--admin-addr": c.AdminAddr, "--gossip-addr": c.GossipAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%w: %s %q: %w", ErrBadConfig, name, addr, err)
		}
	}
	if c.RaftAdvertise != "" {
		host, port, err := net.SplitHostPort(c.RaftAdvertise)
		if ip := net.ParseIP(host); err != nil || ip == nil || ip.IsUnspecified() || port == "0" || port == "" {
			return fmt.Errorf("%w: --raft-advertise %q: want IP:PORT that other nodes can dial (a fixed port, not 0.0.0.0)", ErrBadConfig, c.RaftAdvertise)
		}
	}
	if c.CacheEntries < 0 || c.BlockCacheBytes < 0 || c.ApplyTimeout <= 0 {
		return fmt.Errorf("%w: sizes must not be negative and --apply-timeout must be positive", ErrBadConfig)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("%w: --log-format %q (want text or json)", ErrBadConfig, c.LogFormat)
	}
	if c.WriteRate <= 0 {
		return fmt.Errorf("%w: --write-rate must be positive", ErrBadConfig)
	}
	if c.CreateRateIP < 0 || c.CreateRateKey < 0 || c.CreateRateDomain < 0 {
		return fmt.Errorf("%w: --create-rate-ip, --create-rate-key and --create-rate-domain must not be negative (0 turns one off)", ErrBadConfig)
	}
	if c.KeyUseFlush != 0 && c.KeyUseFlush < time.Second {
		return fmt.Errorf("%w: --key-use-flush must be at least 1s", ErrBadConfig)
	}
	if c.DeferBusy < 0 {
		return fmt.Errorf("%w: --analytics-defer-busy must not be negative (0 folds at once)", ErrBadConfig)
	}
	if c.PurgeAfter < 0 {
		return fmt.Errorf("%w: --purge-after must not be negative (0 never purges)", ErrBadConfig)
	}
	if c.ReportBurst <= 0 {
		return fmt.Errorf("%w: --report-burst must be positive", ErrBadConfig)
	}
	if c.MinFreeDisk < 0 {
		return fmt.Errorf("%w: --min-free-disk must not be negative", ErrBadConfig)
	}
	if c.MaxConns <= 0 || c.MaxConnsPerIP <= 0 {
		return fmt.Errorf("%w: --max-conns and --max-conns-per-ip must be positive", ErrBadConfig)
	}
	if c.Retention < 24*time.Hour {
		return fmt.Errorf("%w: --retention must be at least 24h", ErrBadConfig)
	}
	if c.CheckpointInterval <= 0 {
		return fmt.Errorf("%w: --analytics-checkpoint-interval must be positive", ErrBadConfig)
	}
	if err := c.validateAnalytics(); err != nil {
		return err
	}
	if c.Dev && len(c.TrustedProxies) == 0 {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	return nil
}

// applyConfigFile sets every flag not already given (on the command line
// or in the environment) from a JSON object of flag names to values.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: cannot read --config %q: %w", ErrBadConfig, path, err)
	}
	var values map[string]any
	if err := json.Unmarshal(b, &values); err != nil {
		return fmt.Errorf("%w: --config %q is not a JSON object: %w", ErrBadConfig, path, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, v := range values {
		f := fs.Lookup(name)
		if f == nil || name == "config" {
			return fmt.Errorf("%w: --config %q: unknown setting %q", ErrBadConfig, path, name)
		}
		env := "WAYMARK_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if _, inEnv := os.LookupEnv(env); given[name] || inEnv {
			continue
		}
		var text string
		switch v := v.(type) {
		case string:
			text = v
		case []any:
			parts := make([]string, len(v))
			for i, p := range v {
				parts[i] = fmt.Sprint(p)
			}
			text = strings.Join(parts, ",")
		default:
			text = fmt.Sprint(v)
		}
		if err := f.Value.Set(text); err != nil {
			return fmt.Errorf("%w: --config %q: %s: %w", ErrBadConfig, path, name, err)
		}
	}
	return nil
}

// ClusterKeySize is the size of the cluster key in bytes.
const ClusterKeySize = 32

// loadClusterKey reads the base64 cluster key from a file, or from
// WAYMARK_CLUSTER_KEY. It returns nil when neither is set.
func loadClusterKey(path string) ([]byte, error) {
	text := os.Getenv("WAYMARK_CLUSTER_KEY")
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: cannot read --cluster-key-file: %w", ErrBadConfig, err)
		}
		text = string(b)
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, nil
	}
	key, err := base64.StdEncoding.DecodeString(text)
	if err != nil || len(key) != ClusterKeySize {
		return nil, fmt.Errorf("%w: the cluster key must be %d bytes of base64 (make one with `waymark keygen`)", ErrBadConfig, ClusterKeySize)
	}
	return key, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
