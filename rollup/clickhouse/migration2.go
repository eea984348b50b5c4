package clickhouse

import "strings"

// migration2 puts the part into a stored segment's identity. A node that
// ships to several aggregators splits each sealed segment into one
// sub-segment per partition (ingest/split.go), identified by (node, inc,
// seq, part), part 0 being a whole segment; every existing row is a
// whole segment and reads part 0. The part ends the sorting key, so the
// identities of two parts of one segment never collapse into one row.
//
// The events table needs no change: the parts of one segment hold
// disjoint sets of (site, code) pairs (the partition is a function of
// them), and (site, code) starts its sorting key, so two parts' records
// with the same number never share a key.
//
// 18.16 has no ADD COLUMN IF NOT EXISTS, and a new sorting-key column
// may have no default (code 36 otherwise); a second run of the
// statement answers code 44, "column with this name already exists",
// which alreadyApplied takes as done.
var migration2 = migration{2, "segment part in the identity", []string{
	`ALTER TABLE segments ADD COLUMN part UInt16, MODIFY ORDER BY (node, inc, seq, part)`,
}}

// alreadyApplied reports whether err, from a statement of migration
// version, means the statement had been applied before (a migration cut
// short after it, or run by two aggregators at once).
func alreadyApplied(version uint32, err error) bool {
	return (version == 2 || version == 7 || version == 10) && ErrorCode(err) == 44 && strings.Contains(err.Error(), "already exists")
}
