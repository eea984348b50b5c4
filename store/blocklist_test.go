package store

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// TestParseHost checks canonical forms worked out by hand: IDNA per UTS
// #46 (bücher -> xn--bcher-kva, münchen -> xn--mnchen-3ya), the WHATWG
// IPv4 parser (2130706433 = 0x7F000001 = 127.0.0.1; a last part fills the
// bytes left: 10.1 = 10.0.0.1; 0-led parts are octal: 0177 = 127, 012 =
// 10), and IPv4-mapped IPv6 (::ffff:a00:1 = ::ffff:10.0.0.1 = 10.0.0.1).
func TestParseHost(t *testing.T) {
	tests := []struct{ in, want, wantErr string }{
		{in: "Evil.Example", want: "evil.example"},
		{in: "evil.example.", want: "evil.example"},
		{in: "EVIL.example..", want: "evil.example"},
		{in: "Bücher.example", want: "xn--bcher-kva.example"},
		{in: "MÜNCHEN.de", want: "xn--mnchen-3ya.de"},
		{in: "xn--mnchen-3ya.de", want: "xn--mnchen-3ya.de"},
		{in: "exa_mple.com", want: "exa_mple.com"},
		{in: "127.0.0.1", want: "127.0.0.1"},
		{in: "2130706433", want: "127.0.0.1"},
		{in: "0x7f000001", want: "127.0.0.1"},
		{in: "0x7F.1", want: "127.0.0.1"},
		{in: "0177.0.0.1", want: "127.0.0.1"},
		{in: "127.1", want: "127.0.0.1"},
		{in: "127.0.1", want: "127.0.0.1"},
		{in: "10.1", want: "10.0.0.1"},
		{in: "0xa.0.0.1", want: "10.0.0.1"},
		{in: "012.0.0.1", want: "10.0.0.1"},
		{in: "0x.0.0.1", want: "0.0.0.1"},
		{in: "10.0.0.1.", want: "10.0.0.1"},
		{in: "4294967295", want: "255.255.255.255"},
		{in: "1.2.65535", want: "1.2.255.255"},
		{in: "[::ffff:10.0.0.1]", want: "10.0.0.1"},
		{in: "::FFFF:a00:1", want: "10.0.0.1"},
		{in: "[0:0:0:0:0:ffff:10.0.0.1]", want: "10.0.0.1"},
		{in: "[2001:DB8:0:0:0:0:0:BAD]", want: "2001:db8::bad"},
		{in: "[::1]", want: "::1"},
		{in: "[0:0::1]", want: "::1"},
		{in: "256.0.0.1", wantErr: "IPv4"},
		{in: "1.2.3.256", wantErr: "IPv4"},
		{in: "1.2.65536", wantErr: "IPv4"},
		{in: "4294967296", wantErr: "IPv4"},
		{in: "08.0.0.1", wantErr: "IPv4"},
		{in: "1.2.3.4.5", wantErr: "IPv4"},
		{in: "[fe80::1%eth0]", wantErr: "zone"},
		{in: "[1.2.3.4]", wantErr: "IPv6"},
		{in: "[::1", wantErr: "closing"},
		{in: "exa mple.com", wantErr: "cannot contain"},
		{in: "a..b", wantErr: "not a valid host"},
		{in: strings.Repeat("a", 64) + ".com", wantErr: "not a valid host"},
		{in: "", wantErr: "empty"},
	}
	for _, tt := range tests {
		h, err := ParseHost(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseHost(%q) = %q, %v; want error containing %q", tt.in, h, err, tt.wantErr)
			}
			continue
		}
		if err != nil || h.String() != tt.want {
			t.Errorf("ParseHost(%q) = %q, %v; want %q", tt.in, h, err, tt.want)
		}
	}
}

func TestParseBlockEntry(t *testing.T) {
	tests := []struct{ in, want string }{
		{"*.Evil.Example.", "evil.example"},
		{".evil.example", "evil.example"},
		{"  evil.example\t", "evil.example"},
		{"10.0.0.1/8", "10.0.0.0/8"},
		{"[::ffff:10.0.0.0]/104", "10.0.0.0/8"},
		{"::ffff:172.16.0.0/108", "172.16.0.0/12"},
		{"10.0.0.1/32", "10.0.0.1"},
		{"2001:db8::1/128", "2001:db8::1"},
		{"2001:DB8::/32", "2001:db8::/32"},
		{"0x0a.0.0.1", "10.0.0.1"},
		{"[::ffff:10.0.0.1]", "10.0.0.1"},
	}
	for _, tt := range tests {
		if got, err := ParseBlockEntry(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseBlockEntry(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "10.0.0.0/33", "10.0.0.0/x", "evil.example:80", "http://evil.example/", "fe80::1%eth0/64", "a b", "*."} {
		if got, err := ParseBlockEntry(bad); err == nil {
			t.Errorf("ParseBlockEntry(%q) = %q; want an error", bad, got)
		}
	}
}

func addBlocks(t *testing.T, s *Store, index uint64, changes ...BlockChange) {
	t.Helper()
	apply(t, s, index, func(b *Batch) error {
		_, _, err := b.UpdateBlocklist(changes)
		return err
	})
}

func block(v string) BlockChange {
	return BlockChange{Entry: BlockEntry{Value: v, Kind: BlockKindBlock, Reason: "test", AddedAt: 1}}
}

func unblock(v string) BlockChange { return BlockChange{Remove: true, Entry: BlockEntry{Value: v}} }

func mustHost(t *testing.T, s string) Host {
	t.Helper()
	h, err := ParseHost(s)
	if err != nil {
		t.Fatalf("ParseHost(%q): %v", s, err)
	}
	return h
}

// TestBlocklistMatching commits entries through a real Pebble batch and
// matches many spellings against the swapped-in snapshot.
func TestBlocklistMatching(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	addBlocks(t, s, 1, block("evil.example"), block("10.0.0.1"), block("192.168.0.0/16"),
		block("2001:db8::/32"), block("172.16.0.0/12"), block("xn--bcher-kva.example"))
	check := func(s *Store) {
		t.Helper()
		bl := s.Blocklist()
		tests := []struct {
			host string
			want bool
		}{
			{"evil.example", true},
			{"EVIL.example.", true},
			{"www.evil.example", true},
			{"a.b.evil.example", true},
			{"notevil.example", false},
			{"evil.example.com", false},
			{"example", false},
			{"10.0.0.1", true},
			{"[::ffff:10.0.0.1]", true}, // the bypass of issue 11
			{"[::ffff:a00:1]", true},
			{"167772161", true}, // 10*2^24 + 1
			{"0xa.0.0.1", true},
			{"012.0.0.1", true},
			{"10.1", true},
			{"10.0.0.2", false},
			{"110.0.0.1", false},
			{"192.168.255.1", true},
			{"[::ffff:192.168.1.1]", true},
			{"192.169.0.1", false},
			{"172.16.0.0", true},
			{"172.31.255.255", true},
			{"172.32.0.0", false},
			{"[2001:db8:ffff::1]", true},
			{"[2001:DB8::BAD]", true},
			{"[2001:db9::1]", false},
			{"bücher.example", true},
			{"www.BÜCHER.example", true},
			{"buecher.example", false},
			{"bit.ly", false}, // a shortener, not a block
		}
		for _, tt := range tests {
			if got := bl.Blocks(mustHost(t, tt.host)); got != tt.want {
				t.Errorf("Blocks(%q) = %v; want %v", tt.host, got, tt.want)
			}
		}
		if bl.Len() != 6 {
			t.Errorf("Len = %d; want 6", bl.Len())
		}
	}
	check(s)
	// The snapshot is rebuilt from the table at open.
	closeStore(t, s)
	s = openStore(t, dir)
	check(s)

	gen := s.Blocklist().Gen()
	addBlocks(t, s, 2, unblock("evil.example"), unblock("absent.example"))
	bl := s.Blocklist()
	if bl.Gen() == gen {
		t.Error("generation did not change on update")
	}
	if bl.Blocks(mustHost(t, "www.evil.example")) || bl.Len() != 5 {
		t.Errorf("after remove: blocks %v, len %d; want false, 5", bl.Blocks(mustHost(t, "www.evil.example")), bl.Len())
	}
	entries, err := s.BlockEntries("", 0)
	if err != nil || len(entries) != 5 {
		t.Fatalf("BlockEntries: %d, %v; want 5", len(entries), err)
	}
	page, err := s.BlockEntries(entries[1].Value, 2)
	if err != nil || len(page) != 2 || page[0].Value != entries[2].Value {
		t.Fatalf("BlockEntries after %q: %v, %v; want entries 2 and 3", entries[1].Value, page, err)
	}
}

func TestBlocklistShorteners(t *testing.T) {
	s := openStore(t, t.TempDir())
	bl := s.Blocklist()
	for _, h := range []string{"bit.ly", "BIT.LY.", "www.bit.ly", "t.co", "tinyurl.com", "goo.gl", "ow.ly", "is.gd", "buff.ly", "rebrand.ly", "cutt.ly", "shorturl.at"} {
		e, ok := bl.Match(mustHost(t, h))
		if !ok || e.Kind != BlockKindShortener || !e.Builtin {
			t.Errorf("Match(%q) = %+v, %v; want a built-in shortener", h, e, ok)
		}
	}
	if _, ok := bl.Match(mustHost(t, "example.com")); ok {
		t.Error("example.com matched")
	}
	addBlocks(t, s, 1, BlockChange{Entry: BlockEntry{Value: "sho.rt", Kind: BlockKindShortener, AddedAt: 1}}, block("t.co"))
	bl = s.Blocklist()
	if e, ok := bl.Match(mustHost(t, "x.sho.rt")); !ok || e.Kind != BlockKindShortener || e.Builtin {
		t.Errorf("Match(x.sho.rt) = %+v, %v; want the added shortener", e, ok)
	}
	if !bl.Blocks(mustHost(t, "t.co")) || bl.Blocks(mustHost(t, "sho.rt")) {
		t.Error("t.co as a block entry must block redirects; sho.rt as a shortener must not")
	}
	addBlocks(t, s, 2, unblock("t.co"))
	bl = s.Blocklist()
	if e, ok := bl.Match(mustHost(t, "t.co")); !ok || !e.Builtin || bl.Blocks(mustHost(t, "t.co")) {
		t.Errorf("after removing the t.co block entry: %+v, %v; want the built-in shortener back", e, ok)
	}
	if bl.Len() != 1 {
		t.Errorf("Len = %d; want 1", bl.Len())
	}
}

func TestUpdateBlocklistRefusesNonCanonical(t *testing.T) {
	s := openStore(t, t.TempDir())
	b := s.NewBatch()
	defer b.Close()
	for _, e := range []BlockEntry{
		{Value: "Evil.Example", Kind: BlockKindBlock},
		{Value: "10.0.0.1/8", Kind: BlockKindBlock},
		{Value: "evil.example", Kind: 9},
		{Value: "evil.example", Kind: BlockKindBlock, Reason: "a\nb"},
		{Value: "evil.example", Kind: BlockKindBlock, Reason: strings.Repeat("x", MaxBlockReasonLen+1)},
	} {
		if _, _, err := b.UpdateBlocklist([]BlockChange{block("ok.example"), {Entry: e}}); err == nil {
			t.Errorf("UpdateBlocklist(%+v): no error", e)
		}
	}
	if len(b.blockChanges) != 0 {
		t.Errorf("a refused update left %d changes in the batch", len(b.blockChanges))
	}
}

func TestBlocklistMatchAllocatesNothing(t *testing.T) {
	s := openStore(t, t.TempDir())
	addBlocks(t, s, 1, block("evil.example"), block("10.0.0.0/8"), block("2001:db8::/32"))
	bl := s.Blocklist()
	a := netip.MustParseAddr("::ffff:10.1.2.3")
	allocs := testing.AllocsPerRun(100, func() {
		if !bl.BlocksName("a.b.evil.example") || bl.BlocksName("good.example") || !bl.BlocksAddr(a) {
			t.Fatal("wrong verdict")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocs per match; want 0", allocs)
	}
}

func TestBlockRecordRoundTrip(t *testing.T) {
	e := BlockEntry{Value: "10.0.0.0/8", Kind: BlockKindShortener, Reason: "feed: x", AddedAt: 1764590000000}
	b := AppendBlockRecord(nil, &e)
	var got BlockEntry
	if err := DecodeBlockRecord(e.Value, b, &got); err != nil || got != e {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, e)
	}
	for i := range b {
		if err := DecodeBlockRecord(e.Value, b[:i], &got); err == nil {
			t.Errorf("truncated at %d: decoded", i)
		}
	}
}

// FuzzParseBlockEntry: never panics; an accepted entry is canonical (it
// parses to itself) and passes the store's own check.
func FuzzParseBlockEntry(f *testing.F) {
	for _, s := range []string{"evil.example", "*.Evil.Example.", "10.0.0.1/8", "[::ffff:10.0.0.0]/104", "2130706433",
		"0x7f.1", "[::ffff:127.0.0.1]", "Bücher.example", "2001:db8::/32", "1.2.3.4.5", "a..b", "", "/", "[]/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseBlockEntry(s)
		if err != nil {
			return
		}
		again, err := ParseBlockEntry(v)
		if err != nil || again != v {
			t.Fatalf("ParseBlockEntry(%q) = %q, which parses to %q, %v", s, v, again, err)
		}
		if err := CheckBlockEntry(&BlockEntry{Value: v, Kind: BlockKindBlock}); err != nil {
			t.Fatalf("ParseBlockEntry(%q) = %q, refused by CheckBlockEntry: %v", s, v, err)
		}
	})
}

// FuzzDecodeBlockRecord: never panics; what decodes re-encodes to the input.
func FuzzDecodeBlockRecord(f *testing.F) {
	f.Add("evil.example", AppendBlockRecord(nil, &BlockEntry{Value: "evil.example", Kind: BlockKindBlock, Reason: "r", AddedAt: 5}))
	f.Add("10.0.0.0/8", []byte{1, 2, 0, 0})
	f.Fuzz(func(t *testing.T, value string, b []byte) {
		var e BlockEntry
		if DecodeBlockRecord(value, b, &e) != nil {
			return
		}
		if got := AppendBlockRecord(nil, &e); string(got) != string(b) {
			t.Fatalf("decoded %+v re-encodes to %x; input %x", e, got, b)
		}
	})
}

// BenchmarkBlocklistRebuild is the commit-time cost of one import batch
// of 1000 entries on a snapshot that holds n.
func BenchmarkBlocklistRebuild(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var entries []BlockEntry
			for i := range n {
				entries = append(entries, BlockEntry{Value: "feed-" + strconv.Itoa(i) + ".example", Kind: BlockKindBlock, AddedAt: 1})
			}
			bl := NewBlocklist(entries, 1)
			changes := make([]BlockChange, 1000)
			for i := range changes {
				changes[i] = BlockChange{Entry: BlockEntry{Value: "new-" + strconv.Itoa(i) + ".example", Kind: BlockKindBlock, AddedAt: 1}}
			}
			b.ReportAllocs()
			for b.Loop() {
				bl.with(changes, 2)
			}
		})
	}
}
