// Package ingest owns Waymark's event path at the edge: the event model and
// its binary codec, click capture from the redirect path, the Plausible-
// compatible POST /api/event endpoint and the /s.js tracker, visitor hashing
// with a daily salt (kept for today and yesterday only), enrichment
// (country, region, city, browser and OS with versions, device, bot flag),
// the append-only segment files every event lands in, and the shipper that
// moves sealed segments to the aggregator exactly once; with several
// aggregators it cuts each sealed segment by partition (site or link) and
// ships each part to the partition's owner (split.go, shipsplit.go).
//
// The flow is
//
//	redirect  -> CaptureClick -> bounded queue -> writer (enrich, hash, encode) -> <seq>.open
//	/api/event -> EventHandler -^                                   seal -> <seq>.seg -> shipper -> aggregator
//
// Nothing on the capture side blocks: a full queue or a full disk budget
// drops the event and counts it. From the segment file onwards events are
// exactly-once (see DESIGN.md). The aggregator reads what this package
// writes through ReadSegment and ReadBatch; those are the whole reading API.
//
// # Privacy
//
// An Event holds no IP address, cookie, full URL, full referrer or query
// string other than the five UTM parameters, nor the client's clock or
// exact screen width (only the width's device class). The client IP lives only in
// memory, between the request and the writer goroutine, where it is hashed
// with the daily salt and looked up for a country, region and city, then
// cleared.
//
// # Libraries
//
// User agents are parsed with github.com/medama-io/go-useragent: a trie
// built from an embedded list, about a microsecond per lookup with no
// regular expressions, maintained, and it reports browser, OS and device
// class in one pass. Bots are detected with the patterns of
// github.com/x-way/crawlerdetect, the Go port of the widely maintained
// Crawler-Detect list, matched with literal prefilters that give the
// library's exact answer about 35 times faster (crawler.go), plus checks
// the list cannot do: an empty user agent and headless browsers. What a
// user agent tells is cached (uacache.go: 131,072 entries, LRU per set).
// Countries come from a trusted proxy header (for example CF-IPCountry)
// or, if configured, a MaxMind-format database read with
// github.com/oschwald/maxminddb-golang, the reference Go reader that also
// opens the freely licensed ip-location-db files; a city database in
// MaxMind's layout also gives region and city (geoip.go). Batches are compressed
// with zstd from github.com/klauspost/compress, already a dependency.
package ingest
