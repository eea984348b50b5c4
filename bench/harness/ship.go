package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/waymark/waymark/ingest"
)

// This file is the only place in the harness that builds segments and
// speaks the shipping protocol (ingest.BuildSegment, ingest.AppendBatch,
// ingest.SegmentRef, ingest.Splitter): when segment identity changes, it
// changes here.

// SegmentShipper posts generated events to an aggregator the way an
// edge's shipper does: sealed segments of one node, numbered from 1,
// several per batch, zstd-compressed, with the cluster's bearer token; a
// batch counts as stored only when the answer acknowledges every one of
// its segments.
type SegmentShipper struct {
	URL    string // the aggregator's base URL; ingest.ShipPath is added
	Token  string // the cluster's internal token (see DeriveInternalToken)
	NodeID string // the node the segments claim to come from
	HTTP   *http.Client

	seq      uint64
	inc      uint64 // a random incarnation, as a fresh edge data folder has
	enc      *zstd.Encoder
	splitter ingest.Splitter
}

// NewSegmentShipper uses the edge shipper's encoder settings.
func NewSegmentShipper(url, token, nodeID string) (*SegmentShipper, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("cannot make a zstd encoder: %w", err)
	}
	return &SegmentShipper{URL: url, Token: token, NodeID: nodeID, enc: enc, inc: rand.Uint64() | 1,
		HTTP: &http.Client{Timeout: 10 * time.Minute}}, nil
}

// ShipBatch is one encoded request, ready to post.
type ShipBatch struct {
	Body     []byte // zstd of the batch
	RawBytes int    // the segments' bytes before compression
	Events   int
	refs     []ingest.SegmentRef
}

// Segments is how many segments the batch holds.
func (b *ShipBatch) Segments() int { return len(b.refs) }

// Encode builds one sealed segment per element of segments (in order,
// taking the next sequence numbers) and the compressed batch of them.
// Each segment's created time is its first event's time.
func (s *SegmentShipper) Encode(segments [][]ingest.Event) *ShipBatch {
	b := &ShipBatch{}
	batch := make([]ingest.BatchSegment, 0, len(segments))
	for _, evs := range segments {
		s.seq++
		created := time.Now()
		if len(evs) > 0 {
			created = time.UnixMilli(evs[0].Time)
		}
		data := ingest.BuildSegment(ingest.SegmentRef{Node: s.NodeID, Inc: s.inc, Seq: s.seq}, created, evs)
		ref := ingest.SegmentRef{Node: s.NodeID, Inc: s.inc, Seq: s.seq}
		batch = append(batch, ingest.BatchSegment{Ref: ref, Data: data})
		b.refs = append(b.refs, ref)
		b.RawBytes += len(data)
		b.Events += len(evs)
	}
	b.Body = s.enc.EncodeAll(ingest.AppendBatch(nil, batch), nil)
	return b
}

// Post sends b and returns once the aggregator has acknowledged every
// segment in it (it answers after its synced commit). A batch that is
// acknowledged only in part is an error: nothing is retried, since a
// benchmark that needs retries measures something else.
func (s *SegmentShipper) Post(ctx context.Context, b *ShipBatch) error {
	return s.PostTo(ctx, ShipTarget{URL: s.URL, Token: s.Token, HTTP: s.HTTP}, b)
}

// ShipTarget is one aggregator a split batch goes to (EncodeSplit): its
// base URL, the cluster token it takes and the client that reaches it.
type ShipTarget struct {
	Name  string // its name in the partition rule (ingest.PartitionOwners)
	URL   string
	Token string
	HTTP  *http.Client
}

// PostTo is Post to another aggregator than s's own.
func (s *SegmentShipper) PostTo(ctx context.Context, t ShipTarget, b *ShipBatch) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL+ingest.ShipPath, bytes.NewReader(b.Body))
	if err != nil {
		return fmt.Errorf("cannot build ship request: %w", err)
	}
	req.Header.Set("Content-Type", ingest.ShipContentType)
	req.Header.Set("Content-Encoding", "zstd")
	req.Header.Set("Authorization", "Bearer "+t.Token)
	resp, err := t.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("cannot post segments: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("cannot read the aggregator's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cannot post segments: aggregator answered %s: %s", resp.Status, truncate(body, 300))
	}
	var ack ingest.ShipAck
	if err := json.Unmarshal(body, &ack); err != nil {
		return fmt.Errorf("cannot decode the aggregator's answer: %w", err)
	}
	acked := make(map[ingest.SegmentRef]bool, len(ack.Acked))
	for _, r := range ack.Acked {
		acked[r] = true
	}
	for _, r := range b.refs {
		if !acked[r] {
			return fmt.Errorf("aggregator acknowledged %d of %d segments; segment %d of %q missing", len(ack.Acked), len(b.refs), r.Seq, r.Node)
		}
	}
	return nil
}

// EncodeSplit builds the segments as Encode does, then cuts each into
// one part per partition (ingest.Splitter, as an edge does with more than
// one aggregator) and returns one batch per owner: batches[i] holds the
// parts whose partition owners[p] gives to i, nil when there are none.
// owners comes from ingest.PartitionOwners over the aggregators' names;
// n is how many there are. Events counts each batch's events.
func (s *SegmentShipper) EncodeSplit(segments [][]ingest.Event, owners *[ingest.Partitions]int, n int) ([]*ShipBatch, error) {
	parts := make([][]ingest.BatchSegment, n)
	out := make([]*ShipBatch, n)
	for _, evs := range segments {
		s.seq++
		created := time.Now()
		if len(evs) > 0 {
			created = time.UnixMilli(evs[0].Time)
		}
		ref := ingest.SegmentRef{Node: s.NodeID, Inc: s.inc, Seq: s.seq}
		subs, err := s.splitter.Split(ingest.BuildSegment(ref, created, evs), nil)
		if err != nil {
			return nil, fmt.Errorf("cannot split segment %d: %w", s.seq, err)
		}
		for _, sub := range subs {
			o := owners[int(sub.Ref.Part)-1]
			if o < 0 || o >= n {
				return nil, fmt.Errorf("BUG: partition %d has owner %d of %d", sub.Ref.Part-1, o, n)
			}
			if out[o] == nil {
				out[o] = &ShipBatch{}
			}
			// Split's output is valid until its next call: keep a copy.
			parts[o] = append(parts[o], ingest.BatchSegment{Ref: sub.Ref, Data: bytes.Clone(sub.Data)})
			out[o].refs = append(out[o].refs, sub.Ref)
			out[o].RawBytes += len(sub.Data)
			out[o].Events += sub.Records
		}
	}
	for o, b := range out {
		if b != nil {
			b.Body = s.enc.EncodeAll(ingest.AppendBatch(nil, parts[o]), nil)
		}
	}
	return out, nil
}

// Close releases the encoder.
func (s *SegmentShipper) Close() { s.enc.Close() }
