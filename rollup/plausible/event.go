package plausible

// Kind is an event's type.
type Kind uint8

// Event kinds. A pageview is named "pageview" and an engagement
// "engagement" whatever Event.Name says; a custom event is named Name.
const (
	Pageview Kind = iota + 1
	Custom
	Engagement
)

// ScrollDepthMissing is the ScrollDepth of an event without one.
const ScrollDepthMissing = 255

// Prop is one custom property of an event.
type Prop struct {
	Key, Value string
}

// Event is one raw non-bot site event as the store keeps it.
//
// Evaluate reads an Event only during the ScanSite callback: the source may
// reuse the struct and its Props slice. Evaluate keeps some of its strings,
// which must therefore be ordinary immutable Go strings (not views of a
// reused buffer).
type Event struct {
	Time     int64 // Unix milliseconds, server receive time
	Kind     Kind
	Name     string // custom events only
	Path     string
	Hostname string // may be empty
	// Hash is the visitor id (Plausible's user_id). A visit that crosses
	// the daily salt rotation keeps its first hash on every event.
	Hash uint64

	ReferrerHost string
	UTMSource    string
	UTMMedium    string
	UTMCampaign  string
	UTMTerm      string
	UTMContent   string

	Country string // ISO 3166-1 alpha-2, or ""
	Region  string // ISO 3166-2 subdivision such as "EE-37", or ""
	City    string // GeoNames id in decimal, or ""

	Device         string // "desktop", "mobile", "tablet" or ""
	Browser        string
	BrowserVersion string
	OS             string
	OSVersion      string

	Props []Prop

	EngagedMS   uint32 // engagement events: engaged time since the last one
	ScrollDepth uint8  // engagement events: 0-100, or ScrollDepthMissing
	// Interactive is false for a custom event sent with "i": false; such an
	// event does not cancel a bounce.
	Interactive bool
}

// EventSource delivers a site's stored non-bot events.
type EventSource interface {
	// ScanSite calls fn for every event of the site with from <= Time < to
	// (Unix ms), in any order. It stops and returns fn's first error.
	ScanSite(siteID string, from, to int64, fn func(*Event) error) error
}

// DefaultMaxEvents bounds the raw events one Evaluate may read.
const DefaultMaxEvents = 5_000_000

// Config holds what Evaluate needs beyond the query.
type Config struct {
	// MaxEvents bounds the events one query may scan (DefaultMaxEvents when
	// zero).
	MaxEvents int
	// Source names a visit's source from its first event (visit:source).
	// DefaultSource when nil.
	Source func(referrerHost, utmSource string) string
	// Channel names a visit's acquisition channel (visit:channel).
	// DefaultChannel when nil.
	Channel func(source, referrerHost, utmSource, utmMedium, utmCampaign string) string
	// LocationName gives the names behind visit:country_name ("country"),
	// visit:region_name ("region") and visit:city_name ("city") for a
	// code; nil leaves them empty, as Plausible does for unknown codes.
	LocationName func(kind, code string) string
}

func (c Config) withDefaults() Config {
	if c.MaxEvents <= 0 {
		c.MaxEvents = DefaultMaxEvents
	}
	if c.Source == nil {
		c.Source = DefaultSource
	}
	if c.Channel == nil {
		c.Channel = DefaultChannel
	}
	return c
}
