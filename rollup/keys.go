package rollup

import (
	"encoding/binary"
	"time"

	"github.com/waymark/waymark/ingest"
)

// Key layout of the aggregator database (format 2). One leading byte names
// the table; integers are big endian, so byte order is numeric order. Every
// table that grows with traffic puts its time partition (a day, or an hour
// or month number) right after the table byte, so retention of a tier is
// one DeleteRange and a rebuilt day replaces its partition wholesale.
//
//	! "format"                             -> "2"
//	E day(4) first(8) segment              -> block: the segment's events of that UTC day (blocks.go)
//	S segment                              -> segment record: received ms, events, length, CRC32C of the bytes
//	G day(4) segment                       -> empty; segments by receive day, so their records expire
//	D day(4) class(1) name                 -> events that day per counter class    [merge: sum]
//	T class(1) name                        -> events held per counter class        [merge: sum]
//	Y day(4)                               -> events and bytes of the day          [merge: sum]
//	R gran(1) period(4) kind(1) len entity dim  -> rowset: counters per value      [merge: rowset]
//	H gran(1) period(4) kind(1) len entity dim value -> visitor set or sketch      [merge: union]
//	V day(4) len site visitor(8)           -> a visitor's recent visits (visits.go)
//	J seq(8)                               -> journal: block keys of a segment not yet checkpointed (checkpoint.go)
//	X day(4) scope(1) len name hour(1)     -> events an edge dropped unwritten (dropped.go) [merge: sum]
//	! "journal-next"                       -> the next journal sequence number
//
// segment is len(1) node incarnation(8) seq(8). A dim is one byte, or
// dimProp followed by the length-prefixed property name.
const (
	tabFormat     = '!'
	tabEvent      = 'E'
	tabSegment    = 'S'
	tabSegmentDay = 'G'
	tabDayCounter = 'D'
	tabTotal      = 'T'
	tabDay        = 'Y'
	tabRows       = 'R'
	tabSketch     = 'H'
	tabVisit      = 'V'
	tabJournal    = 'J'
	tabDropped    = 'X'
)

// formatKey holds the layout version; formatVersion is this one's.
var (
	formatKey     = []byte("!format")
	formatVersion = []byte("2")
)

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

const (
	msPerHour = int64(time.Hour / time.Millisecond)
	msPerDay  = int64(24 * time.Hour / time.Millisecond)
)

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

// hourOf is the hour number (hours since the epoch) of a Unix ms time.
func hourOf(ms int64) uint32 {
	if ms < 0 {
		return 0
	}
	return uint32(ms / msPerHour)
}

// monthOfDay is the month number (months since January 1970) of a day.
func monthOfDay(d day) uint32 {
	t := d.start()
	return uint32((t.Year()-1970)*12 + int(t.Month()) - 1)
}

// monthStart is the first day of month number m.
func monthStart(m uint32) day {
	t := time.Date(1970+int(m/12), time.Month(m%12+1), 1, 0, 0, 0, 0, time.UTC)
	return dayOf(t.UnixMilli())
}

func dayPrefix(tab byte, d day) []byte {
	return binary.BigEndian.AppendUint32([]byte{tab}, uint32(d))
}

// appendSegmentID appends the length-prefixed node id, the incarnation and
// the sequence number: node ids are at most 255 bytes (the header says so).
func appendSegmentID(dst []byte, ref ingest.SegmentRef) []byte {
	dst = append(dst, byte(len(ref.Node)))
	dst = append(dst, ref.Node...)
	dst = binary.BigEndian.AppendUint64(dst, ref.Inc)
	return binary.BigEndian.AppendUint64(dst, ref.Seq)
}

func segmentKey(ref ingest.SegmentRef) []byte {
	return appendSegmentID([]byte{tabSegment}, ref)
}

func segmentDayKey(d day, ref ingest.SegmentRef) []byte {
	return appendSegmentID(dayPrefix(tabSegmentDay, d), ref)
}

func appendEventBlockKey(dst []byte, d day, firstMS int64, ref ingest.SegmentRef) []byte {
	dst = append(dst, tabEvent)
	dst = binary.BigEndian.AppendUint32(dst, uint32(d))
	dst = binary.BigEndian.AppendUint64(dst, uint64(firstMS))
	return appendSegmentID(dst, ref)
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
