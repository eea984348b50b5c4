// Package testmmdb writes small MaxMind DB files (format 2.0) for tests
// that run the real GeoIP reader: the end-to-end tests start the binary
// with --geoip-db pointing at one. The same writer as ingest's own tests
// (ingest/mmdb_test.go), exported.
package testmmdb

import (
	"encoding/binary"
	"net/netip"
	"slices"
)

// Net is one network of a test database and the record it maps to:
// a value of map[string]any, []any, string, uint32 or bool.
type Net struct {
	Prefix string
	Record any
}

// Build writes a real MaxMind DB (format 2.0, 24-bit records) mapping
// each network to its record, for the maxminddb reader the node uses:
// ipVersion 6 is an IPv6 tree with IPv4 at ::/96, as MaxMind's own files;
// 4 an IPv4-only tree, as ip-location-db's. Networks must not overlap.
// Identical records are stored once, as in MaxMind's databases, so
// addresses of one place share a data offset.
func Build(dbType string, ipVersion int, nets []Net) []byte {
	type child struct {
		node int // > 0: a node; 0: none
		data int // >= 0 with node 0 and set: a data offset
		set  bool
	}
	nodes := [][2]child{{}}
	data := mmdbData{seen: map[string]int{}}
	for _, n := range nets {
		p := netip.MustParsePrefix(n.Prefix)
		bitsLen, a16 := p.Bits(), p.Addr().As16()
		addr := a16[:]
		switch {
		case ipVersion == 4 && p.Addr().Is4():
			a4 := p.Addr().As4()
			addr = a4[:]
		case ipVersion == 4:
			panic("BUG: IPv6 network " + n.Prefix + " in an IPv4 database")
		case p.Addr().Is4():
			// MaxMind's IPv6 trees hold IPv4 at ::a.b.c.d, not ::ffff:a.b.c.d.
			bitsLen += 96
			a4 := p.Addr().As4()
			addr = make([]byte, 16)
			copy(addr[12:], a4[:])
		}
		off, ok := data.seen[string(mmdbEncode(nil, n.Record))]
		if !ok {
			off = len(data.buf)
			data.write(n.Record)
		}
		cur := 0
		for i := range bitsLen {
			bit := addr[i/8] >> (7 - i%8) & 1
			c := &nodes[cur][bit]
			if i == bitsLen-1 {
				if c.node != 0 || c.set {
					panic("BUG: test networks overlap at " + n.Prefix)
				}
				c.data, c.set = off, true
				break
			}
			if c.set {
				panic("BUG: test networks overlap at " + n.Prefix)
			}
			if c.node == 0 {
				c.node = len(nodes)
				nodes = append(nodes, [2]child{})
			}
			cur = c.node
		}
	}
	count := len(nodes)
	var b []byte
	for _, nd := range nodes {
		for _, c := range nd {
			v := count // empty
			if c.node != 0 {
				v = c.node
			} else if c.set {
				v = count + 16 + c.data
			}
			b = append(b, byte(v>>16), byte(v>>8), byte(v))
		}
	}
	b = append(b, make([]byte, 16)...)
	b = append(b, data.buf...)
	b = append(b, "\xAB\xCD\xEFMaxMind.com"...)
	return mmdbEncode(b, map[string]any{
		"node_count": uint32(count), "record_size": uint16(24), "ip_version": uint16(ipVersion),
		"database_type": dbType, "languages": []any{"en"},
		"binary_format_major_version": uint16(2), "binary_format_minor_version": uint16(0),
		"build_epoch": uint64(1_780_000_000), "description": map[string]any{"en": "test database"},
	})
}

// mmdbData is a data section being written.
type mmdbData struct {
	buf  []byte
	seen map[string]int // a map's or array's plain encoding -> its offset
}

// write appends v, with a pointer in place of every map or array written
// before (the plain encoding of v is its identity).
func (d *mmdbData) write(v any) {
	switch v.(type) {
	case map[string]any, []any:
		key := string(mmdbEncode(nil, v))
		if off, ok := d.seen[key]; ok {
			d.buf = appendMMDBPointer(d.buf, off)
			return
		}
		d.seen[key] = len(d.buf)
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		d.buf = mmdbCtrl(d.buf, 7, len(x))
		for _, k := range keys {
			d.buf = mmdbEncode(d.buf, k)
			d.write(x[k])
		}
	case []any:
		d.buf = mmdbCtrl(d.buf, 11, len(x))
		for _, e := range x {
			d.write(e)
		}
	default:
		d.buf = mmdbEncode(d.buf, v)
	}
}

// appendMMDBPointer appends a pointer to data offset off.
func appendMMDBPointer(b []byte, off int) []byte {
	switch {
	case off < 1<<11:
		return append(b, 0x20|byte(off>>8), byte(off))
	case off < 1<<19+2048:
		o := off - 2048
		return append(b, 0x28|byte(o>>16), byte(o>>8), byte(o))
	case off < 1<<27+526336:
		o := off - 526336
		return append(b, 0x30|byte(o>>24), byte(o>>16), byte(o>>8), byte(o))
	}
	return binary.BigEndian.AppendUint32(append(b, 0x38), uint32(off))
}

// mmdbCtrl appends the control byte(s) of a value of type typ and size.
func mmdbCtrl(b []byte, typ, size int) []byte {
	first := byte(typ << 5)
	var ext []byte
	if typ > 7 {
		first = 0
		ext = []byte{byte(typ - 7)}
	}
	switch {
	case size < 29:
		first |= byte(size)
	case size < 285:
		first |= 29
		ext = append(ext, byte(size-29))
	default:
		first |= 30
		ext = binary.BigEndian.AppendUint16(ext, uint16(size-285))
	}
	return append(append(b, first), ext...)
}

// mmdbEncode appends v in the MaxMind DB data format, without pointers.
func mmdbEncode(b []byte, v any) []byte {
	ctrl := mmdbCtrl
	uint := func(b []byte, typ int, x uint64) []byte {
		var be []byte
		for ; x > 0; x >>= 8 {
			be = append([]byte{byte(x)}, be...)
		}
		return append(ctrl(b, typ, len(be)), be...)
	}
	switch x := v.(type) {
	case string:
		return append(ctrl(b, 2, len(x)), x...)
	case uint16:
		return uint(b, 5, uint64(x))
	case uint32:
		return uint(b, 6, uint64(x))
	case uint64:
		return uint(b, 9, x)
	case bool:
		n := 0
		if x {
			n = 1
		}
		return ctrl(b, 14, n)
	case []any:
		b = ctrl(b, 11, len(x))
		for _, e := range x {
			b = mmdbEncode(b, e)
		}
		return b
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = ctrl(b, 7, len(x))
		for _, k := range keys {
			b = mmdbEncode(b, k)
			b = mmdbEncode(b, x[k])
		}
		return b
	}
	panic("BUG: mmdbEncode: unsupported type")
}

// Country is a record in MaxMind's GeoLite2 Country layout.
func Country(iso string, geonameID uint32) map[string]any {
	return map[string]any{
		"continent":          map[string]any{"code": "EU", "geoname_id": uint32(6255148), "names": map[string]any{"en": "Europe"}},
		"country":            map[string]any{"geoname_id": geonameID, "iso_code": iso, "names": map[string]any{"en": iso + " land"}},
		"registered_country": map[string]any{"geoname_id": geonameID, "iso_code": iso},
	}
}
