package plausible

import "testing"

func goalSite() Site {
	s := testSite()
	s.Goals = []Goal{
		{ID: "g1", EventName: "Signup"},
		{ID: "g2", PagePath: "/blog/*"},  // "Visit /blog/*"
		{ID: "g3", PagePath: "/pricing"}, // "Visit /pricing"
		{ID: "g4", EventName: "Purchase", DisplayName: " Paid ", CustomProps: []Prop{{Key: "plan", Value: "pro"}}},
	}
	return s
}

func goalEvents() []Event {
	src := func(s string) func(*Event) { return func(e *Event) { e.UTMSource = s } }
	return []Event{
		// Visitor 1 (from a): reads two blog posts, signs up twice.
		with(pv(1, "2024-07-10T08:00:00Z", "/blog/a/b"), src("a")),
		pv(1, "2024-07-10T08:01:00Z", "/blog/c"),
		custom(1, "2024-07-10T08:02:00Z", "Signup"),
		custom(1, "2024-07-10T08:03:00Z", "Signup"),
		// Visitor 2 (from a): views /blog (no trailing part: * needs "/"
		// after /blog) and /pricing.
		with(pv(2, "2024-07-10T09:00:00Z", "/blog"), src("a")),
		pv(2, "2024-07-10T09:01:00Z", "/pricing"),
		// Visitor 3 (from b): buys pro, then free.
		with(custom(3, "2024-07-10T10:00:00Z", "Purchase"), func(e *Event) { e.UTMSource = "b"; e.Props = []Prop{{Key: "plan", Value: "pro"}} }),
		with(custom(3, "2024-07-10T10:01:00Z", "Purchase"), func(e *Event) { e.Props = []Prop{{Key: "plan", Value: "free"}} }),
		// Visitor 4 (from b): just the home page.
		with(pv(4, "2024-07-10T11:00:00Z", "/"), src("b")),
	}
}

func TestGoalDisplayNames(t *testing.T) {
	for _, c := range []struct {
		g    Goal
		want string
	}{
		{Goal{EventName: "Signup"}, "Signup"},
		{Goal{PagePath: "/blog/*"}, "Visit /blog/*"},
		{Goal{EventName: "Purchase", DisplayName: " Paid "}, "Paid"},
	} {
		if got := c.g.Name(); got != c.want {
			t.Errorf("%+v: %q; want %q", c.g, got, c.want)
		}
	}
}

func TestGoalDimension(t *testing.T) {
	res := run(t, goalSite(), `{"site_id":"example.com","metrics":["visitors","events","conversion_rate"],"date_range":"day","dimensions":["event:goal"]}`, goalEvents()...)
	// 4 visitors in all. Signup: visitor 1, 2 events, 1/4 = 25.0.
	// Visit /blog/*: * crosses "/", so /blog/a/b and /blog/c: visitor 1,
	// 2 pageviews. Visit /pricing: visitor 2. Paid (Purchase with
	// plan=pro): visitor 3, 1 event.
	checkResults(t, res, `[{"dimensions":["Signup"],"metrics":[1,2,25.0]},{"dimensions":["Visit /blog/*"],"metrics":[1,2,25.0]},{"dimensions":["Visit /pricing"],"metrics":[1,1,25.0]},{"dimensions":["Paid"],"metrics":[1,1,25.0]}]`)

	// Top-level goal filters narrow the goals considered.
	res = run(t, goalSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","dimensions":["event:goal"],"filters":[["contains","event:goal",["visit"],{"case_sensitive":false}]]}`, goalEvents()...)
	checkResults(t, res, `[{"dimensions":["Visit /blog/*"],"metrics":[1]},{"dimensions":["Visit /pricing"],"metrics":[1]}]`)
}

func TestGoalFilterConversionRates(t *testing.T) {
	res := run(t, goalSite(), `{"site_id":"example.com","metrics":["visitors","events","conversion_rate"],"date_range":"day","filters":[["is","event:goal",["Signup","Visit /pricing"]]]}`, goalEvents()...)
	// Converted: visitors 1 (2 signups) and 2 (1 pricing view): 2 of 4 =
	// 50.0.
	checkResults(t, res, `[{"dimensions":[],"metrics":[2,3,50.0]}]`)

	// By source: conversion_rate over all 4 visitors, group_conversion_rate
	// over the source's. Source a: visitors 1 and 2 converted (2/4 = 50.0,
	// 2/2 = 100.0); b: nobody, so no row.
	res = run(t, goalSite(), `{"site_id":"example.com","metrics":["visitors","conversion_rate","group_conversion_rate"],"date_range":"day","dimensions":["visit:source"],"filters":[["is","event:goal",["Signup","Visit /pricing"]]]}`, goalEvents()...)
	checkResults(t, res, `[{"dimensions":["a"],"metrics":[2,50.0,100.0]}]`)

	// Paid needs plan=pro: visitor 3 of source b (1 of 2 there).
	res = run(t, goalSite(), `{"site_id":"example.com","metrics":["visitors","events","group_conversion_rate"],"date_range":"day","dimensions":["visit:source"],"filters":[["is","event:goal",["Paid"]]]}`, goalEvents()...)
	checkResults(t, res, `[{"dimensions":["b"],"metrics":[1,1,50.0]}]`)

	// A goal filter with visit metrics: visits that converted.
	res = run(t, goalSite(), `{"site_id":"example.com","metrics":["visits","bounce_rate","views_per_visit"],"date_range":"day","filters":[["is","event:goal",["Visit /pricing"]]]}`, goalEvents()...)
	// Visit 2: 2 pageviews, not a bounce.
	checkResults(t, res, `[{"dimensions":[],"metrics":[1,0,2.0]}]`)
}

func TestGoalFilterWithProps(t *testing.T) {
	// CR's denominator drops top-level goal and props filters: 4 visitors.
	res := run(t, goalSite(), `{"site_id":"example.com","metrics":["visitors","conversion_rate"],"date_range":"day","filters":[["is","event:goal",["Signup"]],["is","event:props:plan",["(none)"]]]}`, goalEvents()...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[1,25.0]}]`)
}

func TestPageGoalPatternQuirks(t *testing.T) {
	site := testSite()
	site.Goals = []Goal{{PagePath: "/a|/b"}}
	events := pageEvents("/a|/b", "/a/x", "/b")
	// The goal dimension always matches page_regex: ^/a|/b$ is "starts
	// with /a" or "ends with /b", so all three.
	res := run(t, site, `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","dimensions":["event:goal"]}`, events...)
	checkResults(t, res, `[{"dimensions":["Visit /a|/b"],"metrics":[3]}]`)
	// The goal filter compares a path without "*" literally.
	res = run(t, site, `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","filters":[["is","event:goal",["Visit /a|/b"]]]}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[1]}]`)
}

func TestGroupConversionRateByGoalIsZero(t *testing.T) {
	// Plausible's group totals sub-query runs with no goals for the
	// event:goal dimension, so it has no rows and every rate is 0.0
	// (replicated).
	res := run(t, goalSite(), `{"site_id":"example.com","metrics":["visitors","group_conversion_rate"],"date_range":"day","dimensions":["event:goal"]}`, goalEvents()...)
	checkResults(t, res, `[{"dimensions":["Signup"],"metrics":[1,0.0]},{"dimensions":["Visit /blog/*"],"metrics":[1,0.0]},{"dimensions":["Visit /pricing"],"metrics":[1,0.0]},{"dimensions":["Paid"],"metrics":[1,0.0]}]`)
}

func TestGroupConversionRateAloneByPage(t *testing.T) {
	site := testSite()
	site.Goals = []Goal{{EventName: "Signup"}}
	res := run(t, site, `{"site_id":"example.com","metrics":["group_conversion_rate"],"date_range":"day","dimensions":["event:page"],"filters":[["is","event:goal",["Signup"]]]}`,
		pv(1, "2024-07-10T08:00:00Z", "/register"),
		with(custom(2, "2024-07-10T08:00:00Z", "Signup"), func(e *Event) { e.Path = "/register" }),
		pv(3, "2024-07-10T08:00:00Z", "/"),
	)
	// /register: 1 converter of its 2 visitors = 50.0; visitors is added
	// internally but not returned.
	checkResults(t, res, `[{"dimensions":["/register"],"metrics":[50.0]}]`)
}
