package clickhouse

import (
	"fmt"
	"testing"
	"time"

	"github.com/waymark/waymark/ingest"
)

// CountEvents and TailEvents answer the embedded store's Count and Tail
// with the same filters, each record once though stored twice (the
// identity lost between the insert and its record). Hand counts: link
// "go.example/k1" has 3 clicks, one a bot; link k2 2 clicks; site s1 2
// pageviews and a bot pageview; 8 events in all, 2 bots.
func TestEventsCountAndTail(t *testing.T) {
	c := newClient(t, sharedServer(t))
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 3))
	k1 := "go.example/k1" // a domain's link id: "/" in the answers
	evs := []ingest.Event{
		click(k1, at(0, 10, 0, 0, 0), 1, false),
		click(k1, at(0, 10, 0, 0, 5), 2, true),
		click("k2", at(0, 11, 0, 0, 0), 3, false),
		siteEvent(ingest.KindPageview, "pageview", at(0, 12, 0, 0, 0), 4, false),
		siteEvent(ingest.KindPageview, "pageview", at(0, 12, 30, 0, 0), 4, true),
	}
	evs[0].Path, evs[0].ReferrerHost, evs[0].Device, evs[0].Browser = "/a/b", "news.example", "desktop", "Firefox"
	raw1 := segment("e1", 1, evs)
	evs2 := []ingest.Event{
		// Two days later: a tail of 2 reads the newest day only.
		click(k1, at(2, 9, 0, 0, 0), 5, false),
		click("k2", at(2, 9, 0, 0, 0), 6, false),
		siteEvent(ingest.KindPageview, "pageview", at(2, 9, 0, 1, 0), 7, false),
	}
	raw2 := segment("e2", 2, evs2)
	mustStore(t, b, raw1, Stored)
	if err := c.Exec(testCtx(t), "TRUNCATE TABLE segments"); err != nil {
		t.Fatal(err)
	}
	mustStore(t, b, raw1, Stored) // every event of raw1 inserted twice
	mustStore(t, b, raw2, Stored)

	for _, x := range []struct {
		f    EventFilter
		want uint64
	}{
		{EventFilter{}, 8},
		{EventFilter{BotsOnly: true}, 2},
		{EventFilter{Code: k1}, 3},
		{EventFilter{Code: k1, BotsOnly: true}, 1},
		{EventFilter{Code: "k2"}, 2},
		{EventFilter{SiteID: "s1"}, 3},
		{EventFilter{SiteID: "s1", BotsOnly: true}, 1},
		{EventFilter{SiteID: "s1", Code: k1}, 0},
		{EventFilter{Code: "none"}, 0},
		{EventFilter{Code: "k1' OR '1'='1"}, 0},
	} {
		got, err := b.CountEvents(x.f)
		if err != nil {
			t.Fatal(err)
		}
		if got != x.want {
			t.Errorf("count %+v: %d; want %d", x.f, got, x.want)
		}
	}

	names := func(evs []ingest.Event) string {
		s := ""
		for _, ev := range evs {
			s += fmt.Sprintf("%s%s@%s ", ev.Code, ev.SiteID, time.UnixMilli(ev.Time).UTC().Format("02T15:04:05.000"))
		}
		return s
	}
	for _, x := range []struct {
		n    int
		f    EventFilter
		want string
	}{
		// Oldest first; at one time, by id (segment 2's ids: k1 then k2).
		{2, EventFilter{}, "k2@03T09:00:00.000 s1@03T09:00:01.000 "},
		{3, EventFilter{}, k1 + "@03T09:00:00.000 k2@03T09:00:00.000 s1@03T09:00:01.000 "},
		{4, EventFilter{Code: k1}, k1 + "@01T10:00:00.000 " + k1 + "@01T10:00:00.005 " + k1 + "@03T09:00:00.000 "},
		{1, EventFilter{Code: k1, BotsOnly: true}, k1 + "@01T10:00:00.005 "},
		{2, EventFilter{SiteID: "s1"}, "s1@01T12:30:00.000 s1@03T09:00:01.000 "},
		{20, EventFilter{}, k1 + "@01T10:00:00.000 " + k1 + "@01T10:00:00.005 k2@01T11:00:00.000 s1@01T12:00:00.000 s1@01T12:30:00.000 " +
			k1 + "@03T09:00:00.000 k2@03T09:00:00.000 s1@03T09:00:01.000 "},
		{5, EventFilter{Code: "none"}, ""},
	} {
		got, err := b.TailEvents(x.n, x.f)
		if err != nil {
			t.Fatal(err)
		}
		if s := names(got); s != x.want {
			t.Errorf("tail %d %+v:\n got %s\nwant %s", x.n, x.f, s, x.want)
		}
	}
	got, err := b.TailEvents(8, EventFilter{Code: k1})
	if err != nil {
		t.Fatal(err)
	}
	e := got[0]
	if e.Kind != ingest.KindClick || e.Path != "/a/b" || e.ReferrerHost != "news.example" || e.Device != "desktop" ||
		e.Browser != "Firefox" || e.Country != "EE" || e.Node != "e1" || e.Bot() || e.ID != evs[0].ID {
		t.Errorf("tail's first event %+v; want the fields of %+v", e, evs[0])
	}
	if !got[1].Bot() {
		t.Errorf("the second click of %s is a bot's; tail says %+v", k1, got[1])
	}
}

// AllTimeClicks: non-bot clicks held plus the retired ones, per code, in
// one question; a code never clicked is absent.
func TestAllTimeClicks(t *testing.T) {
	c := newClient(t, sharedServer(t))
	b := newTestBackend(t, c, dec1.AddDate(0, 0, 3))
	k1 := "go.example/k1"
	raw := segment("e1", 1, []ingest.Event{
		click(k1, at(0, 10, 0, 0, 0), 1, false),
		click(k1, at(0, 10, 1, 0, 0), 2, false),
		click(k1, at(0, 10, 2, 0, 0), 3, true),
		click("k2", at(1, 10, 0, 0, 0), 3, false),
		siteEvent(ingest.KindPageview, "pageview", at(0, 12, 0, 0, 0), 4, false),
	})
	mustStore(t, b, raw, Stored)
	if err := c.Exec(testCtx(t), "TRUNCATE TABLE segments"); err != nil {
		t.Fatal(err)
	}
	mustStore(t, b, raw, Stored) // each click inserted twice, counted once
	if err := c.Exec(testCtx(t), "INSERT INTO retired_clicks (code, day, clicks) VALUES ('k2', 20251101, 40), ('k2', 20251102, 2)"); err != nil {
		t.Fatal(err)
	}
	got, err := b.AllTimeClicks([]string{k1, "k2", "k3", "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[k1] != 2 || got["k2"] != 43 {
		t.Errorf("all-time clicks %v; want %s:2 k2:43", got, k1)
	}
	if _, err := b.AllTimeClicks(make([]string, MaxClickCodes+1)); err == nil {
		t.Error("AllTimeClicks took more than MaxClickCodes codes")
	}
}
