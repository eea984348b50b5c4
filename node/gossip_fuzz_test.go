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
// it must never panic, and it may only ever replace a day's salt by one
// made earlier (ties: a lower value).
func FuzzMergeRemoteState(f *testing.F) {
	now := time.Now()
	day := now.UnixMilli() / 86_400_000
	v1 := binary.BigEndian.AppendUint64(nil, uint64(day))
	v1 = append(v1, make([]byte, 16)...)
	f.Add(v1)
	v2 := binary.BigEndian.AppendUint64([]byte{saltStateVersion}, uint64(day))
	v2 = binary.BigEndian.AppendUint64(v2, uint64(now.Add(-time.Hour).UnixMilli()))
	v2 = append(v2, make([]byte, 16)...)
	f.Add(v2)
	f.Add([]byte{})
	f.Add([]byte{saltStateVersion})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, buf []byte) {
		salts := ingest.NewLocalSalts(time.Now)
		salts.Salt(now)
		before := today(salts, day)
		g := &Gossip{cfg: GossipConfig{Salts: salts}, known: map[string]Member{}, leaving: map[string]bool{}}
		g.MergeRemoteState(buf, false)
		after := today(salts, day)
		if after != before && (after.Created > before.Created ||
			(after.Created == before.Created && string(after.Salt[:]) > string(before.Salt[:]))) {
			t.Fatalf("merge replaced today's salt %+v by %+v, made later", before, after)
		}
	})
}

func today(s *ingest.LocalSalts, day int64) ingest.DaySalt {
	for _, ds := range s.Known() {
		if ds.Day == day {
			return ds
		}
	}
	return ingest.DaySalt{}
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
