package plausible

import (
	"strings"
	"testing"
)

func TestMultipleDimensions(t *testing.T) {
	events := []Event{
		with(pv(1, "2024-07-10T08:00:00Z", "/a"), func(e *Event) { e.ReferrerHost = "x.com" }),
		pv(1, "2024-07-10T08:01:00Z", "/b"),
		with(pv(2, "2024-07-10T09:00:00Z", "/a"), func(e *Event) { e.ReferrerHost = "y.com" }),
		pv(3, "2024-07-10T10:00:00Z", "/a"),
	}
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","pageviews"],"date_range":"day","dimensions":["event:page","visit:source"]}`, events...)
	// Each event with its visit's source; ties in visitors (all 1) by page
	// then source.
	checkResults(t, res, `[{"dimensions":["/a","Direct / None"],"metrics":[1,1]},{"dimensions":["/a","x.com"],"metrics":[1,1]},{"dimensions":["/a","y.com"],"metrics":[1,1]},{"dimensions":["/b","x.com"],"metrics":[1,1]}]`)
}

func TestOrderPaginationTotalRows(t *testing.T) {
	events := pageEvents("/c", "/a", "/b", "/a", "/d", "/a", "/b")
	// /a 3, /b 2, then /c and /d with 1 each (tie broken by page).
	body := `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","dimensions":["event:page"],"pagination":{"limit":2,"offset":1},"include":{"total_rows":true}}`
	res := run(t, testSite(), body, events...)
	checkResults(t, res, `[{"dimensions":["/b"],"metrics":[2]},{"dimensions":["/c"],"metrics":[1]}]`)
	b, _ := res.MarshalJSON()
	if !strings.Contains(string(b), `"meta":{"total_rows":4}`) {
		t.Errorf("meta: %s", b)
	}
	// Explicit order: by page descending.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","dimensions":["event:page"],"order_by":[["event:page","desc"]]}`, events...)
	checkResults(t, res, `[{"dimensions":["/d"],"metrics":[1]},{"dimensions":["/c"],"metrics":[1]},{"dimensions":["/b"],"metrics":[2]},{"dimensions":["/a"],"metrics":[3]}]`)
	// Past the end: no rows, total_rows still 4.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","dimensions":["event:page"],"pagination":{"offset":10},"include":{"total_rows":true}}`, events...)
	b, _ = res.MarshalJSON()
	if !strings.HasPrefix(string(b), `{"results":[],"meta":{"total_rows":4}`) {
		t.Errorf("got %s", b)
	}
}

func TestTimeDimensionsAndLabels(t *testing.T) {
	events := []Event{
		pv(1, "2024-07-03T08:00:00Z", "/"), // Wednesday
		pv(2, "2024-07-07T08:00:00Z", "/"), // Sunday
		pv(3, "2024-07-08T08:00:00Z", "/"), // Monday
		pv(4, "2024-07-16T08:00:00Z", "/"), // Tuesday
	}
	// Weeks from a Wednesday: the first bucket is clamped to the range's
	// first day. Labels: 07-03 + k weeks, as its Monday when that is in
	// the range.
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":["2024-07-03","2024-07-16"],"dimensions":["time:week"],"include":{"time_labels":true}}`, events...)
	checkResults(t, res, `[{"dimensions":["2024-07-03"],"metrics":[2]},{"dimensions":["2024-07-08"],"metrics":[1]},{"dimensions":["2024-07-15"],"metrics":[1]}]`)
	b, _ := res.MarshalJSON()
	if !strings.Contains(string(b), `"meta":{"time_labels":["2024-07-03","2024-07-08","2024-07-15"]}`) {
		t.Errorf("week labels: %s", b)
	}
	// Months are not clamped; labels are first days of months.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":["2024-05-20","2024-07-05"],"dimensions":["time:month"],"include":{"time_labels":true}}`, events...)
	checkResults(t, res, `[{"dimensions":["2024-07-01"],"metrics":[1]}]`)
	b, _ = res.MarshalJSON()
	if !strings.Contains(string(b), `"time_labels":["2024-05-01","2024-06-01","2024-07-01"]`) {
		t.Errorf("month labels: %s", b)
	}
	// Days, no zero-filling of rows.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":["2024-07-06","2024-07-08"],"dimensions":["time:day"],"include":{"time_labels":true}}`, events...)
	checkResults(t, res, `[{"dimensions":["2024-07-07"],"metrics":[1]},{"dimensions":["2024-07-08"],"metrics":[1]}]`)
	b, _ = res.MarshalJSON()
	if !strings.Contains(string(b), `"time_labels":["2024-07-06","2024-07-07","2024-07-08"]`) {
		t.Errorf("day labels: %s", b)
	}
	// "time" resolves by the range; order defaults to time ascending.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["pageviews"],"date_range":"7d","dimensions":["time"]}`, events...)
	checkResults(t, res, `[{"dimensions":["2024-07-03"],"metrics":[1]},{"dimensions":["2024-07-07"],"metrics":[1]},{"dimensions":["2024-07-08"],"metrics":[1]}]`)
}

func TestHourLabels(t *testing.T) {
	q, err := Parse([]byte(`{"site_id":"example.com","metrics":["visitors"],"date_range":"day","dimensions":["time"],"include":{"time_labels":true,"trim_relative_date_range":true}}`), testSite(), now)
	if err != nil {
		t.Fatal(err)
	}
	labels := timeLabels(q)
	// Trimmed to 15:59:59 local: 00:00 to 15:00, 16 labels.
	if len(labels) != 16 || labels[0] != "2024-07-10 00:00:00" || labels[15] != "2024-07-10 15:00:00" {
		t.Errorf("got %v", labels)
	}
	// The day the clocks go back has 25 hours, and its labels step the
	// naive local time: 00:00 .. 23:00 plus the next day's 00:00.
	q, _ = Parse([]byte(`{"site_id":"example.com","metrics":["visitors"],"date_range":["2024-10-27","2024-10-27"],"dimensions":["time:hour"],"include":{"time_labels":true}}`), testSite(), now)
	labels = timeLabels(q)
	if len(labels) != 25 || labels[24] != "2024-10-28 00:00:00" {
		t.Errorf("fall back: %d labels, last %s", len(labels), labels[len(labels)-1])
	}
}

func TestDimensionLabels(t *testing.T) {
	events := []Event{
		with(pv(1, "2024-07-10T08:00:00Z", "/"), func(e *Event) {
			e.Device, e.Browser, e.BrowserVersion, e.OS, e.OSVersion = "mobile", "Safari", "17.4", "iOS", "17.4"
		}),
		with(pv(2, "2024-07-10T08:00:00Z", "/"), func(e *Event) { e.Device = "desktop"; e.Hostname = "" }),
	}
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","dimensions":["visit:device","visit:browser","visit:browser_version","visit:os","visit:os_version"]}`, events...)
	checkResults(t, res, `[{"dimensions":["Desktop","(not set)","(not set)","(not set)","(not set)"],"metrics":[1]},{"dimensions":["Mobile","Safari","17.4","iOS","17.4"],"metrics":[1]}]`)
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","filters":[["is","visit:device",["Mobile"]]]}`, events...)
	checkResults(t, res, `[{"dimensions":[],"metrics":[1]}]`)
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors"],"date_range":"day","dimensions":["event:hostname"]}`, events...)
	checkResults(t, res, `[{"dimensions":[""],"metrics":[1]},{"dimensions":["example.com"],"metrics":[1]}]`)
	// event:name lists pageview, custom names, and engagement.
	res = run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","events"],"date_range":"day","dimensions":["event:name"]}`,
		pv(1, "2024-07-10T08:00:00Z", "/"), engage(1, "2024-07-10T08:00:10Z", "/", 1000, 5), custom(1, "2024-07-10T08:00:20Z", "Signup"))
	checkResults(t, res, `[{"dimensions":["Signup"],"metrics":[1,1]},{"dimensions":["engagement"],"metrics":[1,0]},{"dimensions":["pageview"],"metrics":[1,1]}]`)
}

func TestHostnameFilterExtendsToEntryPage(t *testing.T) {
	events := []Event{
		with(pv(1, "2024-07-10T08:00:00Z", "/"), func(e *Event) { e.Hostname = "a.example.com"; e.ReferrerHost = "x.com" }),
		with(pv(1, "2024-07-10T08:01:00Z", "/"), func(e *Event) { e.Hostname = "b.example.com" }),
		with(pv(2, "2024-07-10T09:00:00Z", "/"), func(e *Event) { e.Hostname = "b.example.com"; e.ReferrerHost = "y.com" }),
	}
	q, err := Parse([]byte(`{"site_id":"example.com","metrics":["visitors"],"date_range":"day","dimensions":["visit:source"],"filters":[["is","event:hostname",["b.example.com"]]]}`), testSite(), now)
	if err != nil {
		t.Fatal(err)
	}
	// The optimizer adds the same filter on the entry page hostname, so
	// visitor 1 (entered on a.) is not counted under x.com.
	if len(q.Filters) != 2 || q.Filters[1].Dimension != "visit:entry_page_hostname" {
		t.Fatalf("filters %+v", q.Filters)
	}
	res, err := Evaluate(q, &sliceSource{events: events}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	checkResults(t, res, `[{"dimensions":["y.com"],"metrics":[1]}]`)
	if _, ok := q.SimpleFilters(); !ok {
		t.Error("a plain and of leaves should be simple")
	}
}

func TestResponseJSON(t *testing.T) {
	res := run(t, testSite(), `{"site_id":"example.com","metrics":["visitors","views_per_visit"],"date_range":"day","filters":[["is","visit:city",[588409]],["or",[["contains","event:name",["a"],{"case_sensitive":false}],["not",["has_done",["is","event:page",["/x"],{}]]]]]],"include":{"imports":true,"total_rows":true}}`)
	b, err := res.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"results":[{"dimensions":[],"metrics":[0,0.0]}],` +
		`"meta":{"imports_included":false,"imports_skip_reason":"no_imported_data","total_rows":1},` +
		`"query":{"site_id":"example.com","metrics":["visitors","views_per_visit"],` +
		`"date_range":["2024-07-10T00:00:00+03:00","2024-07-10T23:59:59+03:00"],` +
		`"filters":[["is","visit:city",[588409]],["or",[["contains","event:name",["a"],{"case_sensitive":false}],["not",["has_done",["is","event:page",["/x"],{}]]]]]],` +
		`"dimensions":[],"order_by":[["visitors","desc"]],"include":{"imports":true,"total_rows":true},` +
		`"pagination":{"limit":10000,"offset":0}}}`
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
}

func TestFloatEncoding(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{0, "0.0"}, {1.5, "1.5"}, {100, "100.0"}, {12.5, "12.5"}, {1.67, "1.67"}, {0.05, "0.05"},
		{0.5, "0.5"}, {33.33, "33.33"}, {10, "10.0"}, {1000, "1.0e3"}, {1200, "1.2e3"}, {0.0001, "1.0e-4"},
		{123.45, "123.45"},
	} {
		if got := string(appendErlangFloat(nil, c.f)); got != c.want {
			t.Errorf("%v: %s; want %s", c.f, got, c.want)
		}
	}
}

func TestQueryForTheAggregator(t *testing.T) {
	q, err := Parse([]byte(`{"site_id":"example.com","metrics":["visitors","pageviews"],"date_range":"7d","dimensions":["time","visit:source"],"filters":[["is","visit:browser",["Firefox"]],["contains","event:page",["/blog"],{"case_sensitive":false}]]}`), testSite(), now)
	if err != nil {
		t.Fatal(err)
	}
	if !q.From.Equal(mustTime("2024-07-02T21:00:00Z")) || !q.To.Equal(mustTime("2024-07-09T21:00:00Z")) {
		t.Errorf("range [%v, %v)", q.From, q.To)
	}
	if q.Timezone.String() != "Europe/Tallinn" || q.DateRange != "7d" || q.TimeDimension() != "time:day" {
		t.Errorf("tz %v, range %q, time %q", q.Timezone, q.DateRange, q.TimeDimension())
	}
	leaves, ok := q.SimpleFilters()
	if !ok || len(leaves) != 2 || leaves[1].Op != OpContains || leaves[1].CaseSensitive || leaves[1].Values[0] != "/blog" {
		t.Errorf("simple filters %+v, %v", leaves, ok)
	}
	if len(q.OrderBy) != 2 || q.OrderBy[0] != (Order{Key: "time:day"}) || q.OrderBy[1] != (Order{Key: "visitors", Desc: true}) {
		t.Errorf("order %+v", q.OrderBy)
	}
	q, _ = Parse([]byte(`{"site_id":"example.com","metrics":["visitors"],"date_range":"day","filters":[["not",["is","visit:browser",["Firefox"]]]]}`), testSite(), now)
	if _, ok := q.SimpleFilters(); ok {
		t.Error("a not tree is not simple")
	}
}

func TestConcurrentEvaluate(t *testing.T) {
	q, err := Parse([]byte(`{"site_id":"example.com","metrics":["visitors","conversion_rate"],"date_range":"day","dimensions":["event:goal"]}`), goalSite(), now)
	if err != nil {
		t.Fatal(err)
	}
	src := &benchSource{events: goalEvents()}
	done := make(chan string, 4)
	for i := 0; i < 4; i++ {
		go func() {
			res, err := Evaluate(q, src, Config{})
			if err != nil {
				done <- err.Error()
				return
			}
			b, _ := res.MarshalJSON()
			done <- string(b)
		}()
	}
	first := <-done
	for i := 1; i < 4; i++ {
		if got := <-done; got != first {
			t.Errorf("concurrent answers differ:\n%s\n%s", first, got)
		}
	}
}

func TestNewResultMatchesEvaluate(t *testing.T) {
	body := `{"site_id":"example.com","metrics":["visitors"],"date_range":["2024-07-06","2024-07-08"],"dimensions":["time:day"],"include":{"time_labels":true,"total_rows":true}}`
	res := run(t, testSite(), body, pv(1, "2024-07-07T08:00:00Z", "/"))
	q, _ := Parse([]byte(body), testSite(), now)
	again := NewResult(q, []Row{{Dimensions: []Value{StringValue("2024-07-07")}, Metrics: []Value{IntValue(1)}}}, 1)
	a, _ := res.MarshalJSON()
	b, _ := again.MarshalJSON()
	if string(a) != string(b) {
		t.Errorf("Evaluate\n%s\nNewResult\n%s", a, b)
	}
}
