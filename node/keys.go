package node

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/edge/problem"
	"github.com/waymark/waymark/store"
)

// API keys on a node (issue 12). Three things live here:
//
//   - Last-used times: the edge notes each key's newest use in memory at
//     minute resolution; every KeyUseFlush this node writes the keys that
//     changed through the log in one touch_keys entry (or a few, past
//     raft.MaxTouchesPerEntry keys). Each node flushes its own uses, so no
//     node collects from the others, and a busy cluster costs one entry
//     per node per minute, however many requests it serves.
//   - Revocation: the FSM reports every revoked key (OnKeyRevoked), and
//     the edge drops it from its authentication cache before and after
//     the revoke commits, so a node stops accepting the key as soon as it
//     has applied the entry, not when a cache entry expires.
//   - /internal/v1/key: the leader's answer for a key a follower has not
//     applied yet, with its scopes.

// DefaultKeyUseFlush is how often a node writes the last-used times of
// the keys it saw: last_used_at is shown at minute resolution anyway.
const DefaultKeyUseFlush = time.Minute

const internalKey = "/internal/v1/key"

// startKeyUseFlush writes the collected key uses every interval until ctx
// ends. A flush that fails (no leader, a full disk) puts the uses back for
// the next one; uses not flushed when the node stops are lost, which only
// makes a last-used time up to one interval older.
func (n *Node) startKeyUseFlush(ctx context.Context) {
	every := n.cfg.KeyUseFlush
	if every <= 0 {
		every = DefaultKeyUseFlush
	}
	flushed := n.metrics.GetOrCreateCounter("waymark_api_key_uses_flushed_total")
	failed := n.metrics.GetOrCreateCounter("waymark_api_key_use_flush_failures_total")
	n.metrics.GetOrCreateGauge("waymark_api_key_uses_pending", func() float64 {
		if srv := n.edge.Load(); srv != nil {
			return float64(srv.PendingKeyUses())
		}
		return 0
	})
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			srv := n.edge.Load()
			if srv == nil {
				continue
			}
			uses := srv.TakeKeyUses()
			if len(uses) == 0 {
				continue
			}
			if err := n.disk.writable(); err != nil {
				srv.ReturnKeyUses(uses)
				failed.Inc()
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
			err := n.raft.TouchKeys(wctx, uses)
			cancel()
			if err != nil {
				srv.ReturnKeyUses(uses)
				failed.Inc()
				n.log.Warn("cannot record API key use; retrying at the next flush", "keys", len(uses), "err", err)
				continue
			}
			flushed.Add(len(uses))
		}
	}()
}

// onKeyRevoked drops a revoked key from the edge's cache (raft's
// OnKeyRevoked, on the FSM goroutine).
func (n *Node) onKeyRevoked(h store.KeyHash) {
	if srv := n.edge.Load(); srv != nil {
		srv.ForgetKey(h)
	}
}

// remoteKey asks the leader for an API key this node has not applied yet.
// A leader without /internal/v1/key (an older version) answers 404: the
// key reads as unknown until this node applies it, never as every scope.
func (n *Node) remoteKey(ctx context.Context, h store.KeyHash) (store.Owner, store.APIKey, bool, error) {
	b, found, err := n.askLeader(ctx, internalKey+"?hash="+hex.EncodeToString(h[:]))
	if err != nil || !found {
		return store.Owner{}, store.APIKey{}, false, err
	}
	o, k, err := decodeKeyAnswer(b, h)
	if err != nil {
		return store.Owner{}, store.APIKey{}, false, err
	}
	return o, k, true, nil
}

// appendKeyAnswer is /internal/v1/key's body: the owner record and the
// key record, each length-prefixed.
func appendKeyAnswer(dst []byte, o *store.Owner, k *store.APIKey) []byte {
	dst = store.AppendBytes(dst, store.AppendOwner(nil, o))
	return store.AppendBytes(dst, store.AppendAPIKey(nil, k))
}

// decodeKeyAnswer reads appendKeyAnswer's bytes for the key hash h: both
// records must decode, the key must be h's and the owner's.
func decodeKeyAnswer(b []byte, h store.KeyHash) (store.Owner, store.APIKey, error) {
	r := store.NewFieldReader(b)
	ob, kb := r.Bytes(), r.Bytes()
	if !r.Done() {
		return store.Owner{}, store.APIKey{}, fmt.Errorf("cannot decode key answer: %w", store.ErrCorrupt)
	}
	var o store.Owner
	var k store.APIKey
	if err := store.DecodeOwner(ob, &o); err != nil {
		return store.Owner{}, store.APIKey{}, err
	}
	if err := store.DecodeAPIKey(kb, &k); err != nil {
		return store.Owner{}, store.APIKey{}, err
	}
	if k.Hash != h || k.Owner != o.ID {
		return store.Owner{}, store.APIKey{}, fmt.Errorf("cannot decode key answer: %w: another key's or owner's", store.ErrCorrupt)
	}
	return o, k, nil
}

// handleInternalKey resolves an API-key hash (hex) to its owner and key
// record, length-prefixed one after the other.
func (n *Node) handleInternalKey(ctx *fasthttp.RequestCtx) {
	h, ok := queryKeyHash(ctx)
	if !ok {
		return
	}
	n.metrics.GetOrCreateCounter(`waymark_internal_lookups_total{kind="key"}`).Inc()
	o, k, found, err := n.store.APIKeyByHash(h)
	if err != nil {
		problem.Write(ctx, problem.Internal, err.Error())
		return
	}
	if !found {
		problem.Write(ctx, problem.NotFound, "no such key")
		return
	}
	ctx.SetContentType("application/octet-stream")
	ctx.SetBody(appendKeyAnswer(nil, &o, &k))
}
