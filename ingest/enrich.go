package ingest

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"github.com/medama-io/go-useragent"
	"github.com/medama-io/go-useragent/agents"
	"github.com/oschwald/maxminddb-golang"
)

// uaInfo is what a user agent tells us.
type uaInfo struct {
	browser, os, device string
	bot                 bool
}

// enricher turns raw request inputs into event fields. It is used only by
// the writer goroutine, so its cache and scratch buffers need no lock.
type enricher struct {
	parser  *useragent.Parser
	cache   *uaCache
	crawl   crawlerScratch
	geo     *maxminddb.Reader
	ip16    [16]byte
	lowerUA []byte
}

func newEnricher(geoIPPath string) (*enricher, error) {
	e := &enricher{cache: newUACache(uaCacheSets)}
	if geoIPPath != "" {
		db, err := maxminddb.Open(geoIPPath)
		if err != nil {
			return nil, fmt.Errorf("cannot open GeoIP database: %w", err)
		}
		e.geo = db
	}
	return e, nil
}

func (e *enricher) close() {
	if e.geo != nil {
		e.geo.Close()
	}
}

// userAgent classifies a user agent, from the cache when it can.
func (e *enricher) userAgent(ua []byte) uaInfo {
	h := e.cache.hash(ua)
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
	e.lowerUA = appendLowerASCII(e.lowerUA[:0], ua)
	info.bot = parsed.IsBot() || parsed.Device() == agents.DeviceBot ||
		bytes.Contains(e.lowerUA, []byte("headless")) ||
		defaultCrawlers.isCrawler(ua, &e.crawl) // crawlerdetect's answer, faster
	return info
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

// geoRecord reads both MaxMind's layout (country.iso_code) and the
// ip-location-db layout (country_code).
type geoRecord struct {
	Country struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
	CountryCode string `maxminddb:"country_code"`
}

// country looks ip up in the GeoIP database, if there is one.
func (e *enricher) country(ip netip.Addr) string {
	if e.geo == nil || !ip.IsValid() {
		return ""
	}
	var rec geoRecord
	e.ip16 = ip.As16()
	var nip net.IP = e.ip16[:]
	if ip.Is4() {
		nip = e.ip16[12:]
	}
	if err := e.geo.Lookup(nip, &rec); err != nil {
		return ""
	}
	c := rec.Country.ISOCode
	if c == "" {
		c = rec.CountryCode
	}
	code := countryCode([]byte(c))
	if code == [2]byte{} {
		return ""
	}
	return countryString(code)
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
