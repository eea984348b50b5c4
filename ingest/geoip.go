package ingest

import (
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"strconv"

	"github.com/oschwald/maxminddb-golang"
)

// geoInfo is what the GeoIP database says of an address, as Plausible
// keeps it (its ingestion/geolocation.ex): the ISO 3166-1 country, the
// ISO 3166-2 code of the first subdivision ("US-CA", "EE-37") and the
// GeoNames id of the city in decimal ("5391959"). Region and city are set
// only with a country.
type geoInfo struct {
	country, region, city string
}

// geoDB looks addresses up in a MaxMind-format database. Two layouts are
// read:
//
//   - MaxMind's (GeoLite2/GeoIP2 Country and City, DB-IP's lite files):
//     country.iso_code, subdivisions[0].iso_code, city.geoname_id;
//   - ip-location-db's (the npm @ip-location-db/* packages): country_code
//     only. Its city files name the state and city in English but carry
//     neither ISO subdivision codes nor GeoNames ids, which are what
//     Plausible's visit:region and visit:city hold, so region and city stay
//     empty with them rather than hold values no Plausible client expects.
//
// Nothing is allocated per lookup once the places are known. A database is
// highly normalised: every network of one place points at one data record,
// and the records of one city, country or list of subdivisions point at
// one shared sub-record each. So:
//
//   - records are remembered by their offset in a setAssoc (records), so a
//     lookup in the steady state walks the search tree and reads a cache;
//   - a record not in it is decoded only down to the offsets of its
//     country, subdivisions and city (three small allocations of the
//     reader's reflection), which are looked up in maps filled once per
//     country, region and city (each decoded, and its string interned, the
//     first time; GeoLite2 City has 251, about 4,500 and 120,000 of them).
//
// Used only by the writer goroutine.
type geoDB struct {
	r      *maxminddb.Reader
	v4Only bool
	ip16   [16]byte
	rec    geoOffsets // decoded into in place: no allocation for the struct

	records   setAssoc[geoEntry]
	countries map[uintptr][2]byte   // country or country_code sub-record
	regions   map[[2]uintptr]uint16 // (country, subdivisions) -> regionStr
	cities    map[uintptr]uint32    // city sub-record -> cityStr
	regionStr internTable           // "US-CA"
	cityStr   internTable           // "5391959"
	scratch   []byte
}

// geoCacheSets sizes the record cache: 8,192 sets of 8, 65,536 records
// (GeoLite2 City has 540,000, one per distinct network description) in
// 1.5 MiB; a miss costs one shallow decode.
const geoCacheSets = 1 << 13

// Bounds on the per-place maps, each above what GeoLite2 City holds. A
// database with more (a commercial one) keeps working: a place past the
// bound is decoded on every miss of the record cache instead.
const (
	maxGeoCountries = 1 << 10
	maxGeoRegions   = 1 << 15
	maxGeoCities    = 1 << 18
)

type geoEntry struct {
	country [2]byte
	region  uint16 // index in regionStr
	city    uint32 // index in cityStr
}

// geoOffsets is the top of a record: the reader stores the data offset of
// a field into a uintptr instead of decoding it. absent marks a field the
// record does not have.
type geoOffsets struct {
	Country      uintptr `maxminddb:"country"`      // MaxMind: {iso_code, ...}
	CountryCode  uintptr `maxminddb:"country_code"` // ip-location-db: "EE"
	Subdivisions uintptr `maxminddb:"subdivisions"` // MaxMind: [{iso_code, ...}, ...]
	City         uintptr `maxminddb:"city"`         // MaxMind: {geoname_id, ...}
}

const absent = ^uintptr(0)

func openGeoDB(path string) (*geoDB, error) {
	r, err := maxminddb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open GeoIP database %q: %w", path, err)
	}
	return &geoDB{
		r:         r,
		v4Only:    r.Metadata.IPVersion == 4,
		records:   newSetAssoc[geoEntry](geoCacheSets),
		countries: map[uintptr][2]byte{},
		regions:   map[[2]uintptr]uint16{},
		cities:    map[uintptr]uint32{},
		regionStr: newInternTable(maxGeoRegions),
		cityStr:   newInternTable(maxGeoCities),
	}, nil
}

func (g *geoDB) close() { _ = g.r.Close() }

// locate looks ip up; the zero geoInfo when the database knows nothing.
func (g *geoDB) locate(ip netip.Addr) geoInfo {
	if !ip.IsValid() {
		return geoInfo{}
	}
	ip = ip.Unmap()
	if g.v4Only && !ip.Is4() {
		return geoInfo{} // the reader's error for this allocates
	}
	g.ip16 = ip.As16()
	var nip net.IP = g.ip16[:]
	if ip.Is4() {
		nip = g.ip16[12:]
	}
	off, err := g.r.LookupOffset(nip)
	if err != nil || off == maxminddb.NotFound {
		return geoInfo{}
	}
	key := geoKey(off)
	if e, ok := g.records.get(key); ok {
		return g.info(e)
	}
	e, info, ok := g.decode(off)
	if ok {
		g.records.put(key, e)
	}
	return info
}

// geoKey turns a record offset into a nonzero cache key whose low bits
// (the set) are well mixed: multiplying by an odd constant and rotating
// are both one-to-one.
func geoKey(off uintptr) uint64 {
	return bits.RotateLeft64((uint64(off)+1)*0x9e3779b97f4a7c15, 32)
}

func (g *geoDB) info(e geoEntry) geoInfo {
	if e.country == ([2]byte{}) {
		return geoInfo{}
	}
	return geoInfo{country: countryString(e.country), region: g.regionStr.str(uint32(e.region)), city: g.cityStr.str(e.city)}
}

// decode reads the record at off (a miss of the record cache). ok is false
// when a place did not fit the bounds: info is right, but not cacheable.
func (g *geoDB) decode(off uintptr) (e geoEntry, info geoInfo, ok bool) {
	g.rec = geoOffsets{absent, absent, absent, absent}
	if g.r.Decode(off, &g.rec) != nil {
		return geoEntry{}, geoInfo{}, true
	}
	rec := g.rec
	country, ok := g.country(rec)
	if country == ([2]byte{}) {
		return geoEntry{}, geoInfo{}, ok
	}
	e.country = country
	info.country = countryString(country)
	if rec.Country == absent {
		return e, info, ok // ip-location-db: no codes below the country
	}
	if rec.Subdivisions != absent {
		id, fits := g.region(country, rec.Country, rec.Subdivisions)
		e.region, ok = uint16(id), ok && fits
		info.region = g.regionStr.str(id)
		if !fits {
			info.region = string(g.scratch) // left there by region
		}
	}
	if rec.City != absent {
		id, fits := g.city(rec.City)
		e.city, ok = id, ok && fits
		info.city = g.cityStr.str(id)
		if !fits {
			info.city = string(g.scratch)
		}
	}
	return e, info, ok
}

// country is the record's country code, zero when unknown; ok is false
// when the code could not be remembered.
func (g *geoDB) country(rec geoOffsets) (code [2]byte, ok bool) {
	off := rec.Country
	if off == absent {
		off = rec.CountryCode
	}
	if off == absent {
		return [2]byte{}, true
	}
	if c, ok := g.countries[off]; ok {
		return c, true
	}
	var iso string
	if rec.Country != absent {
		var c struct {
			ISOCode string `maxminddb:"iso_code"`
		}
		if g.r.Decode(off, &c) == nil {
			iso = c.ISOCode
		}
	} else {
		_ = g.r.Decode(off, &iso)
	}
	code = countryCode([]byte(iso))
	if len(g.countries) >= maxGeoCountries {
		return code, false
	}
	g.countries[off] = code
	return code, true
}

// region is the index of "<CC>-<subdivisions[0].iso_code>" in regionStr
// (0, "", when the list is empty). When fits is false the code is not
// interned and is left in g.scratch.
func (g *geoDB) region(country [2]byte, countryOff, subsOff uintptr) (id uint32, fits bool) {
	key := [2]uintptr{countryOff, subsOff}
	if i, ok := g.regions[key]; ok {
		return uint32(i), true
	}
	var subs []struct {
		ISOCode string `maxminddb:"iso_code"`
	}
	g.scratch = g.scratch[:0]
	if g.r.Decode(subsOff, &subs) != nil || len(subs) == 0 || subs[0].ISOCode == "" ||
		len(subs[0].ISOCode) > MaxShortLen-3 {
		return 0, g.remember(key, 0)
	}
	g.scratch = append(append(append(g.scratch, country[:]...), '-'), subs[0].ISOCode...)
	if len(g.regions) >= maxGeoRegions {
		return 0, false
	}
	id, fits = g.regionStr.idBytes(g.scratch)
	return id, fits && g.remember(key, id)
}

func (g *geoDB) remember(key [2]uintptr, id uint32) bool {
	if len(g.regions) >= maxGeoRegions {
		return false
	}
	g.regions[key] = uint16(id)
	return true
}

// city is the index of the city's GeoNames id, in decimal, in cityStr (0,
// "", without one). When fits is false it is left in g.scratch.
func (g *geoDB) city(off uintptr) (id uint32, fits bool) {
	if i, ok := g.cities[off]; ok {
		return i, true
	}
	var c struct {
		GeoNameID uint32 `maxminddb:"geoname_id"`
	}
	g.scratch = g.scratch[:0]
	if g.r.Decode(off, &c) == nil && c.GeoNameID != 0 {
		g.scratch = strconv.AppendUint(g.scratch, uint64(c.GeoNameID), 10)
		if id, fits = g.cityStr.idBytes(g.scratch); !fits {
			return 0, false
		}
	}
	if len(g.cities) >= maxGeoCities {
		return id, false
	}
	g.cities[off] = id
	return id, true
}
