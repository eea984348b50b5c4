package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Idempotency records expire through the log: the leader picks a cutoff
// (its clock minus IdempotencyTTL) and every replica deletes the same
// records in the same entry. The Q table orders the records by creation
// time, so expiry reads only what it deletes:
//
//	Q createdAt(be64) owner 0x00 key -> empty

func idempotencyByTimeKey(createdAt int64, owner, key string) []byte {
	k := make([]byte, 0, 1+8+len(owner)+1+len(key))
	k = append(k, tabIdempotencyByTime)
	k = binary.BigEndian.AppendUint64(k, uint64(max(createdAt, 0)))
	k = append(k, owner...)
	k = append(k, 0)
	return append(k, key...)
}

// idempotencyTimeBound is the first Q key past every record created at or
// before cutoff.
func idempotencyTimeBound(cutoff int64) []byte {
	k := []byte{tabIdempotencyByTime}
	if cutoff < 0 {
		return k
	}
	return binary.BigEndian.AppendUint64(k, uint64(cutoff)+1)
}

// PutIdempotency stores the answer to an idempotent create, indexed by
// its creation time for expiry.
func (b *Batch) PutIdempotency(owner, key string, rec *Idempotency) error {
	if err := checkOwnerID(owner); err != nil {
		return fmt.Errorf("cannot write idempotency record: %w", err)
	}
	if err := b.set(idempotencyKey(owner, key), AppendIdempotency(nil, rec)); err != nil {
		return fmt.Errorf("cannot write idempotency record: %w", err)
	}
	if err := b.set(idempotencyByTimeKey(rec.CreatedAt, owner, key), nil); err != nil {
		return fmt.Errorf("cannot index idempotency record: %w", err)
	}
	return nil
}

// ExpireIdempotency deletes up to limit idempotency records created at or
// before cutoff (ms since the epoch), oldest first, and returns how many
// index entries it removed. A record that was replaced by a newer one
// under the same key keeps the newer one. Deterministic given the same
// prior state, as an FSM step must be.
func (b *Batch) ExpireIdempotency(cutoff int64, limit int) (int, error) {
	it, err := b.b.NewIter(&pebble.IterOptions{LowerBound: []byte{tabIdempotencyByTime}, UpperBound: idempotencyTimeBound(cutoff)})
	if err != nil {
		return 0, fmt.Errorf("cannot list idempotency records: %w", storageErr(err))
	}
	// Collect first: the batch is not written while its iterator is open.
	var keys [][]byte
	for valid := it.First(); valid && len(keys) < limit; valid = it.Next() {
		keys = append(keys, bytes.Clone(it.Key()))
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("cannot list idempotency records: %w", storageErr(err))
	}
	for _, k := range keys {
		if err := b.expireOne(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

func (b *Batch) expireOne(indexKey []byte) error {
	if err := b.b.Delete(indexKey, nil); err != nil {
		return fmt.Errorf("cannot delete idempotency index entry: %w", storageErr(err))
	}
	if len(indexKey) < 1+8 {
		return nil // not ours to interpret; dropped from the index
	}
	createdAt := int64(binary.BigEndian.Uint64(indexKey[1:9]))
	owner, key, ok := bytes.Cut(indexKey[9:], []byte{0}) // owner ids hold no NUL
	if !ok {
		return nil
	}
	pk := idempotencyKey(string(owner), string(key))
	var rec Idempotency
	found, err := get(b.b, pk, func(v []byte) error { return DecodeIdempotency(v, &rec) })
	if err != nil {
		return fmt.Errorf("cannot read idempotency record: %w", err)
	}
	if !found || max(rec.CreatedAt, 0) != createdAt {
		return nil // gone, or replaced by a newer record with its own index entry
	}
	if err := b.b.Delete(pk, nil); err != nil {
		return fmt.Errorf("cannot delete idempotency record: %w", storageErr(err))
	}
	return nil
}

// IdempotencyExpiring reports whether any idempotency record was created
// at or before cutoff, as far as this replica has applied.
func (s *Store) IdempotencyExpiring(cutoff int64) (bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tabIdempotencyByTime}, UpperBound: idempotencyTimeBound(cutoff)})
	if err != nil {
		return false, fmt.Errorf("cannot list idempotency records: %w", err)
	}
	any := it.First()
	if err := it.Close(); err != nil {
		return false, fmt.Errorf("cannot list idempotency records: %w", err)
	}
	return any, nil
}
