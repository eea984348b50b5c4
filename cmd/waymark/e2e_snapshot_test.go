package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2ESnapshotRoundTrip: `waymark snapshot save` on one cluster and
// `waymark snapshot restore` into a fresh one (another cluster key, a
// voter and an edge) gives back every link (with its status), owner, API
// key and site on every node; damaged, foreign and unreadable files are
// refused with a clear error and change nothing; writes after the restore
// replicate, although the source's log was longer than the new cluster's.
func TestE2ESnapshotRoundTrip(t *testing.T) {
	// The source: a dev node with two owners, links, a takedown and a site.
	srcDir := t.TempDir()
	src := startNode(t, srcDir, "--dev", "--http-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	var devKey string
	waitFor(t, "dev key", 30*time.Second, func() bool { devKey = readKeyMaybe(filepath.Join(srcDir, "dev-api-key")); return devKey != "" })
	srcEnv := []string{"WAYMARK_ADMIN_ADDR=" + src.admin, "WAYMARK_TOKEN=" + readKey(t, filepath.Join(srcDir, "operator-token"))}
	alice, _, code := runCLI(t, srcEnv, "owners", "create", "alice")
	alice = strings.TrimSpace(alice)
	if code != 0 {
		t.Fatalf("owners create: exit %d", code)
	}
	base := "http://" + src.http
	links := map[string]string{} // code -> destination
	for i := 0; i < 40; i++ {
		key := alice
		if i%4 == 0 {
			key = devKey
		}
		dest := fmt.Sprintf("https://dest.example/%d", i)
		r := do(t, "POST", base+"/v1/links", key, fmt.Sprintf(`{"url":%q}`, dest))
		if r.status != 201 {
			t.Fatalf("create %d: %d %s", i, r.status, r.body)
		}
		links[r.json(t)["code"].(string)] = dest
	}
	if r := do(t, "POST", base+"/v1/links", alice, `{"url":"https://dest.example/alias","alias":"my-alias"}`); r.status != 201 {
		t.Fatalf("create alias: %d %s", r.status, r.body)
	}
	links["my-alias"] = "https://dest.example/alias"
	var gone string
	for c := range links {
		gone = c
		break
	}
	if r := do(t, "DELETE", base+"/v1/links/"+gone, ownerOf(t, base, gone, alice, devKey), ""); r.status != 204 {
		t.Fatalf("takedown %s: %d %s", gone, r.status, r.body)
	}
	site := do(t, "POST", base+"/v1/sites", alice, `{"domain":"shop.example","timezone":"Europe/Berlin"}`)
	if site.status != 201 {
		t.Fatalf("create site: %d %s", site.status, site.body)
	}
	siteID := site.json(t)["id"].(string)

	// Save, with the flags after the file name.
	backup := filepath.Join(t.TempDir(), "waymark.snap")
	out, errOut, code := runCLI(t, nil, "snapshot", "save", backup, "--admin-addr", src.admin, "--token-file", filepath.Join(srcDir, "operator-token"))
	if code != 0 {
		t.Fatalf("snapshot save: exit %d\n%s%s", code, out, errOut)
	}
	st, err := os.Stat(backup)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, fmt.Sprintf("written %d bytes", st.Size())) || !strings.Contains(out, "saved snapshot") {
		t.Errorf("snapshot save: stdout %q stderr %q; want a progress line with %d bytes", out, errOut, st.Size())
	}
	src.stop(t)

	// A fresh cluster: another cluster key, a voter and an edge, and an
	// owner of its own.
	c := newCluster(t)
	v1, e1, bob := c.voterAndEdge("us", "bob")
	if r := do(t, "GET", "http://"+v1.http+"/v1/links", alice, ""); r.status != 401 {
		t.Fatalf("alice's key on the fresh cluster before the restore: %d; want 401", r.status)
	}
	if r := do(t, "POST", "http://"+v1.http+"/v1/sites", bob, `{"domain":"bob.example"}`); r.status != 201 {
		t.Fatalf("bob's site: %d %s", r.status, r.body)
	}
	bobEvent := func(p *proc) string {
		r := do(t, "POST", "http://"+p.http+"/api/event", "", `{"n":"pageview","u":"https://bob.example/","d":"bob.example"}`,
			"Content-Type", "text/plain", "User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0")
		return r.header.Get("X-Waymark-Dropped")
	}
	waitFor(t, "bob's site known to e1", 20*time.Second, func() bool { return bobEvent(e1) == "" })

	// Bad files change nothing.
	good, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	damaged := append([]byte(nil), good...)
	damaged[len(damaged)/2] ^= 0x40
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"damaged":    {damaged, "checksum mismatch"},
		"truncated":  {good[:len(good)-10], "not a valid waymark snapshot"},
		"foreign":    {[]byte("PK\x03\x04 this is a zip file, not a snapshot at all......................"), "does not start with"},
		"unreadable": {wrapBackup([]byte("a checksummed payload the store cannot read")), "the store cannot read its payload"},
	} {
		path := filepath.Join(t.TempDir(), name+".snap")
		if err := os.WriteFile(path, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := runCLI(t, c.env("v1"), "snapshot", "restore", path)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("restore of a %s file: exit %d %q; want 1 and %q", name, code, errOut, tc.want)
		}
	}
	if r := do(t, "GET", "http://"+e1.http+"/v1/links", bob, ""); r.status != 200 {
		t.Fatalf("bob's key after the refused restores: %d; want 200 (nothing changed)", r.status)
	}
	if !ready(t, v1) || !ready(t, e1) {
		t.Fatal("a node is not ready after the refused restores")
	}
	if _, errOut, code := runCLI(t, c.env("e1"), "snapshot", "restore", backup); code != 1 || !strings.Contains(errOut, "leader") {
		t.Errorf("restore on the edge: exit %d %q; want 1 and a pointer to the leader", code, errOut)
	}

	// The restore, through the leader.
	out, errOut, code = runCLI(t, c.env("v1"), "snapshot", "restore", backup)
	if code != 0 {
		t.Fatalf("snapshot restore: exit %d\n%s%s\n%s", code, out, errOut, v1.logs())
	}
	if !strings.Contains(errOut, fmt.Sprintf("read %d of %d bytes (100%%)", len(good), len(good))) || !strings.Contains(out, "restored snapshot") {
		t.Errorf("snapshot restore: stdout %q stderr %q; want a progress line", out, errOut)
	}
	for _, p := range []*proc{v1, e1} {
		waitFor(t, "every link on "+p.http, 30*time.Second, func() bool {
			for code, dest := range links {
				if code == gone {
					if do(t, "GET", "http://"+p.http+"/"+code, "", "").status != 410 {
						return false
					}
					continue
				}
				if !resolves(t, p, code, dest) {
					return false
				}
			}
			return true
		})
		for name, key := range map[string]string{"alice": alice, "dev": devKey} {
			if r := do(t, "GET", "http://"+p.http+"/v1/links?limit=100", key, ""); r.status != 200 {
				t.Errorf("%s's key on %s after the restore: %d %s", name, p.http, r.status, r.body)
			}
		}
		if r := do(t, "GET", "http://"+p.http+"/v1/sites/"+siteID, alice, ""); r.status != 200 || !strings.Contains(string(r.body), "shop.example") {
			t.Errorf("site %s on %s after the restore: %d %s", siteID, p.http, r.status, r.body)
		}
		if r := do(t, "GET", "http://"+p.http+"/v1/links", bob, ""); r.status != 401 {
			t.Errorf("bob's key on %s after the restore: %d; want 401 (the restore replaces everything)", p.http, r.status)
		}
		if got := bobEvent(p); got != "unknown_site" {
			t.Errorf("an event for bob's site on %s after the restore: dropped %q; want unknown_site (the site is gone)", p.http, got)
		}
	}
	// The source's link listing comes back whole.
	var total int
	for _, key := range []string{alice, devKey} {
		r := do(t, "GET", "http://"+e1.http+"/v1/links?limit=100", key, "")
		total += len(r.json(t)["links"].([]any))
	}
	if total != len(links) {
		t.Errorf("links listed after the restore: %d; want %d", total, len(links))
	}

	// The new cluster's log now runs past the source's index (bytes 12-19
	// of the file), so no entry after the restore is taken for one the
	// restored store already holds.
	srcIndex := binary.BigEndian.Uint64(good[12:20])
	var status struct {
		AppliedIndex uint64 `json:"applied_index"`
	}
	out, _, code = runCLI(t, c.env("v1"), "status", "--format", "json")
	if err := json.Unmarshal([]byte(out), &status); code != 0 || err != nil || status.AppliedIndex <= srcIndex {
		t.Errorf("v1's raft applied index after the restore: %d (exit %d, %v); want above the source's %d", status.AppliedIndex, code, err, srcIndex)
	}

	// The region slots are the source's too: "local" (the dev node's) is
	// claimed, "us" is not until an operator claims it again.
	out, _, code = runCLI(t, c.env("v1"), "regions", "list")
	if code != 0 || !strings.Contains(out, "local") || strings.Contains(out, "us ") {
		t.Errorf("regions after the restore: exit %d\n%s\nwant the source's local and no us", code, out)
	}
	if out, errOut, code := runCLI(t, c.env("v1"), "regions", "add", "us"); code != 0 {
		t.Fatalf("regions add us: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, "e1 to apply the claim of us", 10*time.Second, func() bool {
		out, _, code := runCLI(t, c.env("e1"), "regions", "list")
		return code == 0 && strings.Contains(out, "us")
	})

	// New writes go on: created through the edge, seen on both nodes,
	// never colliding with a restored code.
	for i := 0; i < 5; i++ {
		dest := fmt.Sprintf("https://dest.example/after/%d", i)
		r := do(t, "POST", "http://"+e1.http+"/v1/links", alice, fmt.Sprintf(`{"url":%q}`, dest))
		if r.status != 201 {
			t.Fatalf("create after the restore: %d %s", r.status, r.body)
		}
		code := r.json(t)["code"].(string)
		if _, dup := links[code]; dup {
			t.Fatalf("a code made after the restore, %s, is a restored link's", code)
		}
		waitFor(t, "the new link on v1 and e1", 20*time.Second, func() bool { return resolves(t, v1, code, dest) && resolves(t, e1, code, dest) })
		links[code] = dest
	}

	// Both nodes restart on their restored stores (which now carry the
	// source's cluster id) and still serve every link.
	e1.stop(t)
	v1.stop(t)
	v1 = c.restart("v1")
	e1 = c.restart("e1")
	waitFor(t, "v1 and e1 ready after a restart", 60*time.Second, func() bool { return ready(t, v1) && ready(t, e1) })
	for _, p := range []*proc{v1, e1} {
		for code, dest := range links {
			if code != gone && !resolves(t, p, code, dest) {
				t.Errorf("%s does not resolve on %s after the restart", code, p.http)
			}
		}
	}
	if r := do(t, "POST", "http://"+e1.http+"/v1/links", alice, `{"url":"https://dest.example/after-restart"}`); r.status != 201 {
		t.Errorf("create after the restart: %d %s", r.status, r.body)
	}
}

// ownerOf returns whichever of the keys owns code.
func ownerOf(t *testing.T, base, code string, keys ...string) string {
	t.Helper()
	for _, k := range keys {
		if do(t, "GET", base+"/v1/links/"+code, k, "").status == 200 {
			return k
		}
	}
	t.Fatalf("no key owns %s", code)
	return ""
}

// wrapBackup frames payload as a backup file by the format (magic,
// version 1, flags, index, created, payload, size, SHA-256).
func wrapBackup(payload []byte) []byte {
	b := []byte("WMBACKUP")
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, 5)
	b = binary.BigEndian.AppendUint64(b, uint64(time.Now().UnixMilli()))
	b = append(b, payload...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(payload)))
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}
