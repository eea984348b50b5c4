package plausible

import (
	"bytes"
	"encoding/json"
	"testing"
)

var fuzzSeeds = []string{
	`{"site_id":"example.com","metrics":["visitors"],"date_range":"day"}`,
	`{"site_id":"example.com","metrics":["visitors","pageviews","bounce_rate","visit_duration","views_per_visit","events"],"date_range":"7d"}`,
	`{"site_id":"example.com","metrics":["visitors","percentage"],"date_range":"30d","dimensions":["visit:source","event:page"],"order_by":[["visitors","asc"]],"pagination":{"limit":5,"offset":2},"include":{"total_rows":true}}`,
	`{"site_id":"example.com","metrics":["visitors","conversion_rate","group_conversion_rate","events"],"date_range":"month","dimensions":["event:goal"],"filters":[["is","event:goal",["Signup"]]]}`,
	`{"site_id":"example.com","metrics":["time_on_page","scroll_depth"],"date_range":"day","dimensions":["event:page"],"filters":[["contains","event:page",["blog"],{"case_sensitive":false}]]}`,
	`{"site_id":"example.com","metrics":["visits"],"date_range":["2024-07-01","2024-07-09"],"dimensions":["time"],"include":{"time_labels":true}}`,
	`{"site_id":"example.com","metrics":["visitors"],"date_range":["2024-07-01T00:00:00Z","2024-07-02T00:00:00+03:00"],"dimensions":["time:hour"]}`,
	`{"site_id":"example.com","metrics":["visitors"],"date_range":"6mo","filters":[["or",[["is","visit:city",[588409]],["not",["matches","visit:browser",["^Fire"]]]]],["has_not_done",["is","event:name",["Signup"]]]]}`,
	`{"site_id":"example.com","metrics":["visitors"],"date_range":"all","dimensions":["event:props:plan","visit:country"],"filters":[["is_not","event:props:plan",["(none)"]]]}`,
	`{"site_id":"example.com","metrics":["visitors"],"date_range":"year","dimensions":["visit:channel"],"filters":[["is","event:hostname",["example.com"]]],"include":{"trim_relative_date_range":true,"imports":true}}`,
	`{"site_id":"example.com","metrics":["bounce_rate"],"date_range":"12mo","dimensions":["event:page","visit:exit_page"]}`,
	`{"site_id":"example.com","metrics":["visitors"],"date_range":"91d","filters":[["matches","event:page",["("]]]}`,
	`{"site_id":"example.com","metrics":[1],"date_range":{},"filters":[["is","segment",[1]]]}`,
	`[]`, `{`, `null`, `{"site_id":"example.com","metrics":["visitors"],"date_range":"99999999999999999999d"}`,
}

func fuzzEvents() []Event {
	plan := func(v string) func(*Event) { return func(e *Event) { e.Props = []Prop{{Key: "plan", Value: v}} } }
	return []Event{
		with(pv(1, "2024-07-09T20:50:00Z", "/blog/a"), func(e *Event) { e.ReferrerHost = "www.google.com"; e.City = "588409"; e.Country = "EE" }),
		engage(1, "2024-07-09T21:05:00Z", "/blog/a", 4000, 40),
		with(custom(1, "2024-07-09T21:06:00Z", "Signup"), plan("pro")),
		pv(2, "2024-07-10T08:00:00Z", "/"),
		with(custom(2, "2024-07-10T08:00:10Z", "Play"), func(e *Event) { e.Interactive = false }),
		engage(3, "2024-07-10T09:00:00Z", "/", 100, 10),
		with(pv(4, "2024-07-03T10:00:00Z", "/pricing"), func(e *Event) { e.UTMSource = "news"; e.Browser = "Firefox" }),
	}
}

// FuzzParse: Parse never panics; an accepted query echoes the same bytes
// twice, its echo is JSON that Parse accepts again, and evaluating it
// over a few events works.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	site := testSite()
	site.Goals = []Goal{{EventName: "Signup"}, {PagePath: "/blog/*"}}
	events := fuzzEvents()
	f.Fuzz(func(t *testing.T, body []byte) {
		q, err := Parse(body, site, now)
		if err != nil {
			return
		}
		echo := q.AppendEcho(nil)
		if again := q.AppendEcho(nil); !bytes.Equal(echo, again) {
			t.Fatalf("echo not deterministic:\n%s\n%s", echo, again)
		}
		if !json.Valid(echo) {
			t.Fatalf("echo is not JSON: %s", echo)
		}
		if _, err := Parse(echo, site, now); err != nil {
			t.Fatalf("echo %s of %s does not parse: %v", echo, body, err)
		}
		res, err := Evaluate(q, &sliceSource{events: events}, Config{})
		if err != nil {
			return // e.g. an invalid regular expression
		}
		out, _ := res.MarshalJSON()
		if !json.Valid(out) {
			t.Fatalf("response is not JSON: %s", out)
		}
	})
}
