// Package webview drives tabby's web view (the ui package) in a real headless Chromium, Debian's
// chromium, for tests: open the page, read what it shows (flow rows, graph vertices, session
// states) and take screenshots into the artifacts directory.
package webview

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium is Debian's browser (hack/install-deps.sh installs it).
const Chromium = "/usr/bin/chromium"

// Page is the web view open in a browser of its own.
type Page struct {
	t   testing.TB
	ctx context.Context
}

// Open starts a headless Chromium with an empty profile, opens url and waits for the page to
// have drawn the mesh once. The browser is stopped when the test ends, after a screenshot
// named after the test if it failed.
func Open(t testing.TB, ctx context.Context, url string) *Page {
	t.Helper()
	if _, err := os.Stat(Chromium); err != nil {
		t.Fatalf("the web view's browser tests need Debian's chromium (make deps): %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium),
		chromedp.Headless,
		chromedp.NoSandbox, // tests run as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// The machine may have no way out: nothing may try to reach the internet.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1600, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	p := &Page{t: t, ctx: bctx}
	t.Cleanup(func() {
		if t.Failed() {
			p.Screenshot("failed-" + t.Name())
		}
		cancelBrowser()
		cancelAlloc()
	})
	if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s in chromium: %v", url, err)
	}
	p.Until("the page to draw the BGP mesh", 60*time.Second, func() (bool, error) {
		v, err := eval[string](p, `document.body.dataset.topologyVersion || ""`)
		return v != "", err
	})
	return p
}

// eval evaluates js in the page; its value comes back as T through JSON.
func eval[T any](p *Page, js string) (T, error) {
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](js))
}

// Until polls cond until it holds, failing the test past timeout with what it waited for and
// the last error.
func (p *Page) Until(what string, timeout time.Duration, cond func() (bool, error)) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok && err == nil {
			return
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the page did not show %s within %v (last error: %v)", what, timeout, last)
		}
		select {
		case <-p.ctx.Done():
			p.t.Fatalf("waiting for the page to show %s: %v", what, p.ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// FlowRow is a row of the page's flow log.
type FlowRow struct {
	Verdict string `json:"verdict"`
	From    string `json:"from"`
	To      string `json:"to"`
	Rule    string `json:"rule"`
	// Highlighted: the row's background is not the table's (denied flows are).
	Highlighted bool   `json:"highlighted"`
	Text        string `json:"text"`
}

// Flows returns the flow log's rows, newest first.
func (p *Page) Flows() ([]FlowRow, error) {
	return eval[[]FlowRow](p, `[...document.querySelectorAll("#flows tbody tr")].map(tr => ({
		verdict: tr.dataset.verdict || "", from: tr.dataset.from || "", to: tr.dataset.to || "",
		rule: tr.querySelector("td.rule")?.textContent || "",
		highlighted: getComputedStyle(tr).backgroundColor !== getComputedStyle(tr.closest("table")).backgroundColor,
		text: tr.innerText,
	}))`)
}

// FlowStatus is the line above the flow log: live, reconnecting, or why the stream failed.
func (p *Page) FlowStatus() (string, error) {
	return eval[string](p, `document.getElementById("flow-status").textContent`)
}

// Graph is what the page's graph shows: the vertices by ID and each session end's state as
// drawn, "from|to" → state.
type Graph struct {
	Nodes    []string          `json:"nodes"`
	Sessions map[string]string `json:"sessions"`
	// Labels are the texts drawn on each session end ("from|to" → text): routes or the state.
	Labels map[string]string `json:"labels"`
	// Status is the line above the graph (nodes, sessions established, when).
	Status string `json:"status"`
}

// Graph reads the drawn mesh.
func (p *Page) Graph() (Graph, error) {
	return eval[Graph](p, `(() => {
		const s = {}, l = {};
		for (const e of document.querySelectorAll("#graph g.session")) {
			s[e.dataset.from + "|" + e.dataset.to] = e.dataset.state;
			l[e.dataset.from + "|" + e.dataset.to] = e.querySelector("text")?.textContent || "";
		}
		return {
			nodes: [...document.querySelectorAll("#graph g.vertex")].map(v => v.dataset.node),
			sessions: s, labels: l,
			status: document.getElementById("topology-status").textContent,
		};
	})()`)
}

// SetFilter types into the flow log's filter form (field: from, to, verdict or node).
func (p *Page) SetFilter(field, value string) error {
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	sel := chromedp.CSS(fmt.Sprintf(`#filters [name=%q]`, field))
	if field == "verdict" {
		// A select takes its value; the form hears of it as from a user.
		if err := chromedp.Do(ctx, chromedp.SetValue(sel, value)); err != nil {
			return err
		}
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("filters").dispatchEvent(new Event("input"))`))
		return err
	}
	return chromedp.Do(ctx, chromedp.SendKeys(sel, value))
}

// Screenshot writes the whole page as <artifacts>/ui/<name>.png and returns the path; a
// failure to do so fails the test only if the browser is still up.
func (p *Page) Screenshot(name string) string {
	p.t.Helper()
	dir := filepath.Join(ArtifactsDir(), "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Errorf("screenshot: %v", err)
		return ""
	}
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		if errors.Is(p.ctx.Err(), context.Canceled) || errors.Is(p.ctx.Err(), context.DeadlineExceeded) {
			p.t.Logf("screenshot %s: %v", name, err)
		} else {
			p.t.Errorf("screenshot %s: %v", name, err)
		}
		return ""
	}
	path := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(name)+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Errorf("screenshot: %v", err)
		return ""
	}
	p.t.Logf("screenshot: %s", path)
	return path
}

// ArtifactsDir is $TABBY_ARTIFACTS, else _artifacts at the top of the checkout (found from the
// working directory: the one holding hack/go.mod).
func ArtifactsDir() string {
	if d := os.Getenv("TABBY_ARTIFACTS"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return "_artifacts"
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "hack", "go.mod")); err == nil {
			return filepath.Join(d, "_artifacts")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, "_artifacts")
		}
	}
}
