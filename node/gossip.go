package node

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/waymark/waymark/ingest"
)

// Meta is what every node advertises through gossip. Gossip is a hint for
// routing and health; Raft decides membership.
type Meta struct {
	Name      string `json:"n"`
	Region    string `json:"r"`
	Roles     []Role `json:"o"`
	RaftAddr  string `json:"ra"`
	HTTPAddr  string `json:"h"`
	AdminAddr string `json:"a"`
	Version   string `json:"v"`
	// Leaving is set just before a graceful leave, so every member can tell
	// a departure from a crash.
	Leaving bool `json:"l,omitempty"`
	// Boot names this process: a new one at every start, so the leader
	// can tell a member an operator removed from the same member restarted.
	Boot string `json:"b,omitempty"`
}

// Member is one gossip member as `waymark members` shows it.
type Member struct {
	Name      string `json:"name"`
	Region    string `json:"region"`
	Roles     []Role `json:"roles"`
	RaftAddr  string `json:"raft_addr"`
	HTTPAddr  string `json:"http_addr"`
	AdminAddr string `json:"admin_addr"`
	Version   string `json:"version"`
	Addr      string `json:"gossip_addr"`
	Status    string `json:"status"` // alive, dead, left (memberlist does not expose suspicion)
	Boot      string `json:"-"`
}

// MemberEvent reports a change in gossip membership to the reconciler.
type MemberEvent struct {
	Member Member
	At     time.Time
}

// GossipConfig configures the memberlist layer.
type GossipConfig struct {
	BindAddr  string // host:port, port 0 picks one
	SecretKey []byte // 16, 24 or 32 bytes; nil disables encryption (dev only)
	Meta      Meta
	Logger    *slog.Logger
	Events    chan<- MemberEvent // non-blocking sends; the periodic reconcile catches drops
	// Salts is the daily visitor-hash salt store. Gossip's push/pull state
	// carries it, so every node hashes a visitor the same way and the salt
	// never touches the Raft log.
	Salts SaltShare
}

// SaltShare is what gossip needs of the salt store (ingest.LocalSalts).
type SaltShare interface {
	Ensure(now time.Time) // make today's salt unless waiting for the cluster's; never blocks
	Known() []ingest.DaySalt
	Merge(ingest.DaySalt) bool // the vote: the salt made first wins
}

// Gossip wraps memberlist and remembers every member it has heard of,
// including dead and left ones, so operators can see them.
type Gossip struct {
	ml    *memberlist.Memberlist
	cfg   GossipConfig
	meta  []byte
	mu    sync.Mutex
	known map[string]Member
	// leaving holds members that announced a graceful leave; memberlist's
	// leave notification does not say whether a node left or died.
	leaving map[string]bool
	events  chan<- MemberEvent
	// stopOnce makes Leave and Shutdown safe to call in any order.
	stopOnce sync.Once
}

// Shutdown stops gossiping without announcing a departure (a restart, not a
// leave: the leader keeps the node in Raft through DeadGrace).
func (g *Gossip) Shutdown() error {
	var err error
	g.stopOnce.Do(func() { err = g.ml.Shutdown() })
	return err
}

// StartGossip binds the gossip ports and starts memberlist.
func StartGossip(cfg GossipConfig) (*Gossip, error) {
	host, portStr, err := net.SplitHostPort(cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("cannot parse --gossip-addr %q: %w", cfg.BindAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("cannot parse --gossip-addr port %q: %w", portStr, err)
	}
	meta, err := json.Marshal(cfg.Meta)
	if err != nil {
		return nil, fmt.Errorf("cannot encode gossip metadata: %w", err)
	}
	if len(meta) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("cannot gossip: metadata is %d bytes; memberlist allows %d", len(meta), memberlist.MetaMaxSize)
	}
	g := &Gossip{cfg: cfg, meta: meta, known: map[string]Member{}, leaving: map[string]bool{}, events: cfg.Events}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Meta.Name
	mc.BindAddr = host
	mc.BindPort = port
	mc.AdvertisePort = 0
	mc.SecretKey = cfg.SecretKey
	// A node restarted on a new address may take its name back once the
	// old incarnation has been dead this long.
	mc.DeadNodeReclaimTime = 30 * time.Second
	// Salts converge through push/pull; a new day's salt settles within
	// one interval.
	mc.PushPullInterval = 15 * time.Second
	mc.Delegate = g
	mc.Events = g
	mc.LogOutput = slogWriter{cfg.Logger}
	if g.ml, err = memberlist.Create(mc); err != nil {
		return nil, fmt.Errorf("cannot start gossip on %q: %w", cfg.BindAddr, err)
	}
	return g, nil
}

// Addr is the bound gossip address.
func (g *Gossip) Addr() string {
	n := g.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Join contacts existing members; it succeeds if any one answers.
func (g *Gossip) Join(addrs []string) (int, error) {
	n, err := g.ml.Join(addrs)
	if err != nil && n == 0 {
		return 0, fmt.Errorf("cannot join %v: %w", addrs, err)
	}
	return n, nil
}

// leaveIntent is the one user message gossip carries: "I am leaving".
const leaveIntent = "leave:"

// Leave announces departure and stops gossiping.
func (g *Gossip) Leave(timeout time.Duration) error {
	// Two independent signals that this is a departure, not a crash: the
	// metadata flag (gossiped; UpdateNode waits for it to spread) and a
	// direct message to every member.
	meta := g.cfg.Meta
	meta.Leaving = true
	if b, err := json.Marshal(meta); err == nil {
		g.mu.Lock()
		g.meta = b
		g.mu.Unlock()
		g.ml.UpdateNode(timeout)
	}
	msg := []byte(leaveIntent + g.cfg.Meta.Name)
	for _, n := range g.ml.Members() {
		if n.Name != g.cfg.Meta.Name {
			g.ml.SendReliable(n, msg)
		}
	}
	if err := g.ml.Leave(timeout); err != nil {
		return fmt.Errorf("cannot leave gossip: %w", err)
	}
	return g.Shutdown()
}

// Members lists every member ever seen, by name.
func (g *Gossip) Members() []Member {
	live := g.ml.Members()
	g.mu.Lock()
	out := make([]Member, 0, len(g.known))
	for _, m := range g.known {
		out = append(out, m)
	}
	// memberlist's public view lists the members it does not hold dead or
	// left; it does not tell suspect from alive (its Node.State is never
	// kept up to date, as of v0.6.0), so a listed member counts as alive.
	for _, n := range live {
		for i := range out {
			if out[i].Name == n.Name {
				out[i].Status = "alive"
			}
		}
	}
	g.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (g *Gossip) record(n *memberlist.Node, status string) {
	var meta Meta
	if err := json.Unmarshal(n.Meta, &meta); err != nil {
		g.cfg.Logger.Warn("ignoring gossip member with bad metadata", "member", n.Name, "err", err)
		return
	}
	m := Member{
		Name: meta.Name, Region: meta.Region, Roles: meta.Roles, RaftAddr: meta.RaftAddr,
		HTTPAddr: meta.HTTPAddr, AdminAddr: meta.AdminAddr, Version: meta.Version, Boot: meta.Boot,
		Addr: net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port))), Status: status,
	}
	g.mu.Lock()
	if meta.Leaving {
		g.leaving[n.Name] = true
	}
	if g.leaving[n.Name] && status == "dead" {
		m.Status = "left"
	}
	g.known[n.Name] = m
	g.mu.Unlock()
	if g.events != nil {
		select {
		case g.events <- MemberEvent{Member: m, At: time.Now()}:
		default: // the periodic full reconcile picks it up
		}
	}
}

// memberlist.EventDelegate
func (g *Gossip) NotifyJoin(n *memberlist.Node) {
	g.mu.Lock()
	delete(g.leaving, n.Name)
	g.mu.Unlock()
	g.record(n, "alive")
}
func (g *Gossip) NotifyUpdate(n *memberlist.Node) { g.record(n, "alive") }
func (g *Gossip) NotifyLeave(n *memberlist.Node) {
	g.mu.Lock()
	left := g.leaving[n.Name]
	g.mu.Unlock()
	// memberlist does not say whether the member sent its own dead
	// message (left) or was found dead: the departure is known from its
	// Leaving metadata or its direct message, whichever arrived (NotifyMsg
	// corrects a "dead" the direct message overtakes).
	status := "dead"
	if left {
		status = "left"
	}
	g.record(n, status)
}

// memberlist.Delegate
func (g *Gossip) NodeMeta(limit int) []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.meta
}
func (g *Gossip) NotifyMsg(b []byte) {
	if name, ok := strings.CutPrefix(string(b), leaveIntent); ok {
		g.mu.Lock()
		g.leaving[name] = true
		// The member's dead message can overtake this one (it travels by
		// gossip, this by TCP): a member already recorded dead has left.
		if m, ok := g.known[name]; ok && m.Status == "dead" {
			m.Status = "left"
			g.known[name] = m
		}
		g.mu.Unlock()
	}
}
func (g *Gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// Push/pull state: the salts this node keeps.
//
//	version 2: 0x02 | repeated day int64 | created Unix ms int64 | salt (16 bytes)
//	version 1: repeated day int64 | salt (16 bytes)      (nodes before salt files)
//
// A version 2 state is 1+32n bytes, odd, so never a multiple of 24: each
// version tells itself apart. Version 1 nodes ignore version 2 states.
const (
	saltStateVersion = 2
	saltEntryV2      = 8 + 8 + 16
	saltEntryV1      = 8 + 16
)

// LocalState shares this node's salts.
func (g *Gossip) LocalState(join bool) []byte {
	if g.cfg.Salts == nil {
		return nil
	}
	g.cfg.Salts.Ensure(time.Now()) // today's exists before sharing, unless still waiting for the cluster's
	out := []byte{saltStateVersion}
	for _, ds := range g.cfg.Salts.Known() {
		out = binary.BigEndian.AppendUint64(out, uint64(ds.Day))
		out = binary.BigEndian.AppendUint64(out, uint64(ds.Created))
		out = append(out, ds.Salt[:]...)
	}
	return out
}

// MergeRemoteState offers each of a peer's salts to the store's vote: the
// salt made first wins (ties by value), so every node converges on one
// salt per day whatever the order of exchanges, and a salt a node made
// after a restart never replaces the one the cluster has been using.
func (g *Gossip) MergeRemoteState(buf []byte, join bool) {
	if g.cfg.Salts == nil {
		return
	}
	switch {
	case len(buf)%saltEntryV2 == 1 && buf[0] == saltStateVersion:
		for buf = buf[1:]; len(buf) >= saltEntryV2; buf = buf[saltEntryV2:] {
			ds := ingest.DaySalt{Day: int64(binary.BigEndian.Uint64(buf)), Created: int64(binary.BigEndian.Uint64(buf[8:]))}
			copy(ds.Salt[:], buf[16:saltEntryV2])
			g.cfg.Salts.Merge(ds)
		}
	case len(buf)%saltEntryV1 == 0:
		// An older node does not say when its salt was made: take it only
		// for a day this node has no salt for.
		for ; len(buf) >= saltEntryV1; buf = buf[saltEntryV1:] {
			ds := ingest.DaySalt{Day: int64(binary.BigEndian.Uint64(buf)), Created: math.MaxInt64}
			copy(ds.Salt[:], buf[8:saltEntryV1])
			g.cfg.Salts.Merge(ds)
		}
	}
}

// slogWriter forwards memberlist's log lines to slog at debug level.
type slogWriter struct{ l *slog.Logger }

var _ io.Writer = slogWriter{}

func (w slogWriter) Write(p []byte) (int, error) {
	if w.l != nil {
		w.l.Debug(string(trimNewline(p)), "component", "gossip")
	}
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return p
}
