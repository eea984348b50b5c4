// Package store owns Waymark's replicated state as it sits in one node's
// Pebble database: links, owners and API-key hashes, the owner index,
// idempotency records, sites, region counter ranges and the Raft applied
// index. It also owns the short-code scheme: base62 text, the region-ranged
// ID space and the keyed permutation that makes generated codes
// unguessable.
//
// Only the Raft FSM writes through a Batch; everything else reads. The
// package imports no other Waymark package. See DESIGN.md for why the keys
// and records look the way they do.
package store
