package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// plainChromium is a headless Chromium with no DevTools connection. The
// prerender test needs one: while a DevTools client is attached to a page
// target, as chromedp's are, Chromium does not prerender
// (PrerenderingDisabledByDevTools), so that test drives the browser from
// the pages themselves and reads the results at the site and the node.
type plainChromium struct {
	cmd      *exec.Cmd
	dataDir  string
	output   lockedBuffer
	done     chan struct{}
	stopOnce sync.Once
}

func startPlainChromium(t *testing.T, url string) *plainChromium {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		requireTool(t, "headless Chromium is not installed (%v); on Debian: apt-get install chromium, or run .ci/install-browser.sh", err)
	}
	b := &plainChromium{dataDir: t.TempDir(), done: make(chan struct{})}
	b.cmd = exec.Command(chromiumPath, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
		"--disable-breakpad", "--window-size=1024,768", "--user-data-dir="+b.dataDir, url)
	// As for the chromedp browser: close finds the processes by group and
	// by this variable, and the browser dies with the test binary.
	b.cmd.Env = append(os.Environ(), browserMarkVar+"="+b.dataDir,
		"XDG_CONFIG_HOME="+filepath.Join(b.dataDir, "config"), "XDG_CACHE_HOME="+filepath.Join(b.dataDir, "cache"))
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	b.cmd.Stdout, b.cmd.Stderr = &b.output, &b.output
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("cannot start %s: %v", chromiumPath, err)
	}
	go func() { b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() { b.close(t) })
	return b
}

// close kills the browser at once (so its pages get no pagehide and send
// nothing more) and checks that none of its processes is left.
func (b *plainChromium) close(t *testing.T) {
	t.Helper()
	b.stopOnce.Do(func() {
		pgid := b.cmd.Process.Pid
		syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-b.done:
		case <-time.After(10 * time.Second):
			t.Errorf("chromium %d still ran 10s after SIGKILL", pgid)
		}
		// Crash handlers run in sessions of their own: found by the mark.
		deadline := time.Now().Add(10 * time.Second)
		for {
			left := browserProcesses(pgid, browserMarkVar+"="+b.dataDir)
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("chromium processes %v still ran 10s after the browser was killed", left)
				return
			}
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

func (b *plainChromium) diagnostics(site *siteServer) func() string {
	return func() string {
		var s strings.Builder
		// Chromium does not prerender on a device it deems short of memory
		// either; then prerendered.html is never asked for.
		fmt.Fprintf(&s, "site requests (a prerender has Sec-Purpose prefetch;prerender):\n")
		for _, h := range site.requests() {
			fmt.Fprintf(&s, "  %s?%s purpose %q %s\n", h.path, h.query, h.purpose, h.body)
		}
		if out := b.output.String(); out != "" {
			s.WriteString("chromium output (last lines):\n" + lastLines(out, 15) + "\n")
		}
		return s.String()
	}
}

// TestE2EBrowserTrackerPrerender lets Chromium prerender a tracked page
// (speculation rules) and then activates it: the tracker starts while the
// page is prerendering but sends its pageview only on activation, as
// Plausible's waits for the page to be shown. A prerendered page the
// visitor never opens is never counted.
func TestE2EBrowserTrackerPrerender(t *testing.T) {
	n := startTrackedNode(t)
	const domain = "127.0.0.1"
	siteID := n.createSite(t, domain)
	site := startSiteServer(t, n.base, domain, "")
	// prerender-start.html prerenders prerendered.html, waits until that
	// page says (on /ran) that its tracker started while prerendering, then
	// navigates to it; the activated page posts what it sent to /report.
	br := startPlainChromium(t, site.URL+"/prerender-start.html")
	diag := br.diagnostics(site)

	if h := site.waitHit(t, "/prerendered.html", diag); !strings.Contains(h.purpose, "prerender") {
		t.Fatalf("prerendered.html was fetched with Sec-Purpose %q; want a prerender\n%s", h.purpose, diag())
	}
	if h := site.waitHit(t, "/ran", diag); h.query != "tracker=true&prerendering=true" {
		t.Fatalf("/ran?%s; want the tracker started while the page was prerendering\n%s", h.query, diag())
	}
	var report struct {
		ActivationStart float64    `json:"activationStart"`
		Sent            []pageSend `json:"sent"`
	}
	h := site.waitHit(t, "/report", diag)
	if err := json.Unmarshal([]byte(h.body), &report); err != nil {
		t.Fatalf("/report body %q: %v", h.body, err)
	}
	if report.ActivationStart <= 0 {
		t.Fatalf("activationStart %v: the page was loaded, not activated from a prerender\n%s", report.ActivationStart, diag())
	}
	checkSent(t, report.Sent, []sentStep{{"pageview", "/prerendered.html", "xhr"}})
	if len(report.Sent) == 1 && (report.Sent[0].Prerendering || report.Sent[0].Visibility != "visible") {
		t.Errorf("pageview sent with prerendering %v, visibility %q; want after activation, visible", report.Sent[0].Prerendering, report.Sent[0].Visibility)
	}
	fetched := 0
	for _, h := range site.requests() {
		if h.path == "/prerendered.html" {
			fetched++
		}
	}
	if fetched != 1 {
		t.Errorf("prerendered.html was fetched %d times; want once (the prerender, then activated)", fetched)
	}
	if t.Failed() {
		t.Fatalf("%s", diag())
	}

	n.waitSiteEvents(t, siteID, 1, diag)
	br.close(t)
	n.assertSiteEvents(t, siteID, map[string]int{"pageview /prerendered.html": 1})
}
