package main

import (
	"time"

	"github.com/waymark/waymark/bench/harness"
	"github.com/waymark/waymark/ingest"
)

// truth is what the generated stream holds, tallied as it goes by: the
// figures every answer is checked against.
type truth struct {
	start     time.Time
	days      int
	clicks    []int64 // per day
	pageviews []int64
	// Exact distinct visitors per day (the stream is in time order, so one
	// day's set at a time is kept).
	linkVisitors, siteVisitors []int
	countries, pages           map[string]int64 // over the whole range
	curDay                     int
	linkSet, siteSet           map[uint64]struct{}
}

func newTruth(start time.Time, days int) *truth {
	return &truth{
		start: start, days: days,
		clicks: make([]int64, days), pageviews: make([]int64, days),
		linkVisitors: make([]int, days), siteVisitors: make([]int, days),
		countries: map[string]int64{}, pages: map[string]int64{},
		linkSet: map[uint64]struct{}{}, siteSet: map[uint64]struct{}{},
	}
}

func (t *truth) add(ev *ingest.Event) {
	d := int((ev.Time - t.start.UnixMilli()) / 86_400_000)
	if d != t.curDay {
		t.closeDay()
		t.curDay = d
	}
	switch ev.Kind {
	case ingest.KindClick:
		t.clicks[d]++
		t.countries[ev.Country]++
		t.linkSet[ev.VisitorHash] = struct{}{}
	case ingest.KindPageview:
		t.pageviews[d]++
		t.pages[ev.Path]++
		t.siteSet[ev.VisitorHash] = struct{}{}
	}
}

func (t *truth) closeDay() {
	if t.curDay < t.days {
		t.linkVisitors[t.curDay] += len(t.linkSet)
		t.siteVisitors[t.curDay] += len(t.siteSet)
	}
	clear(t.linkSet)
	clear(t.siteSet)
}

// tallySource passes a stream through, tallying it into t.
type tallySource struct {
	src harness.EventSource
	t   *truth
}

func (s *tallySource) Next(ev *ingest.Event) bool {
	if !s.src.Next(ev) {
		s.t.closeDay()
		return false
	}
	s.t.add(ev)
	return true
}
