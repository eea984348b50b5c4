package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestE2EOpenAPI drives a real `waymark node --dev` through every
// operation of docs/openapi.yaml, good answers and error answers, and
// validates every request and answer against the description with
// kin-openapi's openapi3filter, so the description cannot drift from the
// code. It ends by demanding that every operation was exercised.
func TestE2EOpenAPI(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, dir, "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0",
		"--edit-review", "1h", "--report-burst", "3")
	base := "http://" + p.http
	waitFor(t, "readyz", 30*time.Second, func() bool { return do(t, "GET", base+"/readyz", "", "").status == 200 })
	var key string
	waitFor(t, "dev-api-key", 30*time.Second, func() bool { key = readKeyMaybe(filepath.Join(dir, "dev-api-key")); return key != "" })
	env := []string{"WAYMARK_ADMIN_ADDR=" + p.admin, "WAYMARK_TOKEN=" + readKey(t, filepath.Join(dir, "operator-token"))}

	v := newSpecValidator(t, base)
	want := func(t *testing.T, ex exchange, status int) map[string]any {
		t.Helper()
		if ex.status != status {
			t.Fatalf("got %d; want %d: %s", ex.status, status, ex.body)
		}
		var m map[string]any
		if len(ex.body) > 0 && strings.Contains(ex.header.Get("Content-Type"), "json") {
			if err := json.Unmarshal(ex.body, &m); err != nil {
				t.Fatalf("body is not a JSON object: %v: %s", err, ex.body)
			}
		}
		return m
	}
	want2 := func(t *testing.T, ex exchange, status int) exchange {
		t.Helper()
		want(t, ex, status)
		return ex
	}
	wantProblem := func(t *testing.T, ex exchange, status int, typ string) {
		t.Helper()
		m := want(t, ex, status)
		if ex.header.Get("Content-Type") != "application/problem+json" || m["type"] != "/problems/"+typ {
			t.Fatalf("got %s %v; want problem %s", ex.header.Get("Content-Type"), m["type"], typ)
		}
	}

	var code, permCode string
	t.Run("health and description", func(t *testing.T) {
		want(t, v.send(t, "GET", base+"/healthz", "", ""), 200)
		want(t, v.send(t, "GET", base+"/readyz", "", ""), 200)
		m := want(t, v.send(t, "GET", base+"/openapi.json", "", ""), 200)
		if m["openapi"] != "3.1.0" {
			t.Fatalf("openapi.json: openapi = %v", m["openapi"])
		}
		if m := want(t, v.send(t, "GET", base+"/readyz/detail", "", ""), 200); m["ready"] != true {
			t.Fatalf("readyz/detail: %v", m)
		}
		want(t, v.send(t, "GET", base+"/metrics", "", ""), 200)
		ex := v.send(t, "GET", base+"/s.js", "", "")
		want(t, ex, 200)
		want(t, v.send(t, "GET", base+"/s.js", "", "", withHeader("If-None-Match", ex.header.Get("ETag"))), 304)
		want(t, v.send(t, "GET", base+"/problems/alias-unavailable", "", ""), 200)
		want(t, v.send(t, "GET", base+"/problems/no-such-type", "", ""), 404)
	})

	t.Run("links", func(t *testing.T) {
		m := want(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/a?x=1","click_limit":1000,"expires_at":"2099-01-01T00:00:00Z"}`,
			withHeader("Idempotency-Key", "oa-1")), 201)
		code = m["code"].(string)
		// The replay answers the first answer again.
		ex := v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/a?x=1","click_limit":1000,"expires_at":"2099-01-01T00:00:00Z"}`,
			withHeader("Idempotency-Key", "oa-1"))
		if want(t, ex, 201)["code"] != code || ex.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %s %v", ex.body, ex.header)
		}
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/other"}`, withHeader("Idempotency-Key", "oa-1")), 422, "idempotency-mismatch")
		m = want(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/p","alias":"oa-perm","redirect":301}`), 201)
		permCode = m["code"].(string)
		for _, r := range []int{307, 308} {
			want(t, v.send(t, "POST", base+"/v1/links", key, fmt.Sprintf(`{"url":"https://example.com/r%d","alias":"oa-r%d","redirect":%d}`, r, r, r)), 201)
		}
		want(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/n","redirect":null,"click_limit":null,"expires_at":null}`), 201)

		// Errors.
		wantProblem(t, v.send(t, "POST", base+"/v1/links", "", `{"url":"https://example.com/"}`), 401, "unauthorized")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", "wm_not_a_key", `{"url":"https://example.com/"}`), 401, "unauthorized")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"http://localhost/x"}`), 400, "invalid-url")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/","colour":"red"}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/","redirect":303}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"alias":"nourl"}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/","alias":"a/b"}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/","alias":"Ab3dE9x"}`), 409, "alias-unavailable")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/","alias":"oa-perm"}`), 409, "alias-unavailable")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://bit.ly/abc"}`), 422, "destination-blocked")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/`+strings.Repeat("a", 20<<10)+`"}`), 413, "payload-too-large")

		m = want(t, v.send(t, "GET", query(base+"/v1/links", "limit", "2"), key, ""), 200)
		cur, _ := m["next_cursor"].(string)
		if cur == "" {
			t.Fatalf("a first page of 2 of 5 links has no next_cursor: %v", m)
		}
		want(t, v.send(t, "GET", query(base+"/v1/links", "limit", "1000", "cursor", cur), key, ""), 200)
		wantProblem(t, v.send(t, "GET", query(base+"/v1/links", "limit", "0"), key, "", invalid), 400, "invalid-request")
		// Tags and search.
		m = want(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/tagged","alias":"oa-tagged","tags":["Spring","sms"]}`), 201)
		if fmt.Sprint(m["tags"]) != "[sms spring]" {
			t.Fatalf("created tags %v; want [sms spring]", m["tags"])
		}
		m = want(t, v.send(t, "PATCH", base+"/v1/links/oa-tagged", key, `{"tags":["spring"]}`), 200)
		if fmt.Sprint(m["tags"]) != "[spring]" {
			t.Fatalf("patched tags %v; want [spring]", m["tags"])
		}
		want(t, v.send(t, "PATCH", base+"/v1/links/oa-tagged", key, `{"tags":["spring","sms"]}`), 200)
		m = want(t, v.send(t, "GET", query(base+"/v1/links", "tag", "spring", "q", "TAGGED", "domain", "127.0.0.1", "limit", "5"), key, ""), 200)
		if links, _ := m["links"].([]any); len(links) != 1 || links[0].(map[string]any)["code"] != "oa-tagged" || m["next_cursor"] != nil {
			t.Fatalf("GET /v1/links?tag=spring&q=TAGGED: %v; want oa-tagged alone", m)
		}
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/","tags":["has space"]}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/","tags":["a","b","c","d","e","f","g","h","i","j","k"]}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "PATCH", base+"/v1/links/oa-tagged", key, `{"tags":"spring"}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "GET", query(base+"/v1/links", "tag", "-x"), key, "", invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "GET", query(base+"/v1/links", "q", ""), key, "", invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "GET", query(base+"/v1/links", "cursor", "!!"), key, ""), 400, "invalid-request")
		wantProblem(t, v.send(t, "GET", base+"/v1/links", "", ""), 401, "unauthorized")

		want(t, v.send(t, "GET", base+"/v1/links/"+code, key, ""), 200)
		wantProblem(t, v.send(t, "GET", base+"/v1/links/nosuchcode", key, ""), 404, "not-found")
		wantProblem(t, v.send(t, "GET", base+"/v1/links/"+code, "", ""), 401, "unauthorized")

		m = want(t, v.send(t, "PATCH", base+"/v1/links/"+code, key, `{"url":"https://example.com/b","click_limit":null}`), 200)
		if _, ok := m["review_until"]; !ok {
			t.Fatalf("an edited destination under --edit-review has no review_until: %v", m)
		}
		want(t, v.send(t, "PATCH", base+"/v1/links/"+code, key, `{}`), 200)
		wantProblem(t, v.send(t, "PATCH", base+"/v1/links/"+permCode, key, `{"url":"https://example.com/moved"}`), 409, "permanent-redirect")
		wantProblem(t, v.send(t, "PATCH", base+"/v1/links/"+code, key, `{"status":"blocked"}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "PATCH", base+"/v1/links/"+code, key, `{"url":"https://bit.ly/x"}`), 422, "destination-blocked")
		wantProblem(t, v.send(t, "PATCH", base+"/v1/links/nosuchcode", key, `{"status":"active"}`), 404, "not-found")

		m = want(t, v.send(t, "GET", base+"/v1/links/"+code+"/history", key, ""), 200)
		if h, _ := m["history"].([]any); len(h) < 2 {
			t.Fatalf("history after a create and an edit: %s", m)
		}
		wantProblem(t, v.send(t, "GET", base+"/v1/links/nosuchcode/history", key, ""), 404, "not-found")

		if ex := v.send(t, "GET", query(base+"/v1/links/"+code+"/qr", "size", "256", "ecc", "H"), key, ""); ex.status != 200 || ex.header.Get("Content-Type") != "image/png" {
			t.Fatalf("qr png: %d %q", ex.status, ex.header.Get("Content-Type"))
		}
		if ex := v.send(t, "GET", query(base+"/v1/links/"+code+"/qr", "format", "svg", "margin", "0"), key, ""); ex.status != 200 || ex.header.Get("Content-Type") != "image/svg+xml" {
			t.Fatalf("qr svg: %d %q", ex.status, ex.header.Get("Content-Type"))
		}
		wantProblem(t, v.send(t, "GET", query(base+"/v1/links/"+code+"/qr", "format", "gif"), key, "", invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "GET", base+"/v1/links/nosuchcode/qr", key, ""), 404, "not-found")
		wantProblem(t, v.send(t, "GET", base+"/v1/links/"+code+"/qr", "", ""), 401, "unauthorized")
	})

	t.Run("domains", func(t *testing.T) {
		m := want(t, v.send(t, "POST", base+"/v1/domains", key, `{"domain":"Go.OA.example"}`), 201)
		if m["status"] != "pending" || m["domain"] != "go.oa.example" || m["approved_at"] != nil {
			t.Fatalf("registered: %v", m)
		}
		want(t, v.send(t, "POST", base+"/v1/domains", key, `{"domain":"go.oa.example"}`), 200)
		wantProblem(t, v.send(t, "POST", base+"/v1/domains", key, `{"domain":"go.oa.example:8080"}`), 400, "invalid-domain")
		wantProblem(t, v.send(t, "POST", base+"/v1/domains", key, `{"domain":"x.example","port":1}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "POST", base+"/v1/domains", "", `{"domain":"x.example"}`), 401, "unauthorized")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/d","domain":"go.oa.example"}`), 403, "domain-not-approved")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/d","domain":"other.oa.example"}`), 403, "domain-forbidden")
		wantProblem(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/d","domain":""}`, invalid), 400, "invalid-request")
		if out, errOut, code := runCLI(t, env, "domains", "approve", "go.oa.example"); code != 0 {
			t.Fatalf("domains approve: exit %d %s %s", code, out, errOut)
		}
		m = want(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/d","alias":"oa-dom","domain":"go.oa.example"}`), 201)
		if m["domain"] != "go.oa.example" || m["short_url"] != "http://go.oa.example/oa-dom" {
			t.Fatalf("link on a domain: %v", m)
		}
		want(t, v.send(t, "GET", base+"/v1/links/oa-dom?domain=go.oa.example", key, ""), 200)
		want(t, v.send(t, "PATCH", base+"/v1/links/oa-dom?domain=go.oa.example", key, `{"click_limit":9}`), 200)
		want(t, v.send(t, "GET", base+"/v1/links/oa-dom/history?domain=go.oa.example", key, ""), 200)
		wantProblem(t, v.send(t, "GET", base+"/v1/links/oa-dom", key, ""), 404, "not-found")
		m = want(t, v.send(t, "GET", base+"/v1/domains", key, ""), 200)
		if ds, _ := m["domains"].([]any); len(ds) != 1 {
			t.Fatalf("domains: %v", m)
		}
		wantProblem(t, v.send(t, "DELETE", base+"/v1/domains/nope.example", key, ""), 404, "not-found")
		want(t, v.send(t, "DELETE", base+"/v1/domains/go.oa.example", key, ""), 204)
	})

	t.Run("redirects", func(t *testing.T) {
		for alias, status := range map[string]int{"oa-perm": 301, "oa-r307": 307, "oa-r308": 308} {
			want(t, v.send(t, "GET", base+"/"+alias, "", ""), status)
		}
		m := want(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/plain","alias":"oa-plain"}`), 201)
		plain := m["code"].(string)
		want(t, v.send(t, "GET", base+"/"+plain, "", ""), 302)
		// Query forwarding: the visit's query is merged into Location.
		if ex := want2(t, v.send(t, "GET", base+"/"+plain+"?utm_source=oa&b=2", "", ""), 302); ex.header.Get("Location") != "https://example.com/plain?utm_source=oa&b=2" {
			t.Fatalf("forwarded Location: %q", ex.header.Get("Location"))
		}
		m = want(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/noq","alias":"oa-noq","forward_query":false}`), 201)
		if m["forward_query"] != false {
			t.Fatalf("forward_query false on create: %v", m)
		}
		if ex := want2(t, v.send(t, "GET", base+"/oa-noq?utm_source=oa", "", ""), 302); ex.header.Get("Location") != "https://example.com/noq" {
			t.Fatalf("unforwarded Location: %q", ex.header.Get("Location"))
		}
		want(t, v.send(t, "PATCH", base+"/v1/links/oa-noq", key, `{"forward_query":true}`), 200)
		wantProblem(t, v.send(t, "PATCH", base+"/v1/links/oa-noq", key, `{"forward_query":null}`, invalid), 400, "invalid-request")
		want(t, v.send(t, "HEAD", base+"/"+plain, "", ""), 302)
		want(t, v.send(t, "GET", base+"/"+code, "", ""), 200) // the edit's review window
		want(t, v.send(t, "GET", base+"/nosuchcode", "", ""), 404)
		want(t, v.send(t, "HEAD", base+"/nosuchcode", "", ""), 404)

		// Legal block (451) and delete (410).
		want(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/legal","alias":"oa-legal"}`), 201)
		if out, errOut, exit := runCLI(t, env, "links", "block", "oa-legal", "--legal", "--reason", "court order"); exit != 0 {
			t.Fatalf("links block --legal: exit %d: %s %s", exit, out, errOut)
		}
		waitFor(t, "the legal block", 10*time.Second, func() bool { return do(t, "GET", base+"/oa-legal", "", "").status == 451 })
		want(t, v.send(t, "GET", base+"/oa-legal", "", ""), 451)
		wantProblem(t, v.send(t, "DELETE", base+"/v1/links/oa-legal", key, ""), 409, "link-locked")
		wantProblem(t, v.send(t, "PATCH", base+"/v1/links/oa-legal", key, `{"status":"active"}`), 409, "link-locked")

		want(t, v.send(t, "DELETE", base+"/v1/links/"+plain, key, ""), 204)
		want(t, v.send(t, "DELETE", base+"/v1/links/"+plain, key, ""), 204)
		want(t, v.send(t, "GET", base+"/"+plain, "", ""), 410)
		wantProblem(t, v.send(t, "DELETE", base+"/v1/links/nosuchcode", key, ""), 404, "not-found")
		wantProblem(t, v.send(t, "DELETE", base+"/v1/links/"+plain, "", ""), 401, "unauthorized")
	})

	t.Run("passwords and previews", func(t *testing.T) { // issue 13.2, 13.4
		m := want(t, v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/pw","alias":"oa-pw","password":"s3cret",
			"preview":{"title":"T","description":"D","image":"https://img.example/i.png"}}`), 201)
		if m["password_protected"] != true {
			t.Fatalf("password_protected: %v", m)
		}
		want(t, v.send(t, "GET", base+"/v1/links/oa-pw", key, ""), 200)
		want(t, v.send(t, "GET", base+"/oa-pw", "", ""), 200) // the form
		form := withHeader("Content-Type", "application/x-www-form-urlencoded")
		want(t, v.send(t, "POST", base+"/oa-pw", "", "password=nope", form), 200)
		if ex := want2(t, v.send(t, "POST", base+"/oa-pw", "", "password=s3cret", form), 302); ex.header.Get("Location") != "https://example.com/pw" {
			t.Fatalf("unlock Location: %q", ex.header.Get("Location"))
		}
		for range 3 { // 5 attempts a minute per client and link
			want(t, v.send(t, "POST", base+"/oa-pw", "", "password=nope", form), 200)
		}
		if ex := want2(t, v.send(t, "POST", base+"/oa-pw", "", "password=s3cret", form), 429); ex.header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
		want(t, v.send(t, "PATCH", base+"/v1/links/oa-pw", key, `{"password":null}`), 200)
		want(t, v.send(t, "POST", base+"/oa-pw", "", "password=s3cret", form), 405)
		want(t, v.send(t, "GET", base+"/oa-pw", "", "", withHeader("User-Agent", "Twitterbot/1.0")), 200) // the preview page
		want(t, v.send(t, "GET", base+"/oa-pw", "", ""), 302)
		want(t, v.send(t, "PATCH", base+"/v1/links/oa-pw", key, `{"preview":null,"password":"again"}`), 200)
		wantProblem(t, v.send(t, "PATCH", base+"/v1/links/oa-pw", key, `{"preview":{"image":"ftp://img.example/i.png"}}`), 400, "invalid-request")
		wantProblem(t, v.send(t, "PATCH", base+"/v1/links/oa-perm", key, `{"password":"late"}`), 409, "permanent-redirect")
	})

	var site, goal string
	t.Run("sites and goals", func(t *testing.T) {
		m := want(t, v.send(t, "POST", base+"/v1/sites", key, `{"domain":"shop.example","timezone":"Europe/Berlin"}`), 201)
		site = m["id"].(string)
		wantProblem(t, v.send(t, "POST", base+"/v1/sites", key, `{"domain":"shop.example"}`), 409, "domain-taken")
		wantProblem(t, v.send(t, "POST", base+"/v1/sites", key, `{"timezone":"UTC"}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "POST", base+"/v1/sites", key, `{"domain":"x.example","timezone":"Mars/Base"}`), 400, "invalid-request")
		wantProblem(t, v.send(t, "POST", base+"/v1/sites", "", `{"domain":"y.example"}`), 401, "unauthorized")
		want(t, v.send(t, "GET", base+"/v1/sites", key, ""), 200)
		want(t, v.send(t, "GET", base+"/v1/sites/"+site, key, ""), 200)
		wantProblem(t, v.send(t, "GET", base+"/v1/sites/000000000000", key, ""), 404, "not-found")
		want(t, v.send(t, "PATCH", base+"/v1/sites/"+site, key, `{"timezone":"Europe/Paris","honor_dnt":false}`), 200)
		want(t, v.send(t, "PATCH", base+"/v1/sites/"+site, key, `{}`), 200)
		wantProblem(t, v.send(t, "PATCH", base+"/v1/sites/"+site, key, `{"domain":"other.example"}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "PATCH", base+"/v1/sites/000000000000", key, `{"honor_dnt":true}`), 404, "not-found")

		m = want(t, v.send(t, "POST", base+"/v1/sites/"+site+"/goals", key, `{"event_name":"Signup"}`), 201)
		goal = m["id"].(string)
		want(t, v.send(t, "POST", base+"/v1/sites/"+site+"/goals", key, `{"page_path":"/blog/*","display_name":"Blog readers","goal_type":"page"}`), 201)
		wantProblem(t, v.send(t, "POST", base+"/v1/sites/"+site+"/goals", key, `{"event_name":"Signup"}`), 409, "goal-exists")
		wantProblem(t, v.send(t, "POST", base+"/v1/sites/"+site+"/goals", key, `{"goal_type":"page"}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "POST", base+"/v1/sites/000000000000/goals", key, `{"event_name":"X"}`), 404, "not-found")
		want(t, v.send(t, "GET", base+"/v1/sites/"+site+"/goals", key, ""), 200)
		want(t, v.send(t, "GET", base+"/v1/sites/"+site+"/goals/"+goal, key, ""), 200)
		wantProblem(t, v.send(t, "GET", base+"/v1/sites/"+site+"/goals/ffffffff", key, ""), 404, "not-found")
	})

	t.Run("events", func(t *testing.T) {
		want(t, v.send(t, "OPTIONS", base+"/api/event", "", ""), 204)
		for i := range 3 {
			body := fmt.Sprintf(`{"n":"pageview","u":"https://shop.example/blog/post-%d","d":"shop.example","r":null,"w":1280}`, i)
			want(t, v.send(t, "POST", base+"/api/event", "", body, withHeader("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36")), 202)
		}
		want(t, v.send(t, "POST", base+"/api/event", "", `{"n":"Signup","u":"https://shop.example/","d":"shop.example","p":{"plan":"pro"}}`,
			withHeader("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36")), 202)
		// Browsers post text/plain to skip the CORS preflight.
		want(t, v.send(t, "POST", base+"/api/event", "", `{"name":"pageview","url":"https://shop.example/plain","domain":"shop.example"}`,
			withHeader("Content-Type", "text/plain"), withHeader("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36")), 202)
		ex := v.send(t, "POST", base+"/api/event", "", `{"n":"pageview","u":"https://unknown.example/","d":"unknown.example"}`)
		want(t, ex, 202)
		t.Logf("an event for an unknown site: 202, X-Waymark-Dropped %q", ex.header.Get("X-Waymark-Dropped"))
		want(t, v.send(t, "POST", base+"/api/event", "", `{"n":"pageview"}`, invalid), 400)
		want(t, v.send(t, "POST", base+"/api/event", "", `not json`, invalid), 400)
	})

	t.Run("stats", func(t *testing.T) {
		// Clicks for the link stats: a few redirects of the 307 link.
		for range 3 {
			do(t, "GET", base+"/oa-r307", "", "")
		}
		lk := base + "/v1/links/oa-r307/stats"
		want(t, v.send(t, "GET", lk, key, ""), 200)
		want(t, v.send(t, "GET", query(lk, "granularity", "hour", "tz", "Europe/Berlin", "from", time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)), key, ""), 200)
		wantProblem(t, v.send(t, "GET", query(lk, "granularity", "minute"), key, "", invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "GET", query(lk, "tz", "Nowhere/Else"), key, ""), 400, "invalid-request")
		wantProblem(t, v.send(t, "GET", base+"/v1/links/nosuchcode/stats", key, ""), 404, "not-found")
		wantProblem(t, v.send(t, "GET", lk, "", ""), 401, "unauthorized")
		want(t, v.send(t, "GET", query(lk+"/breakdown", "dimension", "country"), key, ""), 200)
		wantProblem(t, v.send(t, "GET", query(lk+"/breakdown", "dimension", "country", "limit", "5000"), key, "", invalid), 400, "invalid-request")
		want(t, v.send(t, "GET", lk+"/realtime", key, ""), 200)
		want(t, v.send(t, "GET", query(lk+"/realtime", "limit", "2"), key, ""), 200)
		want(t, v.send(t, "GET", query(lk+"/overview", "tz", "Europe/Berlin"), key, ""), 200)
		wantProblem(t, v.send(t, "GET", query(lk+"/overview", "tz", "Nowhere/Else"), key, ""), 400, "invalid-request")

		st := base + "/v1/sites/" + site + "/stats/"
		want(t, v.send(t, "GET", st+"aggregate", key, ""), 200)
		want(t, v.send(t, "GET", query(st+"aggregate", "filters", "page==/blog/post-1|/blog/post-2;country!=DE"), key, ""), 200)
		wantProblem(t, v.send(t, "GET", query(st+"aggregate", "filters", "nonsense"), key, ""), 400, "invalid-request")
		want(t, v.send(t, "GET", query(st+"timeseries", "granularity", "day"), key, ""), 200)
		want(t, v.send(t, "GET", query(st+"timeseries", "granularity", "hour", "filters", "page~blog;device==Desktop"), key, ""), 200)
		want(t, v.send(t, "GET", query(st+"breakdown", "dimension", "page", "limit", "5"), key, ""), 200)
		want(t, v.send(t, "GET", query(st+"breakdown", "dimension", "source", "filters", "page~blog;country!=DE"), key, ""), 200)
		want(t, v.send(t, "GET", st+"realtime", key, ""), 200)
		want(t, v.send(t, "GET", query(st+"heatmap", "period", "30d"), key, ""), 200)
		wantProblem(t, v.send(t, "GET", query(st+"heatmap", "period", "7d", "from", "2026-01-01"), key, ""), 400, "invalid-request")
		want(t, v.send(t, "GET", query(st+"goals", "period", "7d"), key, ""), 200)
		wantProblem(t, v.send(t, "GET", base+"/v1/sites/000000000000/stats/aggregate", key, ""), 404, "not-found")
		wantProblem(t, v.send(t, "GET", st+"goals", "", ""), 401, "unauthorized")

		// Plausible v2: wait until the events are rolled up, so the
		// answer has rows to validate.
		var last string
		defer func() { t.Logf("last v2 answer: %s", last) }()
		q := `{"site_id":"shop.example","metrics":["visitors","pageviews","bounce_rate"],"date_range":"day","dimensions":["event:page"],"include":{"total_rows":true}}`
		waitFor(t, "the pageviews to reach the rollups", 30*time.Second, func() bool {
			b := do(t, "POST", base+"/api/v2/query", key, q).body
			last = string(b)
			return strings.Contains(last, "/blog/post-")
		})
		want(t, v.send(t, "POST", base+"/api/v2/query", key, q), 200)
		want(t, v.send(t, "POST", base+"/api/v2/query", key, `{"site_id":"shop.example","metrics":["visitors"],"date_range":"day","dimensions":["time:hour"],"include":{"time_labels":true}}`), 200)
		want(t, v.send(t, "POST", base+"/api/v2/query", key, `{"site_id":"shop.example","metrics":["nonsense"],"date_range":"7d"}`), 400)
		want(t, v.send(t, "POST", base+"/api/v2/query", key, `{"site_id":"nobody.example","metrics":["visitors"],"date_range":"7d"}`), 404)
		wantProblem(t, v.send(t, "POST", base+"/api/v2/query", "", `{"site_id":"shop.example","metrics":["visitors"],"date_range":"7d"}`), 401, "unauthorized")
		// With data in, the site stats again (rows, not just empty lists).
		want(t, v.send(t, "GET", query(st+"breakdown", "dimension", "page"), key, ""), 200)
		want(t, v.send(t, "GET", query(st+"goals", "period", "7d"), key, ""), 200)
		want(t, v.send(t, "GET", st+"realtime", key, ""), 200)
		want(t, v.send(t, "GET", query(lk+"/breakdown", "dimension", "device"), key, ""), 200)
	})

	t.Run("goal delete", func(t *testing.T) {
		want(t, v.send(t, "DELETE", base+"/v1/sites/"+site+"/goals/"+goal, key, ""), 204)
		wantProblem(t, v.send(t, "DELETE", base+"/v1/sites/"+site+"/goals/"+goal, key, ""), 404, "not-found")
	})

	t.Run("keys", func(t *testing.T) {
		// Issue 12: scoped keys. The dev key has every scope.
		m := want(t, v.send(t, "POST", base+"/v1/keys", key, `{"name":"oa reader","scopes":["links:read","stats:read"]}`), 201)
		reader, readerID := m["key"].(string), m["id"].(string)
		want(t, v.send(t, "GET", base+"/v1/keys", key, ""), 200)
		wantProblem(t, v.send(t, "POST", base+"/v1/keys", key, `{"name":"x","scopes":[]}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "POST", base+"/v1/keys", key, `{"name":"x","scopes":["links:admin"]}`), 400, "invalid-request")
		wantProblem(t, v.send(t, "POST", base+"/v1/keys", "", `{"name":"x","scopes":["links:read"]}`), 401, "unauthorized")
		wantProblem(t, v.send(t, "GET", base+"/v1/keys", "", ""), 401, "unauthorized")
		// The reader reads links and stats, and is refused the rest.
		want(t, v.send(t, "GET", base+"/v1/links", reader, ""), 200)
		want(t, v.send(t, "GET", base+"/v1/links/oa-r307/stats", reader, ""), 200)
		wantProblem(t, v.send(t, "POST", base+"/v1/links", reader, `{"url":"https://example.com/scoped"}`), 403, "insufficient-scope")
		wantProblem(t, v.send(t, "DELETE", base+"/v1/links/oa-r307", reader, ""), 403, "insufficient-scope")
		wantProblem(t, v.send(t, "POST", base+"/v1/sites", reader, `{"domain":"scoped.example"}`), 403, "insufficient-scope")
		wantProblem(t, v.send(t, "GET", base+"/v1/keys", reader, ""), 403, "insufficient-scope")
		wantProblem(t, v.send(t, "POST", base+"/v1/keys", reader, `{"name":"x","scopes":["links:read"]}`), 403, "insufficient-scope")
		wantProblem(t, v.send(t, "DELETE", base+"/v1/keys/"+readerID, reader, ""), 403, "insufficient-scope")
		want(t, v.send(t, "DELETE", base+"/v1/keys/"+readerID, key, ""), 204)
		wantProblem(t, v.send(t, "DELETE", base+"/v1/keys/"+readerID, key, ""), 404, "not-found")
		wantProblem(t, v.send(t, "DELETE", base+"/v1/keys/"+readerID, "", ""), 401, "unauthorized")
		wantProblem(t, v.send(t, "GET", base+"/v1/links", reader, ""), 401, "unauthorized")
	})

	t.Run("webhooks", func(t *testing.T) {
		// Issue 13 point 5. A public address literal: this node has no
		// --webhook-allow-private, and the test needs no DNS.
		m := want(t, v.send(t, "POST", base+"/v1/webhooks", key, `{"url":"https://93.184.215.14/hook","events":["link.clicked","link.created"]}`), 201)
		id := m["id"].(string)
		want(t, v.send(t, "GET", base+"/v1/webhooks", key, ""), 200)
		want(t, v.send(t, "GET", base+"/v1/webhooks/"+id, key, ""), 200)
		want(t, v.send(t, "GET", base+"/v1/webhooks/"+id+"/deliveries", key, ""), 200)
		wantProblem(t, v.send(t, "POST", base+"/v1/webhooks", key, `{"url":"http://127.0.0.1:9/hook","events":["link.created"]}`), 422, "webhook-url-forbidden")
		wantProblem(t, v.send(t, "POST", base+"/v1/webhooks", key, `{"url":"https://93.184.215.14/hook","events":[]}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "GET", base+"/v1/webhooks", "", ""), 401, "unauthorized")
		wantProblem(t, v.send(t, "GET", base+"/v1/webhooks/wh_0000000000000001", key, ""), 404, "not-found")
		wantProblem(t, v.send(t, "GET", base+"/v1/webhooks/wh_0000000000000001/deliveries", key, ""), 404, "not-found")
		want(t, v.send(t, "DELETE", base+"/v1/webhooks/"+id, key, ""), 204)
		wantProblem(t, v.send(t, "DELETE", base+"/v1/webhooks/"+id, key, ""), 404, "not-found")
	})

	t.Run("reports", func(t *testing.T) {
		// --report-burst 3: good, unknown code, bad body, then 429.
		m := want(t, v.send(t, "POST", base+"/v1/reports", "", fmt.Sprintf(`{"url":"%s/oa-perm","reason":"phishing","details":"fake login"}`, base)), 202)
		if m["status"] != "received" {
			t.Fatalf("report: %v", m)
		}
		wantProblem(t, v.send(t, "POST", base+"/v1/reports", "", `{"url":"nosuchcode","reason":"spam"}`), 404, "not-found")
		wantProblem(t, v.send(t, "POST", base+"/v1/reports", "", `{"url":"oa-perm","reason":"boring"}`, invalid), 400, "invalid-request")
		ex := v.send(t, "POST", base+"/v1/reports", "", `{"url":"oa-perm","reason":"spam"}`)
		wantProblem(t, ex, 429, "rate-limited")
		if ex.header.Get("Retry-After") == "" {
			t.Fatalf("429 without Retry-After: %v", ex.header)
		}
	})

	t.Run("shares and stats exports", func(t *testing.T) {
		// Issue 13 points 6 and 7. The zip's contents are checked by
		// TestE2EStatsExport; here every exchange against the description.
		ex := want2(t, v.send(t, "GET", base+"/v1/sites/"+site+"/stats/export", key, ""), 200)
		if ex.header.Get("Content-Type") != "application/zip" || len(ex.body) < 22 {
			t.Fatalf("site export: %s, %d bytes", ex.header.Get("Content-Type"), len(ex.body))
		}
		wantProblem(t, v.send(t, "GET", query(base+"/v1/sites/"+site+"/stats/export", "tz", "Nowhere/Else"), key, ""), 400, "invalid-request")
		wantProblem(t, v.send(t, "GET", base+"/v1/sites/000000000000/stats/export", key, ""), 404, "not-found")
		want(t, v.send(t, "GET", query(base+"/v1/links/oa-r307/stats/export", "granularity", "hour"), key, ""), 200)
		wantProblem(t, v.send(t, "GET", base+"/v1/links/oa-r307/stats/export", "", ""), 401, "unauthorized")

		m := want(t, v.send(t, "POST", base+"/v1/sites/"+site+"/shares", key, `{"name":"press"}`), 201)
		siteShare, siteShareID := m["url"].(string), m["id"].(string)
		m = want(t, v.send(t, "POST", base+"/v1/links/oa-r307/shares", key, `{"password":"s3cret-pass"}`), 201)
		linkShare, linkShareID := m["url"].(string), m["id"].(string)
		wantProblem(t, v.send(t, "POST", base+"/v1/sites/"+site+"/shares", key, `{"colour":"red"}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "POST", base+"/v1/sites/000000000000/shares", key, `{}`), 404, "not-found")
		wantProblem(t, v.send(t, "POST", base+"/v1/links/nosuchcode/shares", key, ``), 404, "not-found")
		wantProblem(t, v.send(t, "POST", base+"/v1/links/oa-r307/shares", "", `{}`), 401, "unauthorized")
		want(t, v.send(t, "GET", base+"/v1/sites/"+site+"/shares", key, ""), 200)
		want(t, v.send(t, "GET", base+"/v1/links/oa-r307/shares", key, ""), 200)
		wantProblem(t, v.send(t, "GET", base+"/v1/links/nosuchcode/shares", key, ""), 404, "not-found")
		wantProblem(t, v.send(t, "GET", base+"/v1/sites/"+site+"/shares", "", ""), 401, "unauthorized")

		want(t, v.send(t, "GET", siteShare, "", ""), 200)
		want(t, v.send(t, "GET", siteShare+"/about", "", ""), 200)
		want(t, v.send(t, "GET", siteShare+"/v1/sites/"+site+"/stats/aggregate", "", ""), 200)
		want(t, v.send(t, "GET", siteShare+"/v1/sites/"+site+"/stats/export", "", ""), 200)
		wantProblem(t, v.send(t, "GET", siteShare+"/v1/sites/000000000000/stats/aggregate", "", ""), 404, "not-found")
		want(t, v.send(t, "GET", linkShare, "", ""), 200) // the password form
		wantProblem(t, v.send(t, "GET", linkShare+"/about", "", ""), 401, "unauthorized")
		wantProblem(t, v.send(t, "GET", linkShare+"/v1/links/oa-r307/stats", "", ""), 401, "unauthorized")
		wantProblem(t, v.send(t, "GET", linkShare+"/v1/links/oa-r307/stats/breakdown", "", ""), 401, "unauthorized")
		form := withHeader("Content-Type", "application/x-www-form-urlencoded")
		want(t, v.send(t, "POST", linkShare, "", "password=wrong", form), 401)
		ex = want2(t, v.send(t, "POST", linkShare, "", "password=s3cret-pass", form), 303)
		cookie := withHeader("Cookie", strings.SplitN(ex.header.Get("Set-Cookie"), ";", 2)[0])
		want(t, v.send(t, "GET", linkShare+"/about", "", "", cookie), 200)
		want(t, v.send(t, "GET", linkShare+"/v1/links/oa-r307/stats", "", "", cookie), 200)
		want(t, v.send(t, "GET", query(linkShare+"/v1/links/oa-r307/stats/breakdown", "dimension", "country"), "", "", cookie), 200)
		wantProblem(t, v.send(t, "GET", linkShare+"/v1/links/oa-perm/stats", "", "", cookie), 404, "not-found")

		want(t, v.send(t, "DELETE", base+"/v1/sites/"+site+"/shares/"+siteShareID, key, ""), 204)
		wantProblem(t, v.send(t, "DELETE", base+"/v1/sites/"+site+"/shares/"+siteShareID, key, ""), 404, "not-found")
		want(t, v.send(t, "DELETE", base+"/v1/links/oa-r307/shares/"+linkShareID, key, ""), 204)
		wantProblem(t, v.send(t, "DELETE", base+"/v1/links/oa-r307/shares/"+linkShareID, "", ""), 401, "unauthorized")
		want(t, v.send(t, "GET", siteShare, "", ""), 404)
		want(t, v.send(t, "POST", linkShare, "", "password=s3cret-pass", form), 404)
		wantProblem(t, v.send(t, "GET", siteShare+"/about", "", ""), 404, "not-found")
		wantProblem(t, v.send(t, "GET", siteShare+"/v1/sites/"+site+"/stats/aggregate", "", ""), 404, "not-found")
		wantProblem(t, v.send(t, "GET", linkShare+"/v1/links/oa-r307/stats", "", "", cookie), 404, "not-found")
		wantProblem(t, v.send(t, "GET", linkShare+"/v1/links/oa-r307/stats/overview", "", "", cookie), 404, "not-found")
	})

	t.Run("bulk and export", func(t *testing.T) {
		m := want(t, v.send(t, "POST", base+"/v1/links/bulk", key,
			`{"links":[{"url":"https://example.com/bulk-1","alias":"oa-bulk","external_id":"oa:1"},{"url":"ftp://example.com/"},{"url":"https://example.com/bulk-1","external_id":"oa:1"}]}`), 207)
		if m["created"] != float64(1) || m["existing"] != float64(1) || m["failed"] != float64(1) {
			t.Fatalf("bulk counts: %v", m)
		}
		wantProblem(t, v.send(t, "POST", base+"/v1/links/bulk", key, `{"links":[]}`, invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "POST", base+"/v1/links/bulk", key, `{"links":[`+strings.Repeat(`{"url":"https://example.com/"},`, 1000)+`{"url":"https://example.com/"}]}`, invalid), 413, "payload-too-large")
		wantProblem(t, v.send(t, "POST", base+"/v1/links/bulk", "", `{"links":[{"url":"https://example.com/"}]}`), 401, "unauthorized")
		for _, u := range []string{query(base+"/v1/links/export", "format", "csv"), query(base+"/v1/links/export", "format", "json"), base + "/v1/links/export"} {
			ex := v.send(t, "GET", u, key, "")
			if ex.status != 200 || !strings.Contains(string(ex.body), "https://example.com/bulk-1") {
				t.Fatalf("export %s: %d without the bulk link: %s", u, ex.status, ex.body)
			}
		}
		wantProblem(t, v.send(t, "GET", query(base+"/v1/links/export", "format", "xml"), key, "", invalid), 400, "invalid-request")
		wantProblem(t, v.send(t, "GET", base+"/v1/links/export", "", ""), 401, "unauthorized")
	})

	v.check(t)
	// Every operation of the description was exercised.
	for _, op := range v.operations() {
		if len(v.statuses(op)) == 0 {
			t.Errorf("operation %s of docs/openapi.yaml was never exercised", op)
		}
	}
	if t.Failed() {
		return
	}
	var lines []string
	for _, op := range v.operations() {
		lines = append(lines, fmt.Sprintf("%s %v", op, v.statuses(op)))
	}
	slices.Sort(lines)
	t.Logf("validated exchanges by operation and status:\n%s", strings.Join(lines, "\n"))
}

// TestE2EOpenAPIWriteLimits validates the 429 answers of the key's write
// and create limits against the description, on a node whose limits let
// one write through: creates, edits, deletes and site writes.
func TestE2EOpenAPIWriteLimits(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, dir, "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0",
		"--write-rate", "0.01", "--create-rate-key", "0.01")
	base := "http://" + p.http
	waitFor(t, "readyz", 30*time.Second, func() bool { return do(t, "GET", base+"/readyz", "", "").status == 200 })
	var key string
	waitFor(t, "dev-api-key", 30*time.Second, func() bool { key = readKeyMaybe(filepath.Join(dir, "dev-api-key")); return key != "" })
	v := newSpecValidator(t, base)

	// Both buckets hold one token at these rates: the first write
	// passes, the next ones wait 100 s.
	r := v.send(t, "POST", base+"/v1/links", key, `{"url":"https://example.com/one","alias":"lim-one"}`)
	if r.status != 201 {
		t.Fatalf("first create: %d %s", r.status, r.body)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/links", `{"url":"https://example.com/two"}`},
		{"PATCH", "/v1/links/lim-one", `{"url":"https://example.com/three"}`},
		{"DELETE", "/v1/links/lim-one", ""},
		{"POST", "/v1/sites", `{"domain":"limits.example"}`},
	} {
		r := v.send(t, c.method, base+c.path, key, c.body)
		if r.status != 429 || r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s: got %d (Retry-After %q); want 429 with Retry-After: %s", c.method, c.path, r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	v.check(t)
}
