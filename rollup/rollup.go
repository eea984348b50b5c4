package rollup

// Rollup kinds: the first byte of an entity names whose numbers these are.
const (
	kindLink = 'l' // entity is a link code
	kindSite = 's' // entity is a site id
)

// Rollup granularities (tiers). An event moves its hour; each batch adds
// its hours up into their UTC days and months before writing, so one event
// costs one in-memory add per row, not three. A query reads whole UTC
// months from month rows, whole UTC days from day rows and the ragged ends
// from hour rows. The period after the granularity byte is an hour number,
// a day number or a month number (months since January 1970).
const (
	granHour  = 'h'
	granDay   = 'd'
	granMonth = 'm'
	// granAll is one all-time row (period 0) of a link's totals: what the
	// click limit is checked against, independent of every retention.
	granAll = 'a'
	// granCross rows hold, at hour boundary h, the visits that started
	// before h and had their last event at or after it (see folder.change).
	granCross = 'x'
)

// crossingBit marks a delta cell's hour as a crossing row's boundary.
const crossingBit = 1 << 31

// Dimensions. dimTotal (value "") holds the entity's totals; the others
// hold one value each. Link rows use the first block, site rows all.
const (
	dimTotal       = 0
	dimCountry     = 'c'
	dimDevice      = 'd'
	dimBrowser     = 'b'
	dimOS          = 'o'
	dimReferrer    = 'r'
	dimUTMSource   = 'u'
	dimUTMMedium   = 'm'
	dimUTMCampaign = 'a'
	// dimRule: the redirect rule a click followed ("0" the link's URL,
	// "1".."20" the rules in order); only clicks on links with rules.
	dimRule = 'w'
	// site only
	dimUTMTerm    = 'T'
	dimUTMContent = 'C'
	dimSource     = 's'
	dimChannel    = 'h'
	// visitor detail: Plausible's visit:region (ISO 3166-2, "US-CA"),
	// visit:city (GeoNames id), visit:browser_version, visit:os_version
	dimRegion         = 'g'
	dimCity           = 'y'
	dimBrowserVersion = 'B'
	dimOSVersion      = 'O'
	// dimVisitorType is "new" or "returning": whether the visit is the
	// visitor's first of its daily hash.
	dimVisitorType = 'v'
	dimPage        = 'p'
	dimEntryPage   = 'n'
	dimExitPage    = 'x'
	dimEventName   = 'e'
	// dimProp is followed in the key by the length-prefixed property name.
	dimProp = 'P'
)

// Counter fields. One row value holds all of them; what each means is in
// the package doc. Averages are divided at read time.
const (
	fCount       = iota // clicks (links) or pageviews (sites, event rows)
	fBots               // bot-flagged events, total rows only
	fVisits             // visits with an event in the bucket's time (events-table visits)
	fBounces            // bounced sessions (of fSessions)
	fVisitPV            // pageviews of those visits
	fDurationMS         // summed visit durations of those visits
	fEvents             // custom events
	fEngagedMS          // summed engaged time of engagement events
	fEngVisits          // visits with an engagement event on the value (page)
	fScrollSum          // summed deepest scroll of those visits on the value
	fVisitEvents        // pageviews and custom events of the visits
	fEventVisits        // visits with an event of the value (page, event name, property)
	fSessions           // sessions whose last event is in the bucket (sessions-table visits)
	nFields
)

// mix64 is the SplitMix64 finaliser. Visitor hashes are SipHash output
// already, but HyperLogLog needs uniform bits, and a bijective mix costs
// nothing and keeps a poorly spread hash (a test's, an old record's) from
// collapsing the estimate.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
