package raft

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/waymark/waymark/store"
)

// blockPool hands out IDs from counter blocks that the log allocated to
// this node's region. The FSM decides every block, so a retried allocation
// can waste a block but never hand one out twice. A background refill
// starts when the current block is 75% spent, so creates rarely wait for a
// raft round trip.
type blockPool struct {
	ctx   context.Context // the node's lifetime; refills stop with it
	size  uint64
	alloc func(context.Context) (store.Block, error)
	spawn func(func()) bool
	log   *slog.Logger

	mu      sync.Mutex
	cur     store.Block // IDs left to hand out
	curLen  uint64      // cur's length when it was taken, for the 75% mark
	next    store.Block // refilled block waiting for cur to run out
	pending *refill     // the one allocation in flight, if any
	gen     uint64      // bumped by drop; a refill started before is discarded
}

// refill is one allocation in flight; done closes when err is set.
type refill struct {
	done chan struct{}
	err  error
}

func newBlockPool(ctx context.Context, size uint64, alloc func(context.Context) (store.Block, error), spawn func(func()) bool, log *slog.Logger) *blockPool {
	return &blockPool{ctx: ctx, size: size, alloc: alloc, spawn: spawn, log: log}
}

// nextID returns an ID no other caller in the cluster ever gets.
func (p *blockPool) nextID(ctx context.Context) (uint64, error) {
	for {
		p.mu.Lock()
		if p.cur.Len() == 0 && p.next.Len() > 0 {
			p.cur, p.curLen, p.next = p.next, p.next.Len(), store.Block{}
		}
		if p.cur.Len() > 0 {
			id := p.cur.Start
			p.cur.Start++
			if p.cur.Len() <= p.curLen/4 && p.next.Len() == 0 && p.pending == nil {
				p.startRefillLocked()
			}
			p.mu.Unlock()
			return id, nil
		}
		r := p.pending
		if r == nil {
			r = p.startRefillLocked()
		}
		p.mu.Unlock()
		select {
		case <-r.done:
			if r.err != nil {
				return 0, r.err
			}
		case <-ctx.Done():
			return 0, fmt.Errorf("cannot allocate ID: %w", ctx.Err())
		}
	}
}

// startRefillLocked allocates the next block in the background. The
// allocation does not use any caller's context: a caller giving up must not
// waste the block everyone else is waiting for.
func (p *blockPool) startRefillLocked() *refill {
	r := &refill{done: make(chan struct{})}
	p.pending = r
	gen := p.gen
	ok := p.spawn(func() {
		blk, err := p.alloc(p.ctx)
		p.mu.Lock()
		if err == nil && gen == p.gen {
			p.next = blk
		} else {
			p.log.Warn("cannot allocate counter block", "err", err)
		}
		r.err = err
		p.pending = nil
		p.mu.Unlock()
		close(r.done)
	})
	if !ok {
		r.err = fmt.Errorf("cannot allocate counter block: raft node is closed: %w", store.ErrNoLeader)
		p.pending = nil
		close(r.done)
	}
	return r
}

// drop forgets every block held in memory: after a snapshot restore the
// store's counters are the snapshot's, and IDs taken from the old ones may
// belong to links the snapshot holds.
func (p *blockPool) drop() {
	p.mu.Lock()
	p.cur, p.curLen, p.next = store.Block{}, 0, store.Block{}
	p.gen++
	p.mu.Unlock()
}

// allocBlock asks the log for the next block of this node's region.
func (n *Node) allocBlock(ctx context.Context) (store.Block, error) {
	// Refuse here, not through the log, when this replica has no slot for
	// the region: a misconfigured node must not append a refused entry
	// per create. (A claim this replica has not applied yet only delays.)
	if found, err := n.RegionClaimed(); err == nil && !found {
		return store.Block{}, fmt.Errorf("cannot generate codes in region %q: %w; an operator claims it with `waymark regions add %s`", n.cfg.Region, store.ErrRegionUnclaimed, n.cfg.Region)
	}
	res, err := n.apply(ctx, appendAllocBlock(nil, n.cfg.Region, n.cfg.BlockSize))
	if err != nil {
		return store.Block{}, fmt.Errorf("cannot allocate counter block for region %q: %w", n.cfg.Region, err)
	}
	n.m.blocksAllocated.Inc()
	return res.Block, nil
}

// NewCode returns a fresh generated code: the next ID of this node's
// block, permuted with the cluster key, as 7 base62 characters.
func (n *Node) NewCode(ctx context.Context) (string, error) {
	perm, err := n.Permuter()
	if err != nil {
		return "", err
	}
	id, err := n.blocks.nextID(ctx)
	if err != nil {
		return "", err
	}
	var buf [store.CodeLen]byte
	return string(perm.AppendCodeFor(buf[:0], id)), nil
}

// Permuter returns the cluster's code permutation once SetSecret has been
// applied to this node's store.
func (n *Node) Permuter() (*store.Permuter, error) {
	if p := n.perm.Load(); p != nil {
		return p, nil
	}
	key, found, err := n.st.Secret()
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("cannot build code permutation: cluster secret not applied yet: %w", store.ErrNoLeader)
	}
	p, err := store.NewPermuter(key)
	if err != nil {
		return nil, err
	}
	n.perm.Store(p)
	return p, nil
}
