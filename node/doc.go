// Package node is Waymark's composition root. It owns the node
// configuration (flags, WAYMARK_* environment, validation into one runtime
// Config), the start-up and shutdown order, role wiring, the operator admin
// API and the operator CLI that talks to it.
//
// Start-up opens, in order: store (Pebble) -> ingest pipeline (segments)
// -> raft (log, FSM) -> edge (public fasthttp) -> admin API; shutdown runs
// the same list backwards, so nothing acknowledged is lost: the public port
// stops taking requests first, the event queue drains into a synced
// segment, Raft stops, and Pebble closes last.
package node
