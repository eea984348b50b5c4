package ingest

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

// privacyPipeline has one site that honours DNT/GPC (the default) and one
// whose owner turned that off.
func privacyPipeline(t *testing.T) (*Pipeline, string, *metrics.Set) {
	t.Helper()
	set := metrics.NewSet()
	p := openTestPipeline(t, func(c *Config) {
		c.Metrics = set
		c.Sites = NewSites()
		c.Sites.Put(store.Site{ID: "site-h", Domain: "honours.example"})
		c.Sites.Put(store.Site{ID: "site-i", Domain: "ignores.example", IgnoreDNT: true})
	})
	return p, serve(t, p.EventHandler()), set
}

func pageview(domains string) string {
	first, _, _ := strings.Cut(domains, ",")
	return `{"n":"pageview","u":"https://` + first + `/p","d":"` + domains + `"}`
}

// promValue reads a counter from the Prometheus text of set.
func promValue(t *testing.T, set *metrics.Set, name string) string {
	t.Helper()
	var b bytes.Buffer
	set.WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return "(absent)"
}

func TestPrivacySignalsDropSiteEvents(t *testing.T) {
	p, url, set := privacyPipeline(t)
	cases := []struct {
		name    string
		headers map[string]string
		domains string
		dropped string
	}{
		{"DNT on an honouring site", map[string]string{"DNT": "1"}, "honours.example", DropDNT},
		{"Sec-GPC on an honouring site", map[string]string{"Sec-GPC": "1"}, "honours.example", DropDNT},
		{"both on an honouring site", map[string]string{"DNT": "1", "Sec-GPC": "1"}, "honours.example", DropDNT},
		{"lower-case header name", map[string]string{"dnt": "1"}, "honours.example", DropDNT},
		{"DNT on a site that ignores it", map[string]string{"DNT": "1"}, "ignores.example", ""},
		{"Sec-GPC on a site that ignores it", map[string]string{"Sec-GPC": "1"}, "ignores.example", ""},
		{"DNT: 0 is no signal", map[string]string{"DNT": "0"}, "honours.example", ""},
		{"Sec-GPC: 0 is no signal", map[string]string{"Sec-GPC": "0"}, "honours.example", ""},
		{"no signal", nil, "honours.example", ""},
		// One request naming both sites: each site decides for itself.
		{"fan-out with DNT", map[string]string{"DNT": "1"}, "honours.example,ignores.example", DropDNT},
	}
	for _, tc := range cases {
		r := postEvent(t, url, "text/plain", pageview(tc.domains), tc.headers)
		if r.status != http.StatusAccepted || r.dropped != tc.dropped {
			t.Errorf("%s: got %d dropped %q; want 202 dropped %q", tc.name, r.status, r.dropped, tc.dropped)
		}
	}
	// Dropped by hand count: the four honouring-site requests with a
	// signal, and the honouring half of the fan-out.
	if got := p.Dropped(DropDNT); got != 5 {
		t.Errorf("Dropped(dnt): got %d; want 5", got)
	}
	if got := promValue(t, set, `waymark_ingest_dropped_total{reason="dnt"}`); got != "5" {
		t.Errorf(`waymark_ingest_dropped_total{reason="dnt"}: got %s; want 5`, got)
	}
	// Stored: 2 on the ignoring site, 3 without a signal, 1 fan-out half.
	var sites []string
	for _, ev := range closeAndRead(t, p) {
		sites = append(sites, ev.SiteID)
	}
	slices.Sort(sites)
	if want := []string{"site-h", "site-h", "site-h", "site-i", "site-i", "site-i"}; !slices.Equal(sites, want) {
		t.Errorf("stored events by site: got %v; want %v", sites, want)
	}
}

// The node keeps the Sites table current from the replicated store (OnSite
// puts the edited site); a changed setting applies to the next event.
func TestPrivacySettingFollowsSitesTable(t *testing.T) {
	p, url, _ := privacyPipeline(t)
	dnt := map[string]string{"DNT": "1"}
	if r := postEvent(t, url, "text/plain", pageview("honours.example"), dnt); r.dropped != DropDNT {
		t.Fatalf("before the edit: dropped %q; want dnt", r.dropped)
	}
	p.cfg.Sites.Put(store.Site{ID: "site-h", Domain: "honours.example", IgnoreDNT: true})
	if r := postEvent(t, url, "text/plain", pageview("honours.example"), dnt); r.dropped != "" {
		t.Fatalf("after IgnoreDNT: dropped %q; want stored", r.dropped)
	}
	p.cfg.Sites.Put(store.Site{ID: "site-h", Domain: "honours.example"})
	if r := postEvent(t, url, "text/plain", pageview("honours.example"), dnt); r.dropped != DropDNT {
		t.Fatalf("after honouring again: dropped %q; want dnt", r.dropped)
	}
	if got := len(closeAndRead(t, p)); got != 1 {
		t.Errorf("stored %d events; want 1", got)
	}
}

// Redirect clicks are not site events: a privacy signal changes nothing.
func TestPrivacySignalsLeaveClicksAlone(t *testing.T) {
	p := openTestPipeline(t, nil)
	for _, h := range []map[string]string{{"DNT": "1"}, {"Sec-GPC": "1"}} {
		p.CaptureClick(clickCtx("http://wm.example/aB3dE7x", "203.0.113.7", h), []byte("aB3dE7x"))
	}
	if got := p.Dropped(DropDNT); got != 0 {
		t.Errorf("Dropped(dnt) after clicks: %d; want 0", got)
	}
	events := closeAndRead(t, p)
	if len(events) != 2 || events[0].Kind != KindClick || events[1].Code != "aB3dE7x" {
		t.Errorf("clicks with DNT/GPC: got %+v; want both stored", events)
	}
}

// BenchmarkEventHandlerPrivacy measures the privacy check on the ingest hot
// path: no signal (the baseline of the same run), a signal the site
// honours (dropped), and one the site ignores (stored).
func BenchmarkEventHandlerPrivacy(b *testing.B) {
	for _, bc := range []struct {
		name, domain, header string
		stored               bool
	}{
		{"no-signal", "honours.example", "", true},
		{"dnt-honoured", "honours.example", "DNT", false},
		{"gpc-ignored", "ignores.example", "Sec-GPC", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := openTestPipeline(b, func(c *Config) {
				c.Sites = NewSites()
				c.Sites.Put(store.Site{ID: "site-h", Domain: "honours.example"})
				c.Sites.Put(store.Site{ID: "site-i", Domain: "ignores.example", IgnoreDNT: true})
				c.IPRate, c.IPBurst, c.SiteRate, c.SiteBurst = 1e12, 1e12, 1e12, 1e12
			})
			h := p.EventHandler()
			var req fasthttp.Request
			req.Header.SetMethod("POST")
			req.SetRequestURI("/api/event")
			req.Header.SetContentType("text/plain")
			req.Header.SetUserAgent(firefoxUA)
			if bc.header != "" {
				req.Header.Set(bc.header, "1")
			}
			req.SetBody([]byte(pageview(bc.domain)))
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 1}, nil)
			b.ReportAllocs()
			for b.Loop() {
				ctx.Response.Reset()
				h(&ctx)
				if dropped := len(ctx.Response.Header.Peek(DroppedHeader)) > 0; dropped == bc.stored {
					b.Fatalf("dropped %q; want stored %v", ctx.Response.Header.Peek(DroppedHeader), bc.stored)
				}
			}
			b.StopTimer()
			_ = p.Close(context.Background())
		})
	}
}

func TestPrivacySignalHeaderValues(t *testing.T) {
	for _, tc := range []struct {
		dnt, gpc string
		want     bool
	}{
		{"1", "", true}, {"", "1", true}, {"1", "1", true},
		{"0", "", false}, {"", "0", false}, {"", "", false}, {"11", "", false}, {"yes", "", false}, {"", "true", false},
	} {
		var h fasthttp.RequestHeader
		if tc.dnt != "" {
			h.Set("DNT", tc.dnt)
		}
		if tc.gpc != "" {
			h.Set("Sec-GPC", tc.gpc)
		}
		if got := privacySignal(&h); got != tc.want {
			t.Errorf("DNT %q Sec-GPC %q: got %v; want %v", tc.dnt, tc.gpc, got, tc.want)
		}
	}
}

// The check runs on every site event; it must not allocate.
func TestPrivacyCheckAllocatesNothing(t *testing.T) {
	p := openTestPipeline(t, nil)
	ctx := clickCtx("http://wm.example/api/event", "203.0.113.7", map[string]string{"DNT": "1"})
	var reasons dropReasonSet
	for _, ignore := range []bool{false, true} {
		if allocs := testing.AllocsPerRun(100, func() { p.skipForPrivacy(ctx, ignore, &reasons) }); allocs != 0 {
			t.Errorf("skipForPrivacy(ignore %v): %.1f allocations; want 0", ignore, allocs)
		}
	}
	if reasons.String() != DropDNT {
		t.Errorf("reasons: %q; want dnt", reasons.String())
	}
}
