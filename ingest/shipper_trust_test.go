package ingest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestShipperTrustsOnlySegmentsWrittenHere: the shipper decodes every
// record of a segment it did not see this process write whole, and checks
// only the framing (header, CRCs, footer) of one it did.
func TestShipperTrustsOnlySegmentsWrittenHere(t *testing.T) {
	p := openTestPipeline(t, nil)
	ev := sampleClick()
	seg := appendSegmentHeader(nil, "node-a", 5, 77, time.Now())
	seg = appendRecord(seg, AppendEvent(nil, &ev))
	seg = appendRecord(seg, []byte{9, 9, 9}) // good CRC, not an event
	seg = appendFooter(seg, 2)
	if _, _, err := p.ship.checkBeforeSend(77, seg); err == nil {
		t.Fatalf("a segment not written here passed with an undecodable record")
	}
	p.ship.writtenHere(77)
	if _, n, err := p.ship.checkBeforeSend(77, seg); err != nil || n != 2 {
		t.Fatalf("a segment written here: got %d records, %v; want its framing checked only (2, nil)", n, err)
	}
	seg[len(seg)-footerLen-2] ^= 0x40 // inside the last record: its CRC fails
	if _, _, err := p.ship.checkBeforeSend(77, seg); err == nil {
		t.Errorf("a segment written here passed with a bad CRC")
	}
	p.ship.untrust(77)
	seg[len(seg)-footerLen-2] ^= 0x40
	if _, _, err := p.ship.checkBeforeSend(77, seg); err == nil {
		t.Errorf("an untrusted segment passed with an undecodable record")
	}
}

// TestShipperSetsAsideOwnSegmentDamagedOnDisk: a segment this process
// wrote, damaged on disk after it was sealed, fails the framing check
// before it is sent again, and is set aside.
func TestShipperSetsAsideOwnSegmentDamagedOnDisk(t *testing.T) {
	agg := newFakeAggregator(t, "ack")
	agg.silent[firstSeq] = true // not answered: sent again a second later
	p := openTestPipeline(t, func(c *Config) {
		c.AggregatorURL = agg.srv.URL
		c.ShipToken = "s3cret"
		c.SegmentMaxAge = 20 * time.Millisecond
		c.ShipMaxBackoff = time.Minute
	})
	captureN(p, 5)
	waitFor(t, "the segment sent once", func() bool { return agg.sentCount(firstSeq) == 1 })
	path := filepath.Join(p.cfg.Dir, segmentName(firstSeq, sealedSuffix))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-footerLen-2] ^= 0x40 // the last record's payload
	writeFile(t, path, b)
	waitFor(t, "the damaged segment set aside", func() bool {
		_, err := os.Stat(filepath.Join(p.cfg.Dir, segmentName(firstSeq, badSuffix)))
		return err == nil
	})
	if n := agg.sentCount(firstSeq); n != 1 {
		t.Errorf("damaged segment sent %d times; want 1 (before the damage)", n)
	}
	if got := p.m.corruptSegments.Get(); got != 1 {
		t.Errorf("corrupt segments: got %d; want 1", got)
	}
}

// TestShipperSendsS2AndFallsBackToZstd: batches go s2-compressed; an
// aggregator that refuses s2 (the version before it) gets zstd from then
// on, and every event arrives once.
func TestShipperSendsS2AndFallsBackToZstd(t *testing.T) {
	for _, mode := range []string{"ack", "nos2"} {
		agg := newFakeAggregator(t, mode)
		p := openTestPipeline(t, func(c *Config) {
			c.AggregatorURL = agg.srv.URL
			c.ShipToken = "s3cret"
			c.SegmentMaxAge = 20 * time.Millisecond
		})
		captureN(p, 20)
		waitFor(t, mode+": every event shipped", func() bool { return agg.events() == 20 && p.PendingBytes() == 0 })
		captureN(p, 20)
		waitFor(t, mode+": the second lot shipped", func() bool { return agg.events() == 40 && p.PendingBytes() == 0 })
		agg.mu.Lock()
		encodings := append([]string(nil), agg.encodings...)
		agg.mu.Unlock()
		// Each lot goes in one post or more (a segment may seal mid-lot).
		rest := "s2"
		if mode == "nos2" {
			rest = "zstd" // after the one refused s2 post
			if len(encodings) > 0 && encodings[0] == "s2" {
				encodings = encodings[1:]
			} else {
				t.Errorf("nos2: first post %v; want s2", encodings)
			}
		}
		if len(encodings) < 2 || slices.ContainsFunc(encodings, func(e string) bool { return e != rest }) {
			t.Errorf("%s: Content-Encodings %v; want two or more posts, all %s", mode, encodings, rest)
		}
		if got := p.m.shipRetries.Get(); got != 0 {
			t.Errorf("%s: %d retries; want none (the fallback is not a failure)", mode, got)
		}
	}
}
