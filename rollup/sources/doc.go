// Package sources names where a visit came from, the way Plausible does:
// the source (visit:source), the acquisition channel (visit:channel) and
// the labels "Direct / None" and "(not set)" that stand for empty values
// in breakdowns and filters.
//
// It owns the referrer database that Waymark embeds (data/referers.txt,
// generated from the Snowplow referer-parser database, plus
// data/overrides.txt, written here) and the rules that read it. It imports
// nothing from the rest of Waymark: the aggregator calls it when it folds a
// visit and when it answers a query.
//
// Every function is safe for concurrent use and, on the inputs analytics
// sees (ASCII hosts and tags of ordinary length), allocates nothing: the
// lookup tables are built once, on first use, from the embedded files.
//
// README.md says where the data comes from and how to update it;
// LICENSE-DATA says under which licence.
package sources

//go:generate sh internal/gen/update.sh
