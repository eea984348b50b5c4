// Package harness holds the pieces every Waymark benchmark shares: a
// log-linear latency histogram, a starter for child processes that always
// cleans up its process group, a parser that finds a bound address in a
// child's slog output, a bare fasthttp baseline server, a closed-loop HTTP
// load generator, a bulk link loader for the public API, and the plumbing
// the commands share: flag parsing, signal handling and exit codes, the
// alternating rounds and their medians, report figures, and test helpers.
//
// Benchmarks compare Waymark against a baseline measured in the same run on
// the same machine, so every figure a command reports is a ratio; absolute
// numbers from a shared two-core box mean little on their own.
package harness
