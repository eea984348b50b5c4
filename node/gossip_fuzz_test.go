package node

import (
	"encoding/binary"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/waymark/waymark/ingest"
)

// FuzzMergeRemoteState feeds arbitrary push/pull state to the salt merge:
// it must never panic, and it may only ever lower a day's salt.
func FuzzMergeRemoteState(f *testing.F) {
	now := time.Now()
	day := now.UnixMilli() / 86_400_000
	good := binary.BigEndian.AppendUint64(nil, uint64(day))
	good = append(good, make([]byte, 16)...)
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, buf []byte) {
		salts := ingest.NewLocalSalts(time.Now)
		before := salts.Salt(now)
		g := &Gossip{cfg: GossipConfig{Salts: salts}, known: map[string]Member{}, leaving: map[string]bool{}}
		g.MergeRemoteState(buf, false)
		after := salts.Salt(now)
		if string(after[:]) > string(before[:]) {
			t.Fatalf("merge raised today's salt")
		}
	})
}

// FuzzMemberMeta records a member whose gossiped metadata is arbitrary
// bytes: bad metadata is ignored, never a panic.
func FuzzMemberMeta(f *testing.F) {
	f.Add([]byte(`{"n":"a","r":"us","o":["voter"],"ra":"127.0.0.1:1","h":"127.0.0.1:2"}`))
	f.Add([]byte(`{"n":1}`))
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, meta []byte) {
		g := &Gossip{cfg: GossipConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, known: map[string]Member{}, leaving: map[string]bool{}}
		g.NotifyJoin(&memberlist.Node{Name: "x", Meta: meta})
		g.NotifyLeave(&memberlist.Node{Name: "x", Meta: meta})
		g.NotifyMsg(meta)
	})
}
