package rollup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/axiomhq/hyperloglog"
	"github.com/cockroachdb/pebble/v2"
)

// Rollup kinds: the first byte after the table names whose numbers these are.
const (
	kindLink = 'l' // entity is a link code
	kindSite = 's' // entity is a site id
)

// Rollup granularities. Every event moves its hour and its UTC day; a query
// reads whole UTC days from the day rows and only the ragged edges of its
// range from the hour rows. bucket is an hour number (hours since the
// epoch) in both: for a day row it is the day's first hour.
const (
	granHour = 'h'
	granDay  = 'd'
	// granAll is one all-time row (bucket 0) of a link's totals: what the
	// click limit is checked against, independent of raw retention.
	granAll = 'a'
)

// Dimensions. dimTotal (value "") holds the entity's totals; the others
// hold one row per value. Link rows use the first block, site rows all.
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
	// site only
	dimUTMTerm    = 'T'
	dimUTMContent = 'C'
	dimSource     = 's'
	dimPage       = 'p'
	dimEntryPage  = 'n'
	dimExitPage   = 'x'
	dimEventName  = 'e'
)

// sketchPrecision is the one HyperLogLog precision used everywhere, so
// every sketch merges with every other: 2^14 registers, a standard error
// of 1.04/sqrt(16384) = 0.81 %.
const sketchPrecision = 14

// Counter fields. One row holds all of them; a row stores only up to its
// last non-zero field. What each means is defined in the package doc.
const (
	fCount       = iota // clicks (links) or pageviews (sites, event rows)
	fBots               // bot-flagged events, total rows only
	fVisits             // visits starting in the bucket
	fBounces            // of those, visits with exactly one pageview
	fVisitPV            // pageviews of those visits
	fDurationMS         // summed visit durations of those visits
	fEvents             // custom events
	fEngagedMS          // summed engaged time of engagement events
	fEngagements        // engagement events
	fScrollSum          // summed scroll depth of engagement events
	nFields
)

// counters is one rollup row.
type counters [nFields]int64

func (c *counters) add(o *counters) {
	for i := range c {
		c[i] += o[i]
	}
}

func appendCounters(dst []byte, c *counters) []byte {
	n := nFields
	for n > 0 && c[n-1] == 0 {
		n--
	}
	for i := range n {
		dst = binary.AppendUvarint(dst, uint64(max(c[i], 0)))
	}
	return dst
}

func decodeCounters(b []byte, c *counters) error {
	*c = counters{}
	for i := 0; len(b) > 0; i++ {
		v, n := binary.Uvarint(b)
		if n <= 0 || i >= nFields {
			return fmt.Errorf("cannot decode rollup row: %d fields or bad varint", i)
		}
		c[i] = int64(v)
		b = b[n:]
	}
	return nil
}

// rkey names one rollup row or sketch.
type rkey struct {
	kind   byte
	entity string
	dim    byte
	gran   byte
	bucket uint32
	value  string
}

func appendRollupPrefix(dst []byte, tab, kind byte, entity string, dim, gran byte) []byte {
	dst = append(dst, tab, kind, byte(len(entity)))
	dst = append(dst, entity...)
	return append(dst, dim, gran)
}

func appendRKey(dst []byte, tab byte, k *rkey) []byte {
	dst = appendRollupPrefix(dst, tab, k.kind, k.entity, k.dim, k.gran)
	dst = binary.BigEndian.AppendUint32(dst, k.bucket)
	return append(dst, k.value...)
}

// parseRKey reads a key made by appendRKey.
func parseRKey(key []byte) (rkey, bool) {
	if len(key) < 3 {
		return rkey{}, false
	}
	n := int(key[2])
	if len(key) < 3+n+2+4 {
		return rkey{}, false
	}
	k := rkey{kind: key[1], entity: string(key[3 : 3+n])}
	rest := key[3+n:]
	k.dim, k.gran = rest[0], rest[1]
	k.bucket = binary.BigEndian.Uint32(rest[2:6])
	k.value = string(rest[6:])
	return k, true
}

const msPerHour = int64(3600_000)

// hourOf is the hour number of a Unix millisecond time.
func hourOf(ms int64) uint32 {
	if ms < 0 {
		return 0
	}
	return uint32(ms / msPerHour)
}

// delta collects what one apply (or one rebuilt day) changes: counter
// deltas and visitor hashes per row. flush turns it into batch writes.
type delta struct {
	rows     map[rkey]*counters
	sketches map[rkey][]uint64
}

func newDelta() *delta {
	return &delta{rows: make(map[rkey]*counters), sketches: make(map[rkey][]uint64)}
}

// add moves field f of the row (kind, entity, dim, value) by n in the hour
// of ms and in its UTC day.
func (d *delta) add(kind byte, entity string, dim byte, value string, ms int64, f int, n int64) {
	if n == 0 {
		return
	}
	h := hourOf(ms)
	for _, k := range [2]rkey{
		{kind, entity, dim, granHour, h, value},
		{kind, entity, dim, granDay, h - h%24, value},
	} {
		c := d.rows[k]
		if c == nil {
			c = new(counters)
			d.rows[k] = c
		}
		c[f] += n
	}
}

// addAllTime moves field f of an entity's all-time total row by n.
func (d *delta) addAllTime(kind byte, entity string, f int, n int64) {
	k := rkey{kind, entity, dimTotal, granAll, 0, ""}
	c := d.rows[k]
	if c == nil {
		c = new(counters)
		d.rows[k] = c
	}
	c[f] += n
}

// visitor adds a visitor hash to the sketches of the row in the hour of ms
// and in its UTC day.
func (d *delta) visitor(kind byte, entity string, dim byte, value string, ms int64, hash uint64) {
	hash = mix64(hash)
	h := hourOf(ms)
	d.sketches[rkey{kind, entity, dim, granHour, h, value}] = append(d.sketches[rkey{kind, entity, dim, granHour, h, value}], hash)
	d.sketches[rkey{kind, entity, dim, granDay, h - h%24, value}] = append(d.sketches[rkey{kind, entity, dim, granDay, h - h%24, value}], hash)
}

// flush adds the delta to the stored rows and sketches, staging the new
// values in b. The caller holds mu, so no other writer moves them between
// the read and the commit.
//
// One request touches tens of thousands of rows and sketches when its
// events come from many pages and new visitors. They are read in key order
// with one iterator per table, not one Get each: sorted seeks let Pebble
// step forward through the memtable and the blocks it has open instead of
// searching every level from the top for every key.
func (d *delta) flush(db pebble.Reader, b *pebble.Batch) error {
	rows := make([]keyedRKey, 0, len(d.rows))
	var kbuf []byte
	for k := range d.rows {
		rows, kbuf = appendKeyed(rows, kbuf, tabRollup, k)
	}
	var vb []byte
	err := readSorted(db, tabRollup, rows, func(e *keyedRKey, v []byte) error {
		var cur counters
		if v != nil {
			if err := decodeCounters(v, &cur); err != nil {
				return err
			}
		}
		cur.add(d.rows[e.k])
		zero := true
		for _, x := range cur {
			if x < 0 {
				return fmt.Errorf("BUG: rollup row %x went negative: %v", e.key, cur)
			}
			zero = zero && x == 0
		}
		var err error
		if zero {
			err = b.Delete(e.key, nil)
		} else {
			vb = appendCounters(vb[:0], &cur)
			err = b.Set(e.key, vb, nil)
		}
		if err != nil {
			return fmt.Errorf("cannot stage rollup row: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sketches := make([]keyedRKey, 0, len(d.sketches))
	kbuf = kbuf[:0:0] // the row keys above still point into the old buffer
	for k := range d.sketches {
		sketches, kbuf = appendKeyed(sketches, kbuf, tabSketch, k)
	}
	return readSorted(db, tabSketch, sketches, func(e *keyedRKey, v []byte) error {
		sk := newSketch()
		if v != nil {
			if err := sk.UnmarshalBinary(v); err != nil {
				return fmt.Errorf("cannot decode sketch %x: %w", e.key, err)
			}
		}
		for _, h := range d.sketches[e.k] {
			sk.InsertHash(h)
		}
		var err error
		vb, err = sk.AppendBinary(vb[:0])
		if err != nil {
			return fmt.Errorf("cannot encode sketch: %w", err)
		}
		if err := b.Set(e.key, vb, nil); err != nil {
			return fmt.Errorf("cannot stage sketch: %w", err)
		}
		return nil
	})
}

// keyedRKey is a row or sketch name with its encoded key.
type keyedRKey struct {
	k   rkey
	key []byte
}

// appendKeyed encodes k into buf and appends it to dst. The keys share
// buf; a grown buf leaves earlier keys in the old array, which stays valid.
func appendKeyed(dst []keyedRKey, buf []byte, tab byte, k rkey) ([]keyedRKey, []byte) {
	off := len(buf)
	buf = appendRKey(buf, tab, &k)
	return append(dst, keyedRKey{k, buf[off:len(buf):len(buf)]}), buf
}

// readSorted sorts entries by key and calls fn for each with its stored
// value, or nil when it has none, reading table tab with one iterator.
// The value is only valid during the call.
func readSorted(db pebble.Reader, tab byte, entries []keyedRKey, fn func(e *keyedRKey, v []byte) error) error {
	if len(entries) == 0 {
		return nil
	}
	slices.SortFunc(entries, func(x, y keyedRKey) int { return bytes.Compare(x.key, y.key) })
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{tab}, UpperBound: []byte{tab + 1}})
	if err != nil {
		return fmt.Errorf("cannot read rollups: %w", err)
	}
	for i := range entries {
		e := &entries[i]
		var v []byte
		if it.SeekGE(e.key) && bytes.Equal(it.Key(), e.key) {
			if v, err = it.ValueAndErr(); err != nil {
				it.Close()
				return fmt.Errorf("cannot read rollup %x: %w", e.key, err)
			}
			if v == nil {
				v = []byte{} // present but empty is not missing
			}
		}
		if err := fn(e, v); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("cannot read rollups: %w", err)
	}
	return nil
}

func readCounters(db pebble.Reader, key []byte, c *counters) error {
	v, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		*c = counters{}
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read rollup row: %w", err)
	}
	defer closer.Close()
	return decodeCounters(v, c)
}

func newSketch() *hyperloglog.Sketch {
	sk, err := hyperloglog.NewSketch(sketchPrecision, true)
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return sk
}

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
