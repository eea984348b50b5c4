// Package raft owns Waymark's consensus layer: the hashicorp/raft wiring
// (TCP transport, raft-boltdb log and stable store, file snapshots), the
// command log format, the FSM that applies commands to the store package's
// Pebble replica, snapshots and restore, forwarding of writes from
// followers to the leader, membership operations (non-voters, promotion,
// removal, leadership transfer, bootstrap), and the allocation of counter
// blocks that generated codes are drawn from.
//
// Every replicated write goes through one path: Node.apply encodes a
// command, hands it to raft (or, on a follower, to the leader through
// Config.Forward and ApplyForwarded) and maps the outcome to store's
// sentinel errors (ErrNoLeader before the entry is in the log,
// ErrUnknownOutcome once it may be). The FSM applies a whole raft batch through one
// store.Batch and records the applied index in it, so a restart never
// applies an entry twice. See DESIGN.md for why.
package raft
