package store

import "fmt"

// MaxClusterIDLen bounds a cluster id.
const MaxClusterIDLen = 64

// ClusterID returns the id of the cluster whose log this store follows,
// once the first leader has set it.
func (s *Store) ClusterID() (string, bool, error) {
	var id string
	found, err := get(s.db, keyCluster, func(v []byte) error { id = string(v); return nil })
	if err != nil {
		return "", false, fmt.Errorf("cannot read cluster id: %w", err)
	}
	return id, found, nil
}

// SetClusterID records the cluster id. The first id stays: the same id
// again is a no-op. A different one means this store belongs to another
// cluster, and it fails with ErrOtherCluster wrapped as a storage failure,
// so the FSM halts rather than apply a log that is not the store's.
func (b *Batch) SetClusterID(id string) error {
	var old string
	found, err := get(b.b, keyCluster, func(v []byte) error { old = string(v); return nil })
	if err != nil {
		return fmt.Errorf("cannot read cluster id: %w", err)
	}
	switch {
	case found && old == id:
		return nil
	case found:
		return fmt.Errorf("store holds cluster %q, the raft log is cluster %q: %w", old, id, storageErr(ErrOtherCluster))
	}
	if err := b.set(keyCluster, []byte(id)); err != nil {
		return fmt.Errorf("cannot write cluster id: %w", err)
	}
	return nil
}
