package edge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/waymark/waymark/store"
)

func (e *env) createSite(key, domain string) siteView {
	e.t.Helper()
	r := e.do("POST", "/v1/sites", key, `{"domain":"`+domain+`"}`)
	e.expect(r, 201, "")
	var v siteView
	if err := json.Unmarshal(r.body, &v); err != nil {
		e.t.Fatalf("cannot decode %s: %v", r.body, err)
	}
	return v
}

// siteRecord is the stored bytes of a site, to prove a refused request
// changed nothing.
func (e *env) siteRecord(id string) []byte {
	e.t.Helper()
	st, found, err := e.st.Site(id)
	if err != nil || !found {
		e.t.Fatalf("site %s: found %v, %v", id, found, err)
	}
	return store.AppendSite(nil, &st)
}

func decodeInto[T any](t *testing.T, r *response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("cannot decode %s: %v", r.body, err)
	}
	return v
}

func TestSiteSettingsAPI(t *testing.T) {
	e := newEnv(t, nil)
	site := e.createSite(keyAlice, "a.example")
	if !site.HonorDNT || site.Goals == nil || len(site.Goals) != 0 {
		t.Fatalf("new site: %+v; want honor_dnt true and goals []", site)
	}
	if !strings.Contains(string(e.do("GET", "/v1/sites/"+site.ID, keyAlice, "").body), `"goals":[]`) {
		t.Errorf("goals must be [] when empty, not null")
	}
	other := e.createSite(keyBob, "b.example")

	// Listing and reading are scoped to the owner.
	list := decodeInto[struct{ Sites []siteView }](t, e.do("GET", "/v1/sites", keyAlice, ""))
	if len(list.Sites) != 1 || list.Sites[0].ID != site.ID || list.Sites[0].Domain != "a.example" {
		t.Errorf("alice's sites: %+v; want only %s", list.Sites, site.ID)
	}
	e.expect(e.do("GET", "/v1/sites/"+other.ID, keyAlice, ""), 404, probNotFound)
	e.expect(e.do("GET", "/v1/sites/nope", keyAlice, ""), 404, probNotFound)
	e.expect(e.do("GET", "/v1/sites", "", ""), 401, probUnauthorized)

	// PATCH honor_dnt and timezone, alone and together.
	r := e.do("PATCH", "/v1/sites/"+site.ID, keyAlice, `{"honor_dnt":false}`)
	e.expect(r, 200, "")
	if got := decodeInto[siteView](t, r); got.HonorDNT || got.Timezone != "UTC" {
		t.Errorf("after honor_dnt false: %+v", got)
	}
	if r.get("Waymark-Index") == "" {
		t.Error("PATCH without Waymark-Index")
	}
	if st, _, _ := e.st.Site(site.ID); !st.IgnoreDNT {
		t.Errorf("stored IgnoreDNT: got false; want true")
	}
	r = e.do("PATCH", "/v1/sites/"+site.ID, keyAlice, `{"timezone":"America/New_York","honor_dnt":true}`)
	e.expect(r, 200, "")
	if got := decodeInto[siteView](t, r); !got.HonorDNT || got.Timezone != "America/New_York" {
		t.Errorf("after both: %+v", got)
	}
	if got := decodeInto[siteView](t, e.do("GET", "/v1/sites/"+site.ID, keyAlice, "")); !got.HonorDNT || got.Timezone != "America/New_York" {
		t.Errorf("GET after PATCH: %+v", got)
	}

	// Refusals change nothing.
	before := e.siteRecord(site.ID)
	for _, body := range []string{
		`{"honor_dnt":"yes"}`, `{"honor_dnt":1}`, `{"honor_dnt":null}`, `{"timezone":"Mars/Olympus"}`,
		`{"timezone":""}`, `{"timezone":null}`, `{"timezone":"Local"}`, `{"domain":"c.example"}`,
		`{"goals":[]}`, `[]`, `{`, ``,
	} {
		e.expect(e.do("PATCH", "/v1/sites/"+site.ID, keyAlice, body), 400, probInvalidRequest)
	}
	e.expect(e.do("PATCH", "/v1/sites/"+site.ID, keyBob, `{"honor_dnt":false}`), 404, probNotFound)
	e.expect(e.do("PATCH", "/v1/sites/nope", keyAlice, `{"honor_dnt":false}`), 404, probNotFound)
	if got := e.siteRecord(site.ID); !bytes.Equal(got, before) {
		t.Errorf("refused PATCHes changed the site")
	}
	// An empty edit answers the site as it is, without a write.
	r = e.do("PATCH", "/v1/sites/"+site.ID, keyAlice, `{}`)
	e.expect(r, 200, "")
	if r.get("Waymark-Index") != "" || !bytes.Equal(e.siteRecord(site.ID), before) {
		t.Errorf("empty PATCH wrote something")
	}
	if p := e.do("PATCH", "/v1/sites/"+site.ID, keyAlice, `{"domain":"c.example"}`).problem(t); !strings.Contains(p.Detail, "cannot be changed") {
		t.Errorf("domain change detail: %q", p.Detail)
	}
}

func TestGoalsAPI(t *testing.T) {
	e := newEnv(t, nil)
	site := e.createSite(keyAlice, "a.example")
	goals := "/v1/sites/" + site.ID + "/goals"

	r := e.do("POST", goals, keyAlice, `{"event_name":"Signup"}`)
	e.expect(r, 201, "")
	signup := decodeInto[goalView](t, r)
	if signup.GoalType != "event" || signup.EventName == nil || *signup.EventName != "Signup" || signup.PagePath != nil ||
		signup.DisplayName != "Signup" || len(signup.ID) != 8 {
		t.Fatalf("event goal: %+v", signup)
	}
	if r.get("Location") != e.cfg.PublicURL+goals+"/"+signup.ID || r.get("Waymark-Index") == "" {
		t.Errorf("headers: Location %q Waymark-Index %q", r.get("Location"), r.get("Waymark-Index"))
	}
	// A path without its leading slash gets one, and the default display
	// name, as Plausible does; the raw JSON has "event_name": null.
	r = e.do("POST", goals, keyAlice, `{"page_path":" pricing ","goal_type":"page"}`)
	e.expect(r, 201, "")
	pricing := decodeInto[goalView](t, r)
	if pricing.GoalType != "page" || pricing.PagePath == nil || *pricing.PagePath != "/pricing" || pricing.DisplayName != "Visit /pricing" {
		t.Fatalf("page goal: %+v", pricing)
	}
	if !strings.Contains(string(r.body), `"event_name":null`) {
		t.Errorf("page goal JSON lacks event_name null: %s", r.body)
	}
	r = e.do("POST", goals, keyAlice, `{"page_path":"/blog/**","display_name":"Blog readers"}`)
	e.expect(r, 201, "")
	blog := decodeInto[goalView](t, r)

	list := decodeInto[struct{ Goals []goalView }](t, e.do("GET", goals, keyAlice, ""))
	if len(list.Goals) != 3 || list.Goals[0].ID != signup.ID || list.Goals[1].ID != pricing.ID || list.Goals[2].DisplayName != "Blog readers" {
		t.Fatalf("goals: %+v", list.Goals)
	}
	if got := decodeInto[siteView](t, e.do("GET", "/v1/sites/"+site.ID, keyAlice, "")); len(got.Goals) != 3 {
		t.Errorf("site view goals: %+v", got.Goals)
	}
	if got := decodeInto[goalView](t, e.do("GET", goals+"/"+blog.ID, keyAlice, "")); !reflect.DeepEqual(got, blog) {
		t.Errorf("GET goal: %+v; want %+v", got, blog)
	}
	e.expect(e.do("GET", goals+"/zzzz", keyAlice, ""), 404, probNotFound)

	// Clashes, bad bodies and other owners change nothing.
	before := e.siteRecord(site.ID)
	for _, body := range []string{
		`{"event_name":"Signup"}`, `{"event_name":" Signup "}`, `{"page_path":"/pricing"}`, `{"page_path":"pricing"}`,
		`{"event_name":"Other","display_name":"Blog readers"}`, `{"event_name":"Visit /pricing"}`,
	} {
		e.expect(e.do("POST", goals, keyAlice, body), 409, probGoalExists)
	}
	for _, body := range []string{
		`{}`, `{"event_name":""}`, `{"event_name":"  "}`, `{"page_path":""}`, `{"event_name":"A","page_path":"/a"}`,
		`{"event_name":"engagement"}`, `{"event_name":"` + strings.Repeat("x", store.MaxGoalEventNameLen+1) + `"}`,
		`{"page_path":"/` + strings.Repeat("p", store.MaxGoalPagePathLen) + `"}`, `{"event_name":"A","display_name":""}`,
		`{"event_name":"A","goal_type":"page"}`, `{"page_path":"/a","goal_type":"event"}`, `{"event_name":"A","goal_type":"click"}`,
		`{"event_name":1}`, `{"event_name":"A","id":"x"}`, `{"event_name":null,"page_path":null}`, `[]`, `{`,
	} {
		e.expect(e.do("POST", goals, keyAlice, body), 400, probInvalidRequest)
	}
	e.expect(e.do("POST", goals, keyBob, `{"event_name":"Mine"}`), 404, probNotFound)
	e.expect(e.do("POST", "/v1/sites/nope/goals", keyAlice, `{"event_name":"Mine"}`), 404, probNotFound)
	e.expect(e.do("GET", goals, keyBob, ""), 404, probNotFound)
	e.expect(e.do("DELETE", goals+"/"+signup.ID, keyBob, ""), 404, probNotFound)
	e.expect(e.do("DELETE", goals+"/nogoal", keyAlice, ""), 404, probNotFound)
	e.expect(e.do("DELETE", goals+"/bad%20id", keyAlice, ""), 404, probNotFound)
	if got := e.siteRecord(site.ID); !bytes.Equal(got, before) {
		t.Errorf("refused goal requests changed the site")
	}

	// Delete, then the same again.
	r = e.do("DELETE", goals+"/"+signup.ID, keyAlice, "")
	e.expect(r, 204, "")
	if r.get("Waymark-Index") == "" {
		t.Error("DELETE without Waymark-Index")
	}
	e.expect(e.do("DELETE", goals+"/"+signup.ID, keyAlice, ""), 404, probNotFound)
	st, _, _ := e.st.Site(site.ID)
	if len(st.Goals) != 2 || st.Goals[0].ID != pricing.ID || st.Goals[1].ID != blog.ID {
		t.Errorf("stored goals after delete: %+v", st.Goals)
	}
	// The deleted event name may be a goal again.
	e.expect(e.do("POST", goals, keyAlice, `{"event_name":"Signup"}`), 201, "")
}

func TestGoalsLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.WriteRate = -1 })
	site := e.createSite(keyAlice, "a.example")
	goals := "/v1/sites/" + site.ID + "/goals"
	for i := range store.MaxGoals {
		e.expect(e.do("POST", goals, keyAlice, fmt.Sprintf(`{"event_name":"E%d"}`, i)), 201, "")
	}
	before := e.siteRecord(site.ID)
	e.expect(e.do("POST", goals, keyAlice, `{"event_name":"One too many"}`), 409, probGoalLimit)
	if !bytes.Equal(e.siteRecord(site.ID), before) {
		t.Error("the refused 101st goal changed the site")
	}
}

// The site routes take only their own shapes; every other /v1/sites/
// path, the stats above all, still reaches the fallback.
func TestSiteRoutesLeaveStatsToFallback(t *testing.T) {
	var fell []string
	e := newEnv(t, func(c *Config) {
		c.APIFallback = func(ctx *fasthttp.RequestCtx) {
			fell = append(fell, string(ctx.Method())+" "+string(ctx.Path()))
			ctx.SetStatusCode(299)
		}
	})
	site := e.createSite(keyAlice, "a.example")
	for _, path := range []string{
		"/v1/sites/" + site.ID + "/stats/aggregate", "/v1/sites/" + site.ID + "/stats", "/v1/sites/" + site.ID + "/",
		"/v1/sites/", "/v1/sites/" + site.ID + "/goals/g1/x", "/v1/sites/" + site.ID + "/goals/",
		"/v1/sitesx",
	} {
		if r := e.do("GET", path, keyAlice, ""); r.status != 299 {
			t.Errorf("GET %s: got %d; want the fallback", path, r.status)
		}
	}
	if len(fell) != 7 {
		t.Errorf("fallback saw %v", fell)
	}
	for _, tc := range []struct{ method, path, allow string }{
		{"PUT", "/v1/sites", "GET, POST"},
		{"DELETE", "/v1/sites/" + site.ID, "GET, PATCH"},
		{"PATCH", "/v1/sites/" + site.ID + "/goals", "GET, POST"},
		{"PATCH", "/v1/sites/" + site.ID + "/goals/g1", "GET, DELETE"},
	} {
		r := e.do(tc.method, tc.path, keyAlice, "{}")
		e.expect(r, 405, probMethodNotAllowed)
		if r.get("Allow") != tc.allow {
			t.Errorf("%s %s: Allow %q; want %q", tc.method, tc.path, r.get("Allow"), tc.allow)
		}
	}
}

func FuzzSitePatchBody(f *testing.F) {
	for _, s := range []string{
		`{"honor_dnt":true}`, `{"timezone":"Europe/Berlin","honor_dnt":false}`, `{}`, `{"honor_dnt":null}`,
		`{"timezone":"Mars/Olympus"}`, `{"domain":"x"}`, `{"honor_dnt":"true"}`, `[]`, `{`, ``, `{"timezone":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeSitePatch(body)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("empty error for %q", body)
			}
			return
		}
		p := store.SitePatch{SiteID: "s"}
		if req.timezone != nil {
			p.SetTimezone, p.Timezone = true, *req.timezone
			if checkTimezone(*req.timezone) != nil {
				t.Fatalf("decodeSitePatch(%q) accepted time zone %q", body, *req.timezone)
			}
		}
		if req.honorDNT != nil {
			p.SetIgnoreDNT, p.IgnoreDNT = true, !*req.honorDNT
		}
		if !p.Empty() {
			if err := p.Check(); err != nil {
				t.Fatalf("decodeSitePatch(%q) gave a patch the store refuses: %v", body, err)
			}
		}
	})
}

func FuzzGoalBody(f *testing.F) {
	for _, s := range []string{
		`{"event_name":"Signup"}`, `{"page_path":"/blog/*","display_name":"Blog"}`, `{"page_path":"x","goal_type":"page"}`,
		`{"event_name":"a","page_path":"/b"}`, `{"event_name":" "}`, `{"event_name":"engagement"}`, `{"event_name":null}`,
		`{"display_name":"x"}`, `[]`, `{`, ``, `{"page_path":"\ud800"}`, `{"event_name":"\u00a0x\u00a0"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		g, err := decodeGoal(body)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("empty error for %q", body)
			}
			return
		}
		g.ID = "g1"
		if err := store.CheckGoal(&g); err != nil {
			t.Fatalf("decodeGoal(%q) = %+v, which the store refuses: %v", body, g, err)
		}
		again := g
		if err := store.NormalizeGoal(&again); err != nil || again != g {
			t.Fatalf("decodeGoal(%q) = %+v is not normalised: %+v, %v", body, g, again, err)
		}
	})
}
