// Package plausible is the reference implementation of Plausible's Stats
// API v2 (POST /api/v2/query) over raw events: it parses and validates a
// query exactly as Plausible does (Parse), and answers it exactly from the
// stored events (Evaluate), rebuilding visits the way Plausible's session
// cache does. The aggregator's fast path reads the same parsed Query.
//
// It imports nothing else from this module.
package plausible
