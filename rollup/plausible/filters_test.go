package plausible

import "testing"

func browser(b string) func(*Event) { return func(e *Event) { e.Browser = b } }

// pageEvents: one visitor per page, the page named by the test.
func pageEvents(paths ...string) []Event {
	var out []Event
	for i, p := range paths {
		out = append(out, pv(uint64(i+1), "2024-07-10T08:00:00Z", p))
	}
	return out
}

func TestFilterOperators(t *testing.T) {
	events := pageEvents("/Blog", "/blog/post", "/about", "/blog")
	cases := []struct {
		filter string
		want   int // visitors
	}{
		{`["is","event:page",["/blog"]]`, 1},                                                      // exact, case-sensitive
		{`["is","event:page",["/blog"],{"case_sensitive":false}]`, 2},                             // /Blog, /blog
		{`["is","event:page",["/blog","/about"]]`, 2},                                             // any clause
		{`["is_not","event:page",["/blog","/about"]]`, 2},                                         // /Blog, /blog/post
		{`["is_not","event:page",["/BLOG"],{"case_sensitive":false}]`, 2},                         // /blog/post, /about
		{`["contains","event:page",["log"]]`, 3},                                                  // /Blog, /blog/post, /blog
		{`["contains","event:page",["BLOG"],{"case_sensitive":false}]`, 3},                        //
		{`["contains","event:page",["BLOG"]]`, 0},                                                 //
		{`["contains_not","event:page",["blog"]]`, 2},                                             // /Blog, /about
		{`["contains_not","event:page",["blog"],{"case_sensitive":false}]`, 1},                    // /about
		{`["matches","event:page",["^/b.*g$"]]`, 1},                                               // /blog (unanchored RE2, anchors given)
		{`["matches","event:page",["post","out"]]`, 2},                                            // /blog/post, /about
		{`["matches_not","event:page",["^/[a-z]+$"]]`, 2},                                         // /Blog, /blog/post
		{`["is","event:page",["(not set)"]]`, 0},                                                  // no empty paths
		{`["is","event:hostname",["example.com"]]`, 4},                                            //
		{`["and",[["contains","event:page",["blog"]],["not",["is","event:page",["/blog"]]]]]`, 1}, // /blog/post
		{`["or",[["is","event:page",["/about"]],["matches","event:page",["^/B"]]]]`, 2},           // /about, /Blog
		{`["not",["or",[["is","event:page",["/about"]],["is","event:page",["/blog"]]]]]`, 2},      // /Blog, /blog/post
	}
	for _, c := range cases {
		res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","filters":[`+c.filter+`]}`, events...)
		want := `[{"dimensions":[],"metrics":[` + itoa(c.want) + `]}]`
		if got := results(t, res); got != want {
			t.Errorf("%s: got %s; want %s", c.filter, got, want)
		}
	}
}

func TestEventNameOperatorsWork(t *testing.T) {
	// Plausible's SQL builder only handles is for event:name (every other
	// operator matches nothing). Waymark applies them as on any dimension.
	events := []Event{
		pv(1, "2024-07-10T08:00:00Z", "/"),
		custom(1, "2024-07-10T08:00:10Z", "Signup"),
		custom(2, "2024-07-10T08:00:00Z", "Download"),
	}
	cases := []struct {
		filter string
		want   string // events
	}{
		{`["is","event:name",["pageview"]]`, "1"},
		{`["is","event:name",["signup"],{"case_sensitive":false}]`, "1"},
		{`["is_not","event:name",["pageview"]]`, "2"},
		{`["contains","event:name",["load"]]`, "1"},
		{`["contains_not","event:name",["Sign"]]`, "2"},
		{`["matches","event:name",["^(Signup|Download)$"]]`, "2"},
		{`["matches_not","event:name",["up$"]]`, "2"},
	}
	for _, c := range cases {
		res := run(t, testSite(), `{"site_id":"example.com","metrics":["events"],"date_range":"day","filters":[`+c.filter+`]}`, events...)
		if got, want := results(t, res), `[{"dimensions":[],"metrics":[`+c.want+`]}]`; got != want {
			t.Errorf("%s: got %s; want %s", c.filter, got, want)
		}
	}
}

func TestDirectNoneAndNotSet(t *testing.T) {
	events := []Event{
		with(pv(1, "2024-07-10T08:00:00Z", "/"), func(e *Event) { e.ReferrerHost = "www.google.com"; e.Browser = "Firefox" }),
		with(pv(2, "2024-07-10T08:00:00Z", "/"), func(e *Event) { e.UTMSource = "newsletter"; e.UTMMedium = "email" }),
		pv(3, "2024-07-10T08:00:00Z", "/"), // direct, no browser
	}
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","dimensions":["visit:source"]}`, events...)
	// The default source: utm_source, else the referrer host without www.
	checkResults(t, res, `[{"dimensions":["Direct / None"],"metrics":[1]},{"dimensions":["google.com"],"metrics":[1]},{"dimensions":["newsletter"],"metrics":[1]}]`)
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","dimensions":["visit:browser","visit:utm_medium","visit:channel"]}`, events...)
	checkResults(t, res, `[{"dimensions":["(not set)","(not set)","Direct"],"metrics":[1]},{"dimensions":["(not set)","email","Email"],"metrics":[1]},{"dimensions":["Firefox","(not set)","Referral"],"metrics":[1]}]`)

	cases := []struct {
		filter string
		want   int
	}{
		{`["is","visit:source",["Direct / None"]]`, 1},
		{`["is_not","visit:source",["Direct / None"]]`, 2},
		{`["is","visit:browser",["(not set)"]]`, 2},
		{`["is","visit:utm_source",["(not set)"]]`, 2},
		// A contains clause that "Direct / None" contains also matches an
		// empty source; case-folded with case_sensitive false.
		{`["contains","visit:source",["Direct"]]`, 1},
		{`["contains","visit:source",["direct"]]`, 0},
		{`["contains","visit:source",["direct"],{"case_sensitive":false}]`, 1},
		{`["contains","visit:source",["oogle"]]`, 1},
		{`["contains","visit:source",["e"]]`, 3}, // google.com, newsletter, and "e" is in "None"
		{`["contains_not","visit:source",["Direct"]]`, 2},
		// Only source-like fields have "Direct / None".
		{`["contains","visit:browser",["Direct"]]`, 0},
		{`["is","visit:channel",["Email"]]`, 1},
		{`["is","visit:channel",["direct"],{"case_sensitive":false}]`, 1},
	}
	for _, c := range cases {
		res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","filters":[`+c.filter+`]}`, events...)
		if got, want := results(t, res), `[{"dimensions":[],"metrics":[`+itoa(c.want)+`]}]`; got != want {
			t.Errorf("%s: got %s; want %s", c.filter, got, want)
		}
	}
}

func TestCaseInsensitiveIsASCIIOnTheColumn(t *testing.T) {
	// ClickHouse lower() folds ASCII only; the clause is downcased fully.
	events := []Event{with(pv(1, "2024-07-10T08:00:00Z", "/"), func(e *Event) { e.Browser = "ÉDGE" })}
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","filters":[["is","visit:browser",["édge"],{"case_sensitive":false}]]}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[0]}]`)
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","filters":[["is","visit:browser",["Édge"],{"case_sensitive":false}]]}`, events...)
	// lower("ÉDGE") = "Édge"; downcase("Édge") = "édge": no match either.
	checkResults(t, res, `[{"dimensions":[],"metrics":[0]}]`)
}

func TestEventFiltersOnVisitMetrics(t *testing.T) {
	events := []Event{
		// Visit 1 views /pricing then signs up; visit 2 signs up on /; visit
		// 3 only views /pricing.
		pv(1, "2024-07-10T08:00:00Z", "/pricing"),
		with(custom(1, "2024-07-10T08:01:00Z", "Signup"), func(e *Event) { e.Path = "/" }),
		pv(2, "2024-07-10T09:00:00Z", "/"),
		custom(2, "2024-07-10T09:02:00Z", "Signup"),
		pv(3, "2024-07-10T10:00:00Z", "/pricing"),
	}
	// A visit qualifies when one event matches every event filter at once:
	// a Signup on /pricing happened in none.
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visits","bounce_rate"],"date_range":"day","filters":[["is","event:name",["Signup"]],["is","event:page",["/pricing"]]]}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[0,0]}]`)
	// has_done checks separate events: viewed /pricing and signed up:
	// visit 1 only, not a bounce, 60 s.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visits","bounce_rate","visit_duration"],"date_range":"day","filters":[["has_done",["is","event:page",["/pricing"]]],["has_done",["is","event:name",["Signup"]]]]}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[1,0,60]}]`)
	// has_not_done: visits that never signed up: visit 3, a bounce.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visits","bounce_rate"],"date_range":"day","filters":[["has_not_done",["is","event:name",["Signup"]]]]}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[1,100]}]`)
	// On event metrics, has_done keeps the events of qualifying visits:
	// visits that signed up (1, 2) had 2 pageviews.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["pageviews","events"],"date_range":"day","filters":[["has_done",["is","event:name",["Signup"]]]]}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[2,4]}]`)
	// An event filter keeps visits, events and bounces consistent: visits
	// with a pageview of /pricing: 1 and 3, 2 visitors; 1 bounced.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","visits","pageviews"],"date_range":"day","filters":[["is","event:page",["/pricing"]]]}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[2,2,2]}]`)
}

func TestVisitOnlyFiltersOnEventMetrics(t *testing.T) {
	events := []Event{
		pv(1, "2024-07-10T08:00:00Z", "/a"), pv(1, "2024-07-10T08:01:00Z", "/b"),
		pv(2, "2024-07-10T09:00:00Z", "/b"),
	}
	// Events of visits that entered on /a: 2 pageviews; exited on /b: all.
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["pageviews"],"date_range":"day","filters":[["is","visit:entry_page",["/a"]]]}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[2]}]`)
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["pageviews"],"date_range":"day","filters":[["is","visit:exit_page",["/b"]]]}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[3]}]`)
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","filters":[["is","visit:entry_page_hostname",["example.com"]]]}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[2]}]`)
}

func TestPropsFiltersAndNone(t *testing.T) {
	plan := func(v string) func(*Event) {
		return func(e *Event) { e.Props = []Prop{{Key: "plan", Value: v}, {Key: "plan", Value: "ignored"}} }
	}
	events := []Event{
		with(custom(1, "2024-07-10T08:00:00Z", "Signup"), plan("Pro")),
		with(custom(2, "2024-07-10T08:00:00Z", "Signup"), plan("free")),
		custom(3, "2024-07-10T08:00:00Z", "Signup"), // no plan
	}
	cases := []struct {
		filter string
		want   int // events
	}{
		{`["is","event:props:plan",["Pro"]]`, 1},
		{`["is","event:props:plan",["pro"],{"case_sensitive":false}]`, 1},
		{`["is","event:props:plan",["(none)"]]`, 1},        // events without the key
		{`["is","event:props:plan",["free","(none)"]]`, 2}, //
		{`["is_not","event:props:plan",["Pro"]]`, 2},       // free, and the one without
		{`["is_not","event:props:plan",["(none)"]]`, 2},    // only events with the key
		{`["is_not","event:props:plan",["Pro","(none)"]]`, 1},
		{`["contains","event:props:plan",["r"]]`, 2},
		{`["contains_not","event:props:plan",["r"]]`, 0}, // needs the key
		{`["matches","event:props:plan",["^P"]]`, 1},
		{`["matches_not","event:props:plan",["^P"]]`, 1}, // free; not the one without
		{`["is","event:props:other",["(none)"]]`, 3},
		{`["is","event:props:plan",["ignored"]]`, 0}, // the first value of a key counts
	}
	for _, c := range cases {
		res := run(t, testSite(), `{"site_id":"example.com","metrics":["events"],"date_range":"day","filters":[`+c.filter+`]}`, events...)
		if got, want := results(t, res), `[{"dimensions":[],"metrics":[`+itoa(c.want)+`]}]`; got != want {
			t.Errorf("%s: got %s; want %s", c.filter, got, want)
		}
	}
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","events"],"date_range":"day","dimensions":["event:props:plan"]}`,
		append(events, pv(1, "2024-07-10T08:00:05Z", "/"))...)
	// Events without the key (the pageview and visitor 3's signup) group
	// as "(none)".
	checkResults(t, res, `[{"dimensions":["(none)"],"metrics":[2,2]},{"dimensions":["Pro"],"metrics":[1,1]},{"dimensions":["free"],"metrics":[1,1]}]`)
}

func TestCityAndCountry(t *testing.T) {
	events := []Event{
		with(pv(1, "2024-07-10T08:00:00Z", "/"), func(e *Event) { e.Country = "EE"; e.Region = "EE-37"; e.City = "588409" }),
		pv(2, "2024-07-10T08:00:00Z", "/"),
	}
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","dimensions":["visit:country","visit:region","visit:city"]}`, events...)
	// Unknown geography is shown raw: an empty FixedString(2), "", city 0.
	checkResults(t, res, `[{"dimensions":["\u0000\u0000","",0],"metrics":[1]},{"dimensions":["EE","EE-37",588409],"metrics":[1]}]`)
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","filters":[["is","visit:city",[588409]],["is","visit:country",["EE"]]]}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[1]}]`)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}
