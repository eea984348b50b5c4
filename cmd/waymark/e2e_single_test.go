package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var codeRE = regexp.MustCompile(`^[0-9A-Za-z]{7}$`)

// TestE2ESingleNode drives a real `waymark node --dev` process through every
// public endpoint and error type, then SIGKILLs it and checks that every
// acknowledged link survives the restart.
func TestE2ESingleNode(t *testing.T) {
	dir := t.TempDir()
	p := startNode(t, dir, "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0",
		"--blocked-hosts", "evil.example")
	base := "http://" + p.http
	waitFor(t, "readyz", 30*time.Second, func() bool { return do(t, "GET", base+"/readyz", "", "").status == 200 })
	if r := do(t, "GET", base+"/healthz", "", ""); r.status != 200 {
		t.Fatalf("healthz: got %d; want 200", r.status)
	}
	var key string
	waitFor(t, "dev-api-key", 30*time.Second, func() bool {
		b := readKeyMaybe(filepath.Join(dir, "dev-api-key"))
		key = b
		return b != ""
	})

	acked := map[string]string{} // code -> destination, every link answered 201

	t.Run("create and follow", func(t *testing.T) {
		dest := "https://Example.COM:443/a/b%2Fc?q=1+2&x=%E2%9C%93#frag"
		r := do(t, "POST", base+"/v1/links", key, fmt.Sprintf(`{"url":%q}`, dest))
		if r.status != 201 {
			t.Fatalf("create: got %d; want 201: %s", r.status, r.body)
		}
		m := r.json(t)
		code, _ := m["code"].(string)
		if !codeRE.MatchString(code) {
			t.Fatalf("code %q is not 7 base62 characters", code)
		}
		wantURL := "https://example.com/a/b%2Fc?q=1+2&x=%E2%9C%93#frag"
		if m["url"] != wantURL {
			t.Fatalf("normalised url: got %v; want %s", m["url"], wantURL)
		}
		if m["short_url"] != base+"/"+code || r.header.Get("Location") == "" || r.header.Get("Waymark-Index") == "" {
			t.Fatalf("short_url %v, Location %q, Waymark-Index %q", m["short_url"], r.header.Get("Location"), r.header.Get("Waymark-Index"))
		}
		if m["redirect"] != float64(302) || m["status"] != "active" || m["expires_at"] != nil || m["click_limit"] != nil {
			t.Fatalf("defaults: %s", r.body)
		}
		acked[code] = wantURL
		for _, method := range []string{"GET", "HEAD"} {
			red := do(t, method, base+"/"+code, "", "")
			if red.status != 302 || red.header.Get("Location") != wantURL {
				t.Fatalf("%s /%s: got %d Location %q; want 302 %q", method, code, red.status, red.header.Get("Location"), wantURL)
			}
			if cc := red.header.Get("Cache-Control"); !strings.HasPrefix(cc, "private, max-age=") {
				t.Fatalf("Cache-Control: got %q", cc)
			}
		}
		// The same long URL twice gives two codes.
		r2 := do(t, "POST", base+"/v1/links", key, fmt.Sprintf(`{"url":%q}`, dest))
		if c2 := r2.json(t)["code"]; r2.status != 201 || c2 == code {
			t.Fatalf("second create of the same URL: got %d code %v; want 201 and a new code", r2.status, c2)
		}
		acked[r2.json(t)["code"].(string)] = wantURL
	})

	t.Run("query forwarding", func(t *testing.T) {
		// Worked out by hand from the rule in edge/query.go: the
		// destination's parameters without the clashing key, then the
		// visit's, then the fragment.
		r := do(t, "POST", base+"/v1/links", key, `{"url":"https://q.example/p?a=1&b=2#f"}`)
		if r.status != 201 || r.json(t)["forward_query"] != true {
			t.Fatalf("create: %d %s; want 201 with forward_query true", r.status, r.body)
		}
		code := r.json(t)["code"].(string)
		if got := do(t, "GET", base+"/"+code+"?b=3&utm_source=tw", "", "").header.Get("Location"); got != "https://q.example/p?a=1&b=3&utm_source=tw#f" {
			t.Errorf("forwarded Location %s", got)
		}
		r = do(t, "PATCH", base+"/v1/links/"+code, key, `{"forward_query":false}`)
		if r.status != 200 || r.json(t)["forward_query"] != false {
			t.Fatalf("patch: %d %s", r.status, r.body)
		}
		waitFor(t, "the edit in the redirect", 10*time.Second, func() bool {
			return do(t, "GET", base+"/"+code+"?b=3", "", "").header.Get("Location") == "https://q.example/p?a=1&b=2#f"
		})
	})

	t.Run("redirect types and alias", func(t *testing.T) {
		r := do(t, "POST", base+"/v1/links", key, `{"url":"https://example.org/perm","alias":"my-Perm_1","redirect":301}`)
		if r.status != 201 || r.json(t)["code"] != "my-Perm_1" {
			t.Fatalf("alias create: got %d: %s", r.status, r.body)
		}
		acked["my-Perm_1"] = "https://example.org/perm"
		red := do(t, "GET", base+"/my-Perm_1", "", "")
		if red.status != 301 || !strings.Contains(red.header.Get("Cache-Control"), "public") {
			t.Fatalf("301 link: got %d Cache-Control %q", red.status, red.header.Get("Cache-Control"))
		}
		if red := do(t, "GET", base+"/my-perm_1", "", ""); red.status != 404 {
			t.Fatalf("aliases are case-sensitive: got %d; want 404", red.status)
		}
		if r := do(t, "PATCH", base+"/v1/links/my-Perm_1", key, `{"url":"https://example.org/other"}`); r.status != 409 {
			t.Fatalf("changing a permanent link's url: got %d; want 409: %s", r.status, r.body)
		}
		r = do(t, "POST", base+"/v1/links", key, `{"url":"https://example.org/t","redirect":307}`)
		code := r.json(t)["code"].(string)
		acked[code] = "https://example.org/t"
		if red := do(t, "GET", base+"/"+code, "", ""); red.status != 307 {
			t.Fatalf("307 link: got %d", red.status)
		}
	})

	t.Run("errors", func(t *testing.T) {
		cases := []struct {
			name, method, path, key, body string
			status                        int
			typ                           string
		}{
			{"no key", "POST", "/v1/links", "", `{"url":"https://a.example"}`, 401, "unauthorized"},
			{"bad key", "POST", "/v1/links", "wm_nope", `{"url":"https://a.example"}`, 401, "unauthorized"},
			{"ftp scheme", "POST", "/v1/links", key, `{"url":"ftp://a.example/x"}`, 400, "invalid-url"},
			{"relative", "POST", "/v1/links", key, `{"url":"/just/a/path"}`, 400, "invalid-url"},
			{"userinfo", "POST", "/v1/links", key, `{"url":"https://user@a.example/"}`, 400, "invalid-url"},
			{"own domain", "POST", "/v1/links", key, fmt.Sprintf(`{"url":"http://%s/x"}`, p.http), 400, "invalid-url"},
			{"too long", "POST", "/v1/links", key, fmt.Sprintf(`{"url":"https://a.example/%s"}`, strings.Repeat("a", 2100)), 400, "invalid-url"},
			{"blocked", "POST", "/v1/links", key, `{"url":"https://www.evil.example/x"}`, 422, "destination-blocked"},
			{"reserved alias", "POST", "/v1/links", key, `{"url":"https://a.example","alias":"Metrics"}`, 409, "alias-unavailable"},
			{"taken alias", "POST", "/v1/links", key, `{"url":"https://a.example","alias":"my-Perm_1"}`, 409, "alias-unavailable"},
			{"bad alias", "POST", "/v1/links", key, `{"url":"https://a.example","alias":"a/b"}`, 400, ""},
			{"unknown link", "GET", "/v1/links/zzzzzzz", key, "", 404, "not-found"},
		}
		for _, c := range cases {
			r := do(t, c.method, base+c.path, c.key, c.body)
			if r.status != c.status {
				t.Errorf("%s: got %d; want %d: %s", c.name, r.status, c.status, r.body)
				continue
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
				t.Errorf("%s: Content-Type %q; want application/problem+json", c.name, ct)
				continue
			}
			m := r.json(t)
			if typ, _ := m["type"].(string); c.typ != "" && !strings.HasSuffix(typ, c.typ) {
				t.Errorf("%s: type %q; want suffix %q", c.name, typ, c.typ)
			}
			if d, _ := m["detail"].(string); d == "" {
				t.Errorf("%s: problem has no detail: %s", c.name, r.body)
			}
		}
		red := do(t, "GET", base+"/nope123", "", "")
		if red.status != 404 || red.header.Get("Location") != "" || !strings.Contains(red.header.Get("Content-Type"), "text/html") {
			t.Fatalf("unknown code: got %d Location %q Content-Type %q", red.status, red.header.Get("Location"), red.header.Get("Content-Type"))
		}
	})

	t.Run("tenant isolation", func(t *testing.T) {
		out, errOut, code := runCLI(t, []string{"WAYMARK_ADMIN_ADDR=" + p.admin}, "owners", "create", "--token-file", filepath.Join(dir, "operator-token"), "second")
		other := strings.TrimSpace(out)
		if code != 0 || !strings.HasPrefix(other, "wm_") || strings.Contains(other, "\n") {
			t.Fatalf("owners create: exit %d stdout %q stderr %q; want only an API key", code, out, errOut)
		}
		for code := range acked {
			for _, m := range []string{"GET", "PATCH", "DELETE"} {
				body := ""
				if m == "PATCH" {
					body = `{"status":"disabled"}`
				}
				if r := do(t, m, base+"/v1/links/"+code, other, body); r.status != 404 {
					t.Fatalf("%s of another owner's link: got %d; want 404", m, r.status)
				}
			}
			break
		}
		r := do(t, "GET", base+"/v1/links", other, "")
		if items, _ := r.json(t)["links"].([]any); r.status != 200 || len(items) != 0 {
			t.Fatalf("other owner's list: got %d %s; want 200 and empty", r.status, r.body)
		}
	})

	t.Run("list with cursor", func(t *testing.T) {
		seen := map[string]bool{}
		cursor := ""
		for page := 0; page < 20; page++ {
			r := do(t, "GET", base+"/v1/links?limit=2&cursor="+cursor, key, "")
			if r.status != 200 {
				t.Fatalf("list: got %d: %s", r.status, r.body)
			}
			m := r.json(t)
			for _, it := range m["links"].([]any) {
				c := it.(map[string]any)["code"].(string)
				if seen[c] {
					t.Fatalf("code %s listed twice", c)
				}
				seen[c] = true
			}
			cursor, _ = m["next_cursor"].(string)
			if cursor == "" {
				break
			}
		}
		for c := range acked {
			if !seen[c] {
				t.Fatalf("code %s missing from the listing", c)
			}
		}
	})

	t.Run("idempotency", func(t *testing.T) {
		body := `{"url":"https://idem.example/1"}`
		r1 := do(t, "POST", base+"/v1/links", key, body, "Idempotency-Key", "k-1")
		r2 := do(t, "POST", base+"/v1/links", key, body, "Idempotency-Key", "k-1")
		if r1.status != 201 || r2.status != 201 || string(r1.body) != string(r2.body) {
			t.Fatalf("replay: got %d %s then %d %s; want the same 201", r1.status, r1.body, r2.status, r2.body)
		}
		acked[r1.json(t)["code"].(string)] = "https://idem.example/1"
		r3 := do(t, "POST", base+"/v1/links", key, `{"url":"https://idem.example/2"}`, "Idempotency-Key", "k-1")
		if r3.status != 422 || !strings.HasSuffix(r3.json(t)["type"].(string), "idempotency-mismatch") {
			t.Fatalf("same key, other body: got %d %s; want 422 idempotency-mismatch", r3.status, r3.body)
		}
	})

	t.Run("edit, status pages and delete", func(t *testing.T) {
		r := do(t, "POST", base+"/v1/links", key, `{"url":"https://edit.example/1"}`)
		code := r.json(t)["code"].(string)
		if red := do(t, "GET", base+"/"+code, "", ""); red.header.Get("Location") != "https://edit.example/1" {
			t.Fatalf("before edit: Location %q", red.header.Get("Location"))
		}
		if r := do(t, "PATCH", base+"/v1/links/"+code, key, `{"url":"https://edit.example/2"}`); r.status != 200 {
			t.Fatalf("patch: got %d %s", r.status, r.body)
		}
		// A new destination shows the review interstitial first (--edit-review 24h).
		if red := do(t, "GET", base+"/"+code, "", ""); red.status != 200 || !strings.Contains(string(red.body), `href="https://edit.example/2"`) {
			t.Fatalf("edit not visible on the next request as the review interstitial: %d Location %q", red.status, red.header.Get("Location"))
		}
		acked[code] = "https://edit.example/2"
		if r := do(t, "GET", base+"/v1/links/"+code, key, ""); r.status != 200 || r.json(t)["url"] != "https://edit.example/2" {
			t.Fatalf("get after edit: %d %s", r.status, r.body)
		}
		if r := do(t, "DELETE", base+"/v1/links/"+code, key, ""); r.status != 200 && r.status != 204 {
			t.Fatalf("delete: got %d %s", r.status, r.body)
		}
		delete(acked, code)
		if red := do(t, "GET", base+"/"+code, "", ""); red.status != 410 || red.header.Get("Location") != "" {
			t.Fatalf("deleted link: got %d Location %q; want 410 without Location", red.status, red.header.Get("Location"))
		}
		// A deleted code is never handed out again, not even as an alias.
		if r := do(t, "POST", base+"/v1/links", key, fmt.Sprintf(`{"url":"https://a.example","alias":%q}`, code)); r.status != 409 {
			t.Fatalf("alias of a deleted code: got %d; want 409", r.status)
		}
	})

	t.Run("expiry", func(t *testing.T) {
		exp := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		r := do(t, "POST", base+"/v1/links", key, fmt.Sprintf(`{"url":"https://exp.example/","expires_at":%q}`, exp))
		if r.status != 201 {
			t.Fatalf("create with expiry: got %d %s", r.status, r.body)
		}
		code := r.json(t)["code"].(string)
		if red := do(t, "GET", base+"/"+code, "", ""); red.status != 302 {
			t.Fatalf("before expiry: got %d; want 302", red.status)
		}
		waitFor(t, "expiry", 10*time.Second, func() bool { return do(t, "GET", base+"/"+code, "", "").status == 410 })
		if r := do(t, "POST", base+"/v1/links", key, `{"url":"https://exp.example/","expires_at":"yesterday"}`); r.status != 400 {
			t.Fatalf("bad expires_at: got %d; want 400", r.status)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		r := do(t, "GET", base+"/metrics", "", "")
		if r.status != 200 || !strings.Contains(string(r.body), "waymark_redirects_total") {
			t.Fatalf("metrics: got %d, missing waymark_redirects_total", r.status)
		}
	})

	t.Run("cli", func(t *testing.T) {
		env := []string{"WAYMARK_ADMIN_ADDR=" + p.admin, "WAYMARK_TOKEN=" + readKey(t, filepath.Join(dir, "operator-token"))}
		out, errOut, code := runCLI(t, env, "status")
		if code != 0 || !strings.Contains(out, "leader") {
			t.Fatalf("status: exit %d %q %q", code, out, errOut)
		}
		out, _, code = runCLI(t, env, "raft", "peers", "-format", "json")
		if code != 0 || !strings.Contains(out, `"suffrage": "voter"`) {
			t.Fatalf("raft peers: exit %d %q", code, out)
		}
		_, errOut, code = runCLI(t, []string{"WAYMARK_ADMIN_ADDR=" + p.admin, "WAYMARK_TOKEN=wrong"}, "status")
		if code != 4 || !strings.Contains(errOut, "401") {
			t.Fatalf("bad token: exit %d %q; want 4", code, errOut)
		}
		_, errOut, code = runCLI(t, []string{"WAYMARK_ADMIN_ADDR=127.0.0.1:1", "WAYMARK_TOKEN=x"}, "status")
		if code != 3 || !strings.Contains(errOut, "cannot reach") {
			t.Fatalf("unreachable: exit %d %q; want 3", code, errOut)
		}
		if _, _, code := runCLI(t, nil, "no-such-command"); code != 2 {
			t.Fatalf("unknown command: exit %d; want 2", code)
		}
	})

	// SIGKILL, restart on the same data folder: every acknowledged link resolves.
	p.kill()
	p2 := startNode(t, dir, "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0")
	base2 := "http://" + p2.http
	waitFor(t, "readyz after restart", 30*time.Second, func() bool { return do(t, "GET", base2+"/readyz", "", "").status == 200 })
	for code, dest := range acked {
		red := do(t, "GET", base2+"/"+code, "", "")
		if red.status < 300 || red.status > 308 || red.header.Get("Location") != dest {
			t.Errorf("after SIGKILL and restart: /%s got %d Location %q; want %q", code, red.status, red.header.Get("Location"), dest)
		}
	}
	if readKey(t, filepath.Join(dir, "dev-api-key")) != key {
		t.Fatal("dev API key changed across restart")
	}
	if r := do(t, "POST", base2+"/v1/links", key, `{"url":"https://after.example/"}`); r.status != 201 {
		t.Fatalf("create after restart: got %d %s", r.status, r.body)
	}
	p2.stop(t)
}

func readKeyMaybe(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
