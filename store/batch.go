package store

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Batch is one atomic group of writes: the FSM applies a whole Raft batch
// through one Batch and records the applied index in it, so the database
// never holds half a batch and never forgets which entries it holds.
// Reads through the Batch see its own earlier writes.
type Batch struct {
	b       *pebble.Batch
	durable bool         // a link's status changed: Commit syncs
	hook    func() error // Options.BeforeCommit

	st            *Store
	blockChanges  []BlockChange // reach the blocklist snapshot at Commit
	domainChanged bool          // a custom domain changed: rebuild the approved set at Commit
	whCache       *webhookBatch // webhooks read by this batch's link events (webhook.go)
}

// NewBatch starts an atomic group of writes.
func (s *Store) NewBatch() *Batch {
	return &Batch{b: s.db.NewIndexedBatch(), hook: s.beforeCommit, st: s}
}

// Close releases the batch without committing it (safe after Commit).
func (b *Batch) Close() error { return b.b.Close() }

// set writes one key into the batch; a failure is the storage's.
func (b *Batch) set(k, v []byte) error {
	if err := b.b.Set(k, v, nil); err != nil {
		return storageErr(err)
	}
	return nil
}

// Commit writes the batch and the new applied index atomically. Most
// commits are not synced: the Raft log is the durable record, and Flush
// before each snapshot makes the snapshot's index durable here. A batch
// that changed a link's status (a takedown, a block, a restore to active)
// is synced: an edge that loses power and restarts cut off from the
// leader would otherwise serve a taken-down link again from its older
// Pebble state until raft replays the log.
func (b *Batch) Commit(applied uint64) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], applied)
	if err := b.set(keyApplied, v[:]); err != nil {
		return fmt.Errorf("cannot record applied index: %w", err)
	}
	if b.hook != nil {
		if err := b.hook(); err != nil {
			return fmt.Errorf("cannot commit batch: %w", storageErr(err))
		}
	}
	opts := pebble.NoSync
	if b.durable {
		opts = pebble.Sync
	}
	if err := b.b.Commit(opts); err != nil {
		return fmt.Errorf("cannot commit batch: %w", storageErr(err))
	}
	if len(b.blockChanges) > 0 {
		b.st.applyBlockChanges(b.blockChanges)
		b.blockChanges = nil
	}
	if b.domainChanged {
		b.domainChanged = false
		if err := b.st.loadDomains(); err != nil {
			return fmt.Errorf("cannot reload custom domains after commit: %w", err)
		}
	}
	return nil
}

// Durable reports whether Commit will sync this batch.
func (b *Batch) Durable() bool { return b.durable }

// AppliedIndex returns the applied index as of the batch's view.
func (b *Batch) AppliedIndex() (uint64, error) { return appliedIndex(b.b) }

// Link reads a link as of the batch.
func (b *Batch) Link(code string, l *Link) (bool, error) {
	found, err := get(b.b, linkKey(nil, []byte(code)), func(v []byte) error { return DecodeLink(v, l) })
	if err != nil {
		return false, fmt.Errorf("cannot read link %q: %w", code, err)
	}
	return found, nil
}

// CreateLink stores a new link. It fails with ErrCodeTaken if the code was
// ever used, so codes are never reused.
func (b *Batch) CreateLink(l *Link) error {
	var old Link
	taken, err := b.Link(l.Code, &old)
	if err != nil {
		return err
	}
	if taken {
		return ErrCodeTaken
	}
	if err := checkLink(l); err != nil {
		return fmt.Errorf("cannot create link %q: %w", l.Code, err)
	}
	if err := checkOwnerID(l.Owner); err != nil {
		return fmt.Errorf("cannot create link %q: %w", l.Code, err)
	}
	if err := b.checkLinkDomain(l); err != nil {
		return fmt.Errorf("cannot create link %q: %w", l.Code, err)
	}
	if err := b.set(ownerIndexKey(l.Owner, l.Index, l.Code), nil); err != nil {
		return fmt.Errorf("cannot index link %q: %w", l.Code, err)
	}
	if err := b.putTagIndex(l.Owner, l.Code, l.Index, SplitTags(l.Tags), true); err != nil {
		return err
	}
	if err := b.PutLink(l); err != nil {
		return err
	}
	if err := b.queueLinkEvent(nil, l); err != nil {
		return err
	}
	h := createHistory(l)
	return b.AddHistory(&h)
}

// PutLink overwrites a link record.
func (b *Batch) PutLink(l *Link) error {
	if err := checkLink(l); err != nil {
		return fmt.Errorf("cannot write link %q: %w", l.Code, err)
	}
	if err := b.set(linkKey(nil, []byte(l.Code)), AppendLink(nil, l)); err != nil {
		return fmt.Errorf("cannot write link %q: %w", l.Code, err)
	}
	return nil
}

// PutOwner stores an owner and the hash of its API key.
func (b *Batch) PutOwner(o *Owner, h KeyHash) error {
	if err := b.set(ownerKey(o.ID), AppendOwner(nil, o)); err != nil {
		return fmt.Errorf("cannot write owner %q: %w", o.ID, err)
	}
	if err := b.set(keyHashKey(h), []byte(o.ID)); err != nil {
		return fmt.Errorf("cannot write API key of owner %q: %w", o.ID, err)
	}
	return nil
}

// PutSite stores a site and its domain index. A domain registers once.
func (b *Batch) PutSite(s *Site) error {
	if _, taken, err := b.SiteIDByDomain(s.Domain); err != nil || taken {
		if err == nil {
			err = ErrDomainTaken
		}
		return fmt.Errorf("cannot register site %q: %w", s.Domain, err)
	}
	if err := b.set(siteKey(s.ID), AppendSite(nil, s)); err != nil {
		return fmt.Errorf("cannot write site %q: %w", s.ID, err)
	}
	if err := b.set(siteDomainKey(s.Domain), []byte(s.ID)); err != nil {
		return fmt.Errorf("cannot index site %q: %w", s.ID, err)
	}
	return nil
}

// SiteIDByDomain returns the id of the site registered for domain.
func (b *Batch) SiteIDByDomain(domain string) (string, bool, error) {
	var id string
	found, err := get(b.b, siteDomainKey(domain), func(v []byte) error { id = string(v); return nil })
	return id, found, err
}

// SetSecret fixes the cluster permutation key. The first value wins; later
// calls are no-ops so a repeated bootstrap cannot change existing codes.
func (b *Batch) SetSecret(key []byte) error {
	found, err := get(b.b, keySecret, func([]byte) error { return nil })
	if err != nil || found {
		return err
	}
	if err := b.set(keySecret, key); err != nil {
		return fmt.Errorf("cannot write cluster secret: %w", err)
	}
	return nil
}

// AllocBlock claims region if it has no slot yet, then hands out its next
// size IDs. It is what version 1 of the log's alloc command did, so old
// entries replay the same; new entries use AllocRegionBlock, which never
// claims a slot.
func (b *Batch) AllocBlock(region string, size uint64) (Block, int, error) {
	if _, _, err := b.ClaimRegion(region); err != nil {
		return Block{}, 0, err
	}
	return b.AllocRegionBlock(region, size)
}

// ClaimRegion assigns region the lowest free slot, or reports the slot it
// has; claimed says whether this call assigned it. Deterministic given the
// same prior state, as an FSM step must be.
func (b *Batch) ClaimRegion(region string) (slot int, claimed bool, err error) {
	if slot, found, err := b.regionSlotOf(region); err != nil || found {
		return slot, false, err
	}
	slot, err = b.assignRegion(region)
	return slot, err == nil, err
}

// AllocRegionBlock hands out the next size IDs of a claimed region's
// range; a region without a slot fails with ErrRegionUnclaimed.
// Deterministic given the same prior state, as an FSM step must be.
func (b *Batch) AllocRegionBlock(region string, size uint64) (Block, int, error) {
	slot, found, err := b.regionSlotOf(region)
	if err != nil {
		return Block{}, 0, err
	}
	if !found {
		return Block{}, 0, fmt.Errorf("cannot allocate in region %q: %w", region, ErrRegionUnclaimed)
	}
	ck := counterKey(slot)
	var next uint64
	if _, err := get(b.b, ck, func(v []byte) error {
		if len(v) != 8 {
			return ErrCorrupt
		}
		next = binary.BigEndian.Uint64(v)
		return nil
	}); err != nil {
		return Block{}, 0, fmt.Errorf("cannot read counter of region %q: %w", region, err)
	}
	if next >= RegionSpan {
		return Block{}, slot, fmt.Errorf("cannot allocate in region %q: %w", region, ErrRangeExhausted)
	}
	// Compare against what is left rather than computing next+size, which
	// wraps for a huge size and would move the counter backwards.
	end := RegionSpan
	if size < RegionSpan-next {
		end = next + size
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], end)
	if err := b.set(ck, v[:]); err != nil {
		return Block{}, 0, fmt.Errorf("cannot write counter of region %q: %w", region, err)
	}
	lo, _ := RegionRange(slot)
	return Block{Start: lo + next, End: lo + end}, slot, nil
}

func (b *Batch) regionSlotOf(region string) (int, bool, error) {
	slot := -1
	if _, err := get(b.b, regionKey(region), func(v []byte) error {
		if len(v) != 1 || int(v[0]) >= MaxRegions {
			return ErrCorrupt
		}
		slot = int(v[0])
		return nil
	}); err != nil {
		return 0, false, fmt.Errorf("cannot read region %q: %w", region, err)
	}
	return slot, slot >= 0, nil
}

// assignRegion gives a region without a slot the lowest free one.
func (b *Batch) assignRegion(region string) (int, error) {
	rk := regionKey(region)
	// New region: take the lowest free slot.
	var used [MaxRegions]bool
	it, err := b.b.NewIter(&pebble.IterOptions{LowerBound: []byte{tabRegion}, UpperBound: []byte{tabRegion + 1}})
	if err != nil {
		return 0, fmt.Errorf("cannot list regions: %w", storageErr(err))
	}
	for valid := it.First(); valid; valid = it.Next() {
		if v := it.Value(); len(v) == 1 && int(v[0]) < MaxRegions {
			used[v[0]] = true
		}
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("cannot list regions: %w", storageErr(err))
	}
	for i, u := range used {
		if !u {
			if err := b.set(rk, []byte{byte(i)}); err != nil {
				return 0, fmt.Errorf("cannot assign region %q: %w", region, err)
			}
			return i, nil
		}
	}
	return 0, fmt.Errorf("cannot assign region %q: %w", region, ErrRegionSpaceFull)
}
