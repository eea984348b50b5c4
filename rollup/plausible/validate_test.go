package plausible

import (
	"strings"
	"testing"
)

// Every message below is Plausible's own text (stats/json_schema.ex with
// ExJsonSchema's messages, stats/api_query_parser.ex,
// stats/query_builder.ex, stats/table_decider.ex), with its inspect()
// rendering of the offending value.
func TestParseErrors(t *testing.T) {
	site := testSite()
	site.Goals = []Goal{{EventName: "Signup"}, {PagePath: "/thank-you*"}}
	q := func(rest string) string {
		return `{"site_id":"example.com","date_range":"day",` + rest + `}`
	}
	cases := []struct {
		name, body, want string
	}{
		{"no keys", `{}`, "#: Required properties site_id, metrics, date_range were not present."},
		{"site only", `{"site_id":"example.com"}`, "#: Required properties metrics, date_range were not present."},
		{"one missing", `{"site_id":"example.com","metrics":["visitors"]}`, "#: Required property date_range was not present."},
		{"not an object", `[1]`, "#: Type mismatch. Expected Object but got Array."},
		{"unknown key", `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","foo":1}`,
			"#/foo: Schema does not allow additional properties."},
		{"unknown key and missing", `{"foo":1}`,
			"#/foo: Schema does not allow additional properties.\n#: Required properties site_id, metrics, date_range were not present."},
		{"site_id type", `{"site_id":1,"metrics":["visitors"],"date_range":"day"}`, "#/site_id: Type mismatch. Expected String but got Integer."},
		{"bad metric", q(`"metrics":["visitors","event:name"]`), `#/metrics/1: Invalid metric "event:name"`},
		{"revenue is EE only", q(`"metrics":["total_revenue","average_revenue"]`),
			"#/metrics/0: Invalid metric \"total_revenue\"\n#/metrics/1: Invalid metric \"average_revenue\""},
		{"exit_rate is internal", q(`"metrics":["exit_rate"]`), `#/metrics/0: Invalid metric "exit_rate"`},
		{"metric not a string", q(`"metrics":[1.5]`), `#/metrics/0: Invalid metric 1.5`},
		{"duplicate metrics", q(`"metrics":["visitors","visitors"]`), "#/metrics: Expected items to be unique but they were not."},
		{"no metrics", q(`"metrics":[]`), "#/metrics: Expected a minimum of 1 items but got 0."},
		{"metrics string", q(`"metrics":"visitors"`), "#/metrics: Type mismatch. Expected Array but got String."},
		{"errors sorted by key", `{"site_id":"example.com","metrics":["baa"],"date_range":"bad"}`,
			"#/date_range: Invalid date range \"bad\"\n#/metrics/0: Invalid metric \"baa\""},
		{"clauses not a list", q(`"metrics":["visitors"],"filters":[["is","event:name","foo"]]`),
			`#/filters/0: Invalid filter ["is", "event:name", "foo"]`},
		{"unknown operator", q(`"metrics":["visitors"],"filters":[["exists?","event:name",["foo"]]]`),
			`#/filters/0: Invalid filter ["exists?", "event:name", ["foo"]]`},
		{"wildcard is internal", q(`"metrics":["visitors"],"filters":[["matches_wildcard","event:page",["/a*"]]]`),
			`#/filters/0: Invalid filter ["matches_wildcard", "event:page", ["/a*"]]`},
		{"unknown event dimension", q(`"metrics":["visitors"],"filters":[["is","event:device",["foo"]]]`),
			`#/filters/0: Invalid filter ["is", "event:device", ["foo"]]`},
		{"unknown visit dimension", q(`"metrics":["visitors"],"filters":[["is","visit:name",["foo"]]]`),
			`#/filters/0: Invalid filter ["is", "visit:name", ["foo"]]`},
		{"filters string", q(`"metrics":["visitors"],"filters":"foo"`), "#/filters: Type mismatch. Expected Array but got String."},
		{"integer clause", q(`"metrics":["visitors"],"filters":[["is","visit:os_version",[123]]]`),
			`Invalid filter '["is", "visit:os_version", [123]]'.`},
		{"country code", q(`"metrics":["visitors"],"filters":[["is","visit:country",["USA"]]]`),
			"Invalid visit:country filter, visit:country needs to be a valid 2-letter country code."},
		{"modifier on matches", q(`"metrics":["visitors"],"filters":[["matches","event:hostname",["a.plausible.io"],{"case_sensitive":false}]]`),
			`#/filters/0: Invalid filter ["matches", "event:hostname", ["a.plausible.io"], %{"case_sensitive" => false}]`},
		{"modifier on matches_not", q(`"metrics":["visitors"],"filters":[["matches_not","event:hostname",["a"],{"case_sensitive":true}]]`),
			`#/filters/0: Invalid filter ["matches_not", "event:hostname", ["a"], %{"case_sensitive" => true}]`},
		{"unknown modifier", q(`"metrics":["visitors"],"filters":[["is","event:page",["/"],{"exact":true}]]`),
			`#/filters/0: Invalid filter ["is", "event:page", ["/"], %{"exact" => true}]`},
		{"empty and", q(`"metrics":["visitors"],"filters":[["and",[]]]`), `#/filters/0: Invalid filter ["and", []]`},
		{"empty or", q(`"metrics":["visitors"],"filters":[["or",[]]]`), `#/filters/0: Invalid filter ["or", []]`},
		{"is_not goal", q(`"metrics":["visitors"],"filters":[["is_not","event:goal",["Signup"]]]`),
			`#/filters/0: Invalid filter ["is_not", "event:goal", ["Signup"]]`},
		{"goal not configured", q(`"metrics":["visitors"],"filters":[["is","event:goal",["Purchase"]]]`),
			"Invalid filters. The goal `Purchase` is not configured for this site. Find out how to configure goals here: https://plausible.io/docs/stats-api#filtering-by-goals"},
		{"page goal not configured", q(`"metrics":["visitors"],"filters":[["is","event:goal",["Visit /thank-you"]]]`),
			"Invalid filters. The goal `Visit /thank-you` is not configured for this site. Find out how to configure goals here: https://plausible.io/docs/stats-api#filtering-by-goals"},
		{"goal below top level", q(`"metrics":["visitors"],"filters":[["or",[["is","event:goal",["Signup"]],["is","visit:browser",["Firefox"]]]]]`),
			"Invalid filters. Dimension `event:goal` can only be filtered at the top level."},
		{"hostname below top level", q(`"metrics":["visitors"],"filters":[["not",["is","event:hostname",["a.example.com"]]]]`),
			"Invalid filters. Dimension `event:hostname` can only be filtered at the top level."},
		{"props below top level with CR", q(`"metrics":["conversion_rate"],"filters":[["is","event:goal",["Signup"]],["or",[["is","event:props:plan",["a"]],["is","visit:browser",["Firefox"]]]]]`),
			"Invalid filters. When `conversion_rate` or `group_conversion_rate` metrics are used, custom property filters can only be used on top level."},
		{"behavioral on visit dimension", q(`"metrics":["visitors"],"filters":[["has_done",["is","visit:browser",["Firefox"]]]]`),
			"Invalid filters. Behavioral filters (has_done, has_not_done) can only be used with event dimension filters."},
		{"nested behavioral", q(`"metrics":["visitors"],"filters":[["has_done",["has_not_done",["is","event:name",["Signup"]]]]]`),
			"Invalid filters. Behavioral filters (has_done, has_not_done) cannot be nested."},
		{"segment", q(`"metrics":["visitors"],"filters":[["is","segment",[1]]]`),
			"Invalid filters. Some segments don't exist or aren't accessible."},
		{"eleven segments", q(`"metrics":["visitors"],"filters":[["is","segment",[1,2,3,4,5,6,7,8,9,10,11]]]`),
			"Invalid filters. You can only use up to 10 segment filters in a query."},
		{"segment string id", q(`"metrics":["visitors"],"filters":[["is","segment",["123"]]]`),
			`Invalid filter '["is", "segment", ["123"]]'.`},
		{"include not an object", q(`"metrics":["visitors"],"include":"foo"`), "#/include: Type mismatch. Expected Object but got String."},
		{"include comparisons", q(`"metrics":["visitors"],"include":{"compare":"previous_period"}`),
			"#/include/compare: Schema does not allow additional properties."},
		{"include not boolean", q(`"metrics":["visitors"],"include":{"total_rows":1}`),
			"#/include/total_rows: Type mismatch. Expected Boolean but got Integer."},
		{"time labels need time", q(`"metrics":["visitors"],"include":{"time_labels":true}`),
			"Invalid include.time_labels: requires a time dimension."},
		{"limit too big", q(`"metrics":["visitors"],"pagination":{"limit":10001}`), "#/pagination/limit: Expected the value to be <= 10000"},
		{"limit zero", q(`"metrics":["visitors"],"pagination":{"limit":0}`), "#/pagination/limit: Expected the value to be >= 1"},
		{"negative offset", q(`"metrics":["visitors"],"pagination":{"offset":-1}`), "#/pagination/offset: Expected the value to be >= 0"},
		{"limit not integer", q(`"metrics":["visitors"],"pagination":{"limit":1.5}`), "#/pagination/limit: Type mismatch. Expected Integer but got Number."},
		{"pagination extra key", q(`"metrics":["visitors"],"pagination":{"page":2}`), "#/pagination/page: Schema does not allow additional properties."},
		{"bad shorthand", `{"site_id":"example.com","metrics":["visitors"],"date_range":"bad_period"}`, `#/date_range: Invalid date range "bad_period"`},
		{"24h is not in the source", `{"site_id":"example.com","metrics":["visitors"],"date_range":"24h"}`, `#/date_range: Invalid date range "24h"`},
		{"too many months", `{"site_id":"example.com","metrics":["visitors"],"date_range":"999999999mo"}`, `Invalid date_range "999999999mo"`},
		{"too many days", `{"site_id":"example.com","metrics":["visitors"],"date_range":"5001d"}`, `Invalid date_range "5001d"`},
		{"zero days", `{"site_id":"example.com","metrics":["visitors"],"date_range":"0d"}`, `Invalid date_range "0d"`},
		{"datetimes without offset", `{"site_id":"example.com","metrics":["visitors"],"date_range":["2021-02-03T00:00:00","2021-02-03T23:59:59"]}`,
			`Invalid date_range '["2021-02-03T00:00:00", "2021-02-03T23:59:59"]'.`},
		{"offset out of range", `{"site_id":"example.com","metrics":["visitors"],"date_range":["2021-02-03T00:00:00-25:00","2021-02-03T23:59:59-25:00"]}`,
			`#/date_range: Invalid date range ["2021-02-03T00:00:00-25:00", "2021-02-03T23:59:59-25:00"]`},
		{"date and datetime", `{"site_id":"example.com","metrics":["visitors"],"date_range":["2021-02-03T00:00:00Z","2021-02-04"]}`,
			`#/date_range: Invalid date range ["2021-02-03T00:00:00Z", "2021-02-04"]`},
		{"impossible date", `{"site_id":"example.com","metrics":["visitors"],"date_range":["2021-02-30","2021-03-01"]}`,
			`#/date_range: Invalid date range ["2021-02-30", "2021-03-01"]`},
		{"three dates", `{"site_id":"example.com","metrics":["visitors"],"date_range":["2021-02-01","2021-03-01","2021-03-02"]}`,
			`#/date_range: Invalid date range ["2021-02-01", "2021-03-01", "2021-03-02"]`},
		{"minute dimension", q(`"metrics":["visitors"],"dimensions":["time:minute"]`), `#/dimensions/0: Invalid dimension "time:minute"`},
		{"empty prop name", q(`"metrics":["visitors"],"dimensions":["event:props:"]`), `#/dimensions/0: Invalid dimension "event:props:"`},
		{"metric as dimension", q(`"metrics":["visitors"],"dimensions":["visitors"]`), `#/dimensions/0: Invalid dimension "visitors"`},
		{"dimensions string", q(`"metrics":["visitors"],"dimensions":"visit:browser"`), "#/dimensions: Type mismatch. Expected Array but got String."},
		{"duplicate dimensions", q(`"metrics":["visitors"],"dimensions":["visit:browser","visit:browser"]`), "#/dimensions: Expected items to be unique but they were not."},
		{"order_by value", q(`"metrics":["visitors"],"order_by":[["visssss","desc"]]`), `#/order_by/0/0: Invalid value in order_by "visssss"`},
		{"order_by direction", q(`"metrics":["visitors"],"order_by":[["visitors","up"]]`), "#/order_by/0/1: Value is not allowed in enum."},
		{"order_by goal", q(`"metrics":["visitors"],"dimensions":["event:goal"],"order_by":[["event:goal","asc"]]`),
			`#/order_by/0/0: Invalid value in order_by "event:goal"`},
		{"order_by metric not queried", q(`"metrics":["visitors"],"order_by":[["events","desc"]]`),
			"Invalid order_by entry '{:events, :desc}'. Entry is not a queried metric or dimension."},
		{"order_by dimension not queried", q(`"metrics":["visitors"],"order_by":[["event:name","desc"]]`),
			`Invalid order_by entry '{"event:name", :desc}'. Entry is not a queried metric or dimension.`},
		{"order_by time not queried", q(`"metrics":["visitors"],"dimensions":["time:day"],"order_by":[["time","asc"]]`),
			`Invalid order_by entry '{"time", :asc}'. Entry is not a queried metric or dimension.`},
		{"conversion rate without goal", q(`"metrics":["conversion_rate"]`),
			"Metric `conversion_rate` can only be queried with event:goal filters or dimensions."},
		{"group conversion rate with goal only in has_done", q(`"metrics":["group_conversion_rate"],"filters":[["has_done",["is","event:goal",["Signup"]]]]`),
			"Metric `group_conversion_rate` can only be queried with event:goal filters or dimensions."},
		{"scroll depth without page", q(`"metrics":["scroll_depth"]`),
			"Metric `scroll_depth` can only be queried with event:page filters or dimensions."},
		{"scroll depth with nested page filter", q(`"metrics":["scroll_depth"],"filters":[["and",[["is","event:page",["/"]]]]]`),
			"Metric `scroll_depth` can only be queried with event:page filters or dimensions."},
		{"time on page without page", q(`"metrics":["time_on_page"],"dimensions":["event:name"]`),
			"Metric `time_on_page` can only be queried with event:page filters or dimensions."},
		{"time on page with page only in has_done", q(`"metrics":["time_on_page"],"filters":[["has_done",["is","event:page",["/"]]]]`),
			"Metric `time_on_page` can only be queried with event:page filters or dimensions."},
		{"views per visit with page filter", q(`"metrics":["views_per_visit"],"filters":[["not",["is","event:page",["/"]]]]`),
			"Metric `views_per_visit` cannot be queried with a filter on `event:page`."},
		{"views per visit with dimension", q(`"metrics":["views_per_visit"],"dimensions":["time:day"]`),
			"Metric `views_per_visit` cannot be queried with `dimensions`."},
		{"metrics checked in order", q(`"metrics":["views_per_visit","conversion_rate"],"dimensions":["visit:source"]`),
			"Metric `views_per_visit` cannot be queried with `dimensions`."},
		{"session metric by prop", q(`"metrics":["bounce_rate"],"dimensions":["event:props:foo"]`),
			"Session metric(s) `bounce_rate` cannot be queried along with event dimension(s) `event:props:foo`"},
		{"session metrics by event dimensions", q(`"metrics":["visitors","bounce_rate","visit_duration"],"dimensions":["event:name","event:hostname"]`),
			"Session metric(s) `bounce_rate`, `visit_duration` cannot be queried along with event dimension(s) `event:name`, `event:hostname`"},
		{"session metric by page and hostname", q(`"metrics":["bounce_rate"],"dimensions":["event:page","event:hostname"]`),
			"Session metric(s) `bounce_rate` cannot be queried along with event dimension(s) `event:page`, `event:hostname`"},
		{"event metric by exit page", q(`"metrics":["events"],"dimensions":["visit:exit_page"]`),
			"Event metric(s) `events` cannot be queried along with session dimension(s) `visit:exit_page`"},
		{"event metrics by entry page", q(`"metrics":["pageviews","scroll_depth"],"dimensions":["visit:entry_page"],"filters":[["is","event:page",["/"]]]`),
			"Event metric(s) `pageviews`, `scroll_depth` cannot be queried along with session dimension(s) `visit:entry_page`"},
		{"invalid JSON", `{"site_id":`, "Invalid JSON body: unexpected EOF"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := parseErr(t, site, c.body); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	site := testSite()
	site.Goals = []Goal{{EventName: "Signup"}}
	for _, body := range []string{
		// event:page is the one event dimension session metrics take.
		`{"site_id":"example.com","metrics":["bounce_rate","visit_duration"],"date_range":"day","dimensions":["event:page"]}`,
		// percentage needs no dimension; visitors by entry page are fine.
		`{"site_id":"example.com","metrics":["percentage"],"date_range":"day"}`,
		`{"site_id":"example.com","metrics":["visitors"],"date_range":"day","dimensions":["visit:entry_page"]}`,
		// A goal filter with a modifier or contains is not checked.
		`{"site_id":"example.com","metrics":["visitors"],"date_range":"day","filters":[["is","event:goal",["nope"],{"case_sensitive":false}]]}`,
		`{"site_id":"example.com","metrics":["visitors"],"date_range":"day","filters":[["contains","event:goal",["nope"]]]}`,
		// Goals and hostnames may sit in has_done.
		`{"site_id":"example.com","metrics":["visitors"],"date_range":"day","filters":[["has_done",["is","event:goal",["Signup"]]]]}`,
		// time_on_page takes a nested page filter; integers work for cities.
		`{"site_id":"example.com","metrics":["time_on_page"],"date_range":"day","filters":[["or",[["is","event:page",["/a"]],["is","event:page",["/b"]]]]]}`,
		`{"site_id":"example.com","metrics":["visitors"],"date_range":"day","filters":[["is","visit:city",[588409]]]}`,
		`{"site_id":"example.com","metrics":["visitors"],"date_range":"day","pagination":{"limit":10000,"offset":0},"include":{"total_rows":true,"imports":false}}`,
	} {
		if _, err := Parse([]byte(body), site, now); err != nil {
			t.Errorf("Parse(%s): %v", body, err)
		}
	}
}

func TestSiteIDFromBody(t *testing.T) {
	if id, err := SiteIDFromBody([]byte(`{"site_id":"example.com"}`)); err != nil || id != "example.com" {
		t.Errorf("got %q, %v", id, err)
	}
	_, err := SiteIDFromBody([]byte(`{"metrics":["visitors"]}`))
	if err == nil || !strings.HasPrefix(err.Error(), "Missing site ID.") {
		t.Errorf("got %v", err)
	}
}

func TestTimeLabelsBounded(t *testing.T) {
	msg := parseErr(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":["1900-01-01","2100-01-01"],"dimensions":["time:hour"],"include":{"time_labels":true}}`)
	if msg != "Invalid include.time_labels: the range has more than 1000000 time buckets." {
		t.Errorf("got %q", msg)
	}
}
