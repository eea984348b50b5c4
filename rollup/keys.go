package rollup

import (
	"encoding/binary"
	"time"

	"github.com/waymark/waymark/ingest"
)

// Key layout of the aggregator database. One leading byte names the table;
// integers are big endian so byte order is numeric order. Every table that
// grows with traffic starts with a day number, so retention is one
// DeleteRange per table per day.
//
//	E day(4) time(8) id(16)      -> event (ingest.AppendEvent encoding); time-ordered within a day
//	I day(4) id(16)              -> event time (be64); the dedup index
//	D day(4) class(1) name       -> events that day (be64), per counter class
//	T class(1) name              -> events held (be64): the sum of D over held days
//	Y day(4)                     -> events(be64) bytes(be64) of the day; the list of held days
//	S len(1) node [inc(8)] seq(8)        -> segment record: received Unix ms(be64) stored(be32) deduplicated(be32)
//	G day(4) len(1) node [inc(8)] seq(8) -> empty; segments by receive day, so their records expire too
//	R kind(1) len(1) entity dim(1) gran(1) bucket(4) value -> counters (rollup.go)
//	H kind(1) len(1) entity dim(1) gran(1) bucket(4) value -> HyperLogLog sketch of visitor hashes
//	V len(1) site visitor(8)     -> the visitor's recent visits (visits.go)
//
// An I value of 9 bytes (time, then lateFlag) marks an event stored raw
// only: it arrived past the late window and is in no rollup, so Rebuild
// leaves it out too.
const (
	tabEvent      = 'E'
	tabEventID    = 'I'
	tabDayCounter = 'D'
	tabTotal      = 'T'
	tabDay        = 'Y'
	tabSegment    = 'S'
	tabSegmentDay = 'G'
	tabRollup     = 'R'
	tabSketch     = 'H'
	tabVisit      = 'V'
)

// lateFlag follows the time in the I value of an event kept raw only.
const lateFlag = 'L'

// Counter classes. Every stored event adds one to classAll, and to the
// class of its link code or site id; bot-flagged events also add to the
// bot variant of each.
const (
	classAll     = 'a' // every event
	classBots    = 'b' // bot-flagged events
	classCode    = 'c' // events of one link code
	classCodeBot = 'C' // bot-flagged events of one link code
	classSite    = 's' // events of one site id
	classSiteBot = 'S' // bot-flagged events of one site id
)

const msPerDay = int64(24 * time.Hour / time.Millisecond)

// day is a UTC day number: days since the Unix epoch.
type day uint32

// dayOf returns the UTC day of a Unix millisecond time; times before the
// epoch map to day 0 (they are far past any retention anyway).
func dayOf(ms int64) day {
	if ms < 0 {
		return 0
	}
	d := ms / msPerDay
	if d > int64(^uint32(0)) {
		return day(^uint32(0))
	}
	return day(d)
}

func (d day) start() time.Time { return time.UnixMilli(int64(d) * msPerDay).UTC() }

func (d day) String() string { return d.start().Format(time.DateOnly) }

func dayPrefix(tab byte, d day) []byte {
	return binary.BigEndian.AppendUint32([]byte{tab}, uint32(d))
}

func appendEventKey(dst []byte, d day, ms int64, id *[16]byte) []byte {
	dst = append(dst, tabEvent)
	dst = binary.BigEndian.AppendUint32(dst, uint32(d))
	dst = binary.BigEndian.AppendUint64(dst, uint64(ms))
	return append(dst, id[:]...)
}

func appendEventIDKey(dst []byte, d day, id *[16]byte) []byte {
	dst = append(dst, tabEventID)
	dst = binary.BigEndian.AppendUint32(dst, uint32(d))
	return append(dst, id[:]...)
}

func appendDayCounterKey(dst []byte, d day, class byte, name string) []byte {
	dst = append(dst, tabDayCounter)
	dst = binary.BigEndian.AppendUint32(dst, uint32(d))
	dst = append(dst, class)
	return append(dst, name...)
}

func appendTotalKey(dst []byte, class byte, name string) []byte {
	return append(append(dst, tabTotal, class), name...)
}

func dayKey(d day) []byte { return dayPrefix(tabDay, d) }

// appendSegmentID appends the length-prefixed node id, the incarnation
// and the sequence number: node ids are at most 255 bytes (the segment
// header says so). Incarnation 0 (segments from before incarnations) is
// left out, so records written before it existed keep their keys; the
// length of the key tells the two forms apart.
func appendSegmentID(dst []byte, ref ingest.SegmentRef) []byte {
	dst = append(dst, byte(len(ref.Node)))
	dst = append(dst, ref.Node...)
	if ref.Inc != 0 {
		dst = binary.BigEndian.AppendUint64(dst, ref.Inc)
	}
	return binary.BigEndian.AppendUint64(dst, ref.Seq)
}

func segmentKey(ref ingest.SegmentRef) []byte {
	return appendSegmentID([]byte{tabSegment}, ref)
}

func segmentDayKey(d day, ref ingest.SegmentRef) []byte {
	return appendSegmentID(dayPrefix(tabSegmentDay, d), ref)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
