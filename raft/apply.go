package raft

import (
	"errors"
	"fmt"

	"github.com/waymark/waymark/store"
)

// applier carries one batch's state through the commands that apply to it.
// Every apply method checks before it writes (as store's Batch methods do),
// so a refused command leaves nothing behind in the batch.
type applier struct {
	st        *store.Store
	b         *store.Batch
	changed   []string                     // link codes to evict from caches
	sites     []store.Site                 // sites created or edited, to announce
	idem      map[string]store.Idempotency // idempotency records written earlier in this batch
	failed    error                        // the store itself failed; the batch must not commit
	clusterID string                       // a SetClusterID applied in this batch
	// suspensions are the owner suspension changes, in log order, and
	// purged counts the destinations purged (abusecmd.go).
	suspensions []ownerSuspension
	purged      int
	// revokedKeys are the API keys a batch revoked (keyscmd.go).
	revokedKeys []store.KeyHash
}

func newApplier(st *store.Store, b *store.Batch) *applier {
	return &applier{st: st, b: b}
}

// isStorageError reports whether err is the store failing (store.ErrStorage:
// a Pebble read, write or commit error, a stored record that does not
// decode, a store of another cluster) rather than the command being
// refused. The split is by origin, not by a list of refusals: the store
// marks every error that comes from Pebble, so any other error, including
// one a future check adds, is a refusal that every replica reaches alike
// and that must never halt them.
func isStorageError(err error) bool { return errors.Is(err, store.ErrStorage) }

// reject records err as the command's answer; a store failure also stops
// the batch.
func (a *applier) reject(res *applyResult, err error) {
	res.Err = err
	if isStorageError(err) {
		a.failed = err
	}
}

// idempotency looks up a record as of this batch: the store has no batch
// read for idempotency records, so records written earlier in the batch
// are tracked here.
func (a *applier) idempotency(owner, key string) (store.Idempotency, bool, error) {
	if rec, ok := a.idem[owner+"\x00"+key]; ok {
		return rec, true, nil
	}
	return a.st.Idempotency(owner, key)
}

// idempotencyExpired reports whether rec is past its TTL at now (the new
// request's time, carried in the command so every node agrees).
func idempotencyExpired(rec *store.Idempotency, now int64) bool {
	return now != 0 && rec.CreatedAt+store.IdempotencyTTL <= now
}

func (c *createLinkCmd) apply(a *applier, index uint64, res *applyResult) {
	if c.Idem != nil {
		rec, found, err := a.idempotency(c.Idem.Owner, c.Idem.Key)
		if err != nil {
			a.reject(res, err)
			return
		}
		if found && !idempotencyExpired(&rec, c.Idem.Record.CreatedAt) {
			res.Existing = &rec
			return
		}
	}
	l := c.Link
	l.Index = index
	if err := a.b.CreateLink(&l); err != nil {
		a.reject(res, fmt.Errorf("cannot create link %q: %w", l.Code, err))
		return
	}
	if c.Idem != nil {
		if err := a.b.PutIdempotency(c.Idem.Owner, c.Idem.Key, &c.Idem.Record); err != nil {
			a.reject(res, err)
			return
		}
		if a.idem == nil {
			a.idem = make(map[string]store.Idempotency)
		}
		a.idem[c.Idem.Owner+"\x00"+c.Idem.Key] = c.Idem.Record
	}
	res.Link = l
	a.changed = append(a.changed, l.Code)
}

func (c *updateLinkCmd) apply(a *applier, index uint64, res *applyResult) {
	l, err := a.b.UpdateLink(&c.Patch, index)
	if err != nil {
		a.reject(res, err)
		return
	}
	res.Link = l
	a.changed = append(a.changed, l.Code)
}

func (c *createOwnerCmd) apply(a *applier, _ uint64, res *applyResult) {
	if err := a.b.PutOwner(&c.Owner, c.Key); err != nil {
		a.reject(res, err)
	}
}

func (c *createSiteCmd) apply(a *applier, _ uint64, res *applyResult) {
	if err := a.b.PutSite(&c.Site); err != nil {
		a.reject(res, err)
		return
	}
	a.sites = append(a.sites, c.Site)
}

func (c *allocBlockCmd) apply(a *applier, _ uint64, res *applyResult) {
	alloc := a.b.AllocRegionBlock
	if c.version == 1 {
		alloc = a.b.AllocBlock // claimed the region on first use
	}
	blk, _, err := alloc(c.Region, c.Size)
	if err != nil {
		a.reject(res, err)
		return
	}
	res.Block = blk
}

func (c *setSecretCmd) apply(a *applier, _ uint64, res *applyResult) {
	if err := a.b.SetSecret(c.Key); err != nil {
		a.reject(res, err)
	}
}

func (c *setClusterIDCmd) apply(a *applier, _ uint64, res *applyResult) {
	if err := a.b.SetClusterID(c.ID); err != nil {
		a.reject(res, err)
		return
	}
	a.clusterID = c.ID
}

func (c *claimRegionCmd) apply(a *applier, _ uint64, res *applyResult) {
	if _, _, err := a.b.ClaimRegion(c.Region); err != nil {
		a.reject(res, err)
	}
}

func (c *expireIdempotencyCmd) apply(a *applier, _ uint64, res *applyResult) {
	if _, err := a.b.ExpireIdempotency(c.Cutoff, int(c.Limit)); err != nil {
		a.reject(res, err)
		return
	}
	// Records this batch wrote are read from a.idem, not the store: drop
	// the ones the entry just expired.
	for k, rec := range a.idem {
		if rec.CreatedAt <= c.Cutoff {
			delete(a.idem, k)
		}
	}
}
