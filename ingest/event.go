package ingest

// Kind says which family and type an Event belongs to.
type Kind uint8

// Event kinds. Clicks come from redirects; the others from /api/event.
const (
	KindClick      Kind = 1
	KindPageview   Kind = 2
	KindEngagement Kind = 3
	KindCustom     Kind = 4
)

func (k Kind) String() string {
	switch k {
	case KindClick:
		return "click"
	case KindPageview:
		return "pageview"
	case KindEngagement:
		return "engagement"
	case KindCustom:
		return "custom"
	}
	return "unknown"
}

func (k Kind) valid() bool { return k >= KindClick && k <= KindCustom }

// Event flags.
const (
	// FlagBot marks an event from a crawler, a headless browser or a client
	// without a user agent. Bots are stored and counted apart, never dropped.
	FlagBot uint8 = 1 << 0
	// FlagNonInteractive marks an event sent with "i": false; it does not
	// affect bounce rate.
	FlagNonInteractive uint8 = 1 << 1
	// FlagRules marks a click on a link with redirect rules; Rule says
	// which of them it followed. Clicks on other links have neither.
	FlagRules  uint8 = 1 << 2
	flagsKnown       = FlagBot | FlagNonInteractive | FlagRules
)

// Limits on event fields: one set of rules for the edge and the
// aggregator. The endpoint rejects (400) anything longer, the writer drops
// (and counts, reason "invalid") an event that breaks one rather than
// write it, and the decoder treats one broken as corruption, so an event
// the edge writes always decodes (see CheckEvent).
const (
	MaxNameLen     = 120  // event name, as Plausible
	MaxPathLen     = 2000 // path, as Plausible's pathname limit
	MaxHostLen     = 253  // referrer host
	MaxUTMLen      = 300  // each UTM value
	MaxCodeLen     = 255  // link identifier: a code, or "domain/code" on a custom domain (store.MaxDomainLen)
	MaxSiteIDLen   = 64   // site id
	MaxShortLen    = 64   // node, region, country, subdivision, city, device, browser, OS and versions
	MaxProps       = 30   // custom properties per event, as Plausible
	MaxPropKeyLen  = 300  // as Plausible
	MaxPropValLen  = 2000 // as Plausible
	maxEngagedMS   = 30 * 24 * 60 * 60 * 1000
	maxScrollDepth = 100
)

// Prop is one custom property of a site event.
type Prop struct {
	Key, Value string
}

// Device classes, from the user agent's device type, as Plausible derives
// them since 2023 (its `put_user_agent`; the tracker's screen width "w" is
// read by neither, and never stored).
const (
	DeviceMobile  = "mobile"
	DeviceTablet  = "tablet"
	DeviceDesktop = "desktop"
	DeviceTV      = "tv"
)

// Event is one click, pageview, engagement or custom event. Clicks use
// Code; site events use SiteID, Name, Path, EngagedMS, ScrollDepth and
// Props. There is deliberately no field for an IP address, a cookie, a
// full URL or a full referrer, nor for what would fingerprint a visitor
// across days: the client's clock and its exact screen width are read at
// the edge and never stored (only the width's device class is).
type Event struct {
	Kind  Kind
	Flags uint8
	// ID is minted by the edge's writer: 8 bytes of a sequence that grows
	// in the order events reach the writer, then 8 random bytes. Events of
	// one visitor in the same millisecond are ordered by it, as they
	// arrived (Plausible's sessions follow arrival order).
	ID          [16]byte
	Time        int64  // server receive time, Unix milliseconds
	VisitorHash uint64 // keyed hash of (daily salt, site or code, IP, UA)
	// PrevVisitorHash is the same hash under the previous UTC day's salt,
	// set only on site events in the first 30 minutes of a UTC day (0
	// otherwise), so the aggregator can continue a visit across midnight.
	PrevVisitorHash uint64

	Code   string // short-link code (clicks)
	SiteID string // site id (site events)
	Name   string // "pageview", "engagement" or a custom name (site events)
	Node   string // node that captured the event
	Region string // region of that node

	Path         string // page path without query string (site events)
	ReferrerHost string // host of the referrer, nothing more

	UTMSource, UTMMedium, UTMCampaign, UTMTerm, UTMContent string

	Country string // ISO 3166-1 alpha-2, or empty
	// Subdivision is the ISO 3166-2 code of the visitor's first-level
	// subdivision, country prefix included ("US-CA", "EE-37"), and City
	// the GeoNames id of the city in decimal ("5391959"), both from the
	// GeoIP database when it has them (Plausible's visit:region and
	// visit:city), or empty. Coarse places, looked up before the IP is
	// forgotten; the IP itself is never stored.
	Subdivision string
	City        string
	Device      string // one of the Device classes, or empty
	Browser     string
	// BrowserVersion and OSVersion are "major.minor" ("120.0"), or empty
	// when unknown, as Plausible keeps them.
	BrowserVersion string
	OS             string
	OSVersion      string

	// Rule is the redirect rule a click followed (with FlagRules): the
	// rule's index + 1, or 0 for the link's own URL (the fallback). At
	// most store.MaxRules.
	Rule uint8

	EngagedMS   uint64 // visible time on page (engagement events)
	ScrollDepth uint8  // 0-100 percent (engagement events)

	Props []Prop // at most MaxProps (site events)
}

// Bot reports whether the event carries the bot flag.
func (ev *Event) Bot() bool { return ev.Flags&FlagBot != 0 }

// Reset clears ev for reuse, keeping the Props capacity.
func (ev *Event) Reset() {
	props := ev.Props[:0]
	*ev = Event{Props: props}
}
