package ingest

import (
	"bytes"
	"net/netip"
	"unsafe"

	"github.com/medama-io/go-useragent"
	"github.com/medama-io/go-useragent/agents"
)

// uaInfo is what a user agent tells us. The versions are "major.minor"
// (see majorMinor); the parser reads no OS version, so osVersion is
// always "" for now.
type uaInfo struct {
	browser, browserVersion, os, osVersion, device string
	bot                                            bool
}

// enricher turns raw request inputs into event fields. It is used only by
// the writer goroutine, so its cache and scratch buffers need no lock.
type enricher struct {
	parser  *useragent.Parser
	cache   *uaCache
	crawl   crawlerScratch
	geo     *geoDB // nil without a GeoIP database
	lowerUA []byte
}

func newEnricher(geoIPPath string) (*enricher, error) {
	e := &enricher{cache: newUACache(uaCacheSets)}
	if geoIPPath != "" {
		db, err := openGeoDB(geoIPPath)
		if err != nil {
			return nil, err
		}
		e.geo = db
	}
	return e, nil
}

func (e *enricher) close() {
	if e.geo != nil {
		e.geo.close()
	}
}

// userAgent classifies a user agent, from the cache when it can.
func (e *enricher) userAgent(ua []byte) uaInfo {
	return e.userAgentHashed(ua, e.cache.hash(ua))
}

// userAgentHashed is userAgent for a ua whose cache hash h is known.
func (e *enricher) userAgentHashed(ua []byte, h uint64) uaInfo {
	if info, ok := e.cache.get(h); ok {
		return info
	}
	info := e.classify(ua)
	e.cache.put(h, info)
	return info
}

// classify parses a user agent (a miss of the cache: a few microseconds,
// most of it the exact crawler check).
func (e *enricher) classify(uaBytes []byte) uaInfo {
	if len(uaBytes) == 0 {
		return uaInfo{bot: true}
	}
	ua := unsafe.String(unsafe.SliceData(uaBytes), len(uaBytes)) // not kept
	if e.parser == nil {
		// Built on the first miss, not at start: the parser's trie is
		// about 166,000 heap objects that every garbage collection has to
		// mark, and a node that captures nothing never needs it.
		e.parser = useragent.NewParser() // shared, read-only after first use
	}
	parsed := e.parser.Parse(ua)
	info := uaInfo{
		browser: string(parsed.Browser()),
		os:      string(parsed.OS()),
		device:  deviceClass(parsed.Device()),
	}
	if info.browser != "" {
		// Plausible: no version for an unknown browser.
		info.browserVersion = majorMinor(parsed.BrowserVersion())
	}
	e.lowerUA = appendLowerASCII(e.lowerUA[:0], ua)
	info.bot = parsed.IsBot() || parsed.Device() == agents.DeviceBot ||
		bytes.Contains(e.lowerUA, []byte("headless")) ||
		defaultCrawlers.isCrawler(ua, &e.crawl) // crawlerdetect's answer, faster
	return info
}

// majorMinor keeps a version's first two dot-separated parts, as
// Plausible's put_user_agent does (split on ".", take 2, join):
// "120.0.6099.109" is "120.0", "17" stays "17".
func majorMinor(v string) string {
	dots := 0
	for i := 0; i < len(v); i++ {
		if v[i] == '.' {
			if dots++; dots == 2 {
				return v[:i]
			}
		}
	}
	return v
}

func deviceClass(d agents.Device) string {
	switch d {
	case agents.DeviceDesktop:
		return DeviceDesktop
	case agents.DeviceMobile:
		return DeviceMobile
	case agents.DeviceTablet:
		return DeviceTablet
	case agents.DeviceTV:
		return DeviceTV
	}
	return ""
}

// locate looks ip up in the GeoIP database, if there is one.
func (e *enricher) locate(ip netip.Addr) geoInfo {
	if e.geo == nil {
		return geoInfo{}
	}
	return e.geo.locate(ip)
}

// countryString returns a shared string for a two-letter code, so events
// do not allocate one each.
func countryString(c [2]byte) string {
	i := int(c[0]-'A')*26 + int(c[1]-'A')
	return countryStrings[i]
}

var countryStrings = func() [26 * 26]string {
	var s [26 * 26]string
	for i := range s {
		s[i] = string([]byte{byte('A' + i/26), byte('A' + i%26)})
	}
	return s
}()
