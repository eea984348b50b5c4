package plausible

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// sliceSource is an in-memory EventSource: the real interface over a
// slice of events.
type sliceSource struct {
	events []Event
	scans  [][2]int64 // the [from, to) of each ScanSite call
}

func (s *sliceSource) ScanSite(_ string, from, to int64, fn func(*Event) error) error {
	s.scans = append(s.scans, [2]int64{from, to})
	for i := range s.events {
		if s.events[i].Time >= from && s.events[i].Time < to {
			e := s.events[i] // the callee must copy what it keeps
			if err := fn(&e); err != nil {
				return err
			}
		}
	}
	return nil
}

// now is the fixed clock of the tests: Wednesday 2024-07-10 12:00 UTC,
// 15:00 in Tallinn (EEST, UTC+3).
var now = mustTime("2024-07-10T12:00:00Z")

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func ms(s string) int64 { return mustTime(s).UnixMilli() }

func testSite() Site {
	return Site{
		ID: "site-1", Domain: "example.com", Timezone: "Europe/Tallinn",
		StatsStart: mustTime("2024-01-15T10:00:00Z"),
	}
}

// Event builders. Times are UTC RFC 3339.
func pv(hash uint64, at, path string) Event {
	return Event{Time: ms(at), Kind: Pageview, Hash: hash, Path: path, Hostname: "example.com", Interactive: true, ScrollDepth: ScrollDepthMissing}
}

func custom(hash uint64, at, name string) Event {
	return Event{Time: ms(at), Kind: Custom, Name: name, Hash: hash, Path: "/", Hostname: "example.com", Interactive: true, ScrollDepth: ScrollDepthMissing}
}

func engage(hash uint64, at, path string, engagedMS uint32, sd uint8) Event {
	return Event{Time: ms(at), Kind: Engagement, Hash: hash, Path: path, Hostname: "example.com", EngagedMS: engagedMS, ScrollDepth: sd, Interactive: true}
}

func with(e Event, f func(*Event)) Event { f(&e); return e }

// run parses body for site at now and evaluates it over events.
func run(t *testing.T, site Site, body string, events ...Event) *Result {
	t.Helper()
	q, err := Parse([]byte(body), site, now)
	if err != nil {
		t.Fatalf("Parse(%s): %v", body, err)
	}
	res, err := Evaluate(q, &sliceSource{events: events}, Config{})
	if err != nil {
		t.Fatalf("Evaluate(%s): %v", body, err)
	}
	return res
}

// results is the "results" array of the JSON response, as plain JSON.
func results(t *testing.T, res *Result) string {
	t.Helper()
	var full struct {
		Results json.RawMessage `json:"results"`
	}
	b, err := res.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &full); err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, b)
	}
	return string(full.Results)
}

func checkResults(t *testing.T, res *Result, want string) {
	t.Helper()
	if got := results(t, res); got != want {
		t.Errorf("results\n got %s\nwant %s", got, want)
	}
}

func parseErr(t *testing.T, site Site, body string) string {
	t.Helper()
	_, err := Parse([]byte(body), site, now)
	var qe *QueryError
	if !errors.As(err, &qe) {
		t.Fatalf("Parse(%s) = %v; want a QueryError", body, err)
	}
	return qe.Message
}

func timeMinutes(m int) time.Duration { return time.Duration(m) * time.Minute }
