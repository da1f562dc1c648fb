package devstack_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// The console's web UI in a real browser: headless Chromium driven by chromedp against the
// whole stack (embedded broker, ingest, router, deliverer, audiences, console). Each page the
// test visits is saved as a screenshot in the test's artifact directory (go test -artifacts
// keeps them); UPDATE_SCREENSHOTS=1 also writes the overview's and a destination page's to
// docs/img for docs/console.md. No page may log a console error or a CSP violation.

// chromiumPath finds Chromium, or skips the test loudly (TEST_BROWSER=1: fails).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the whole stack and a browser")
	}
	err := errors.New("no chromium, chromium-browser or google-chrome in PATH")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, lookErr := exec.LookPath(name); lookErr == nil {
			return p
		}
	}
	servicetest.RequireRuntime(t, "TEST_BROWSER", "the console browser test", "Chromium (Debian: apt-get install chromium)", err)
	return ""
}

// uiBrowser is a Chromium tab on the console, collecting the problems pages report.
type uiBrowser struct {
	t        *testing.T
	ctx      context.Context
	base     string
	mu       sync.Mutex
	problems []string
	shots    int
}

func newUIBrowser(t *testing.T, base string) *uiBrowser {
	chromium := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 800))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 150*time.Second)
	t.Cleanup(cancelTimeout)
	b := &uiBrowser{t: t, ctx: ctx, base: base}
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	// Console errors, exceptions and the browser log's errors (a CSP violation is a "security"
	// entry, a failed load a "network" one).
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.problems = append(b.problems, fmt.Sprintf("%s (%s%s)", m, m.Source, m.URL))
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// do runs actions, failing the test on an error.
func (b *uiBrowser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v (problems so far: %q)", what, err, b.takeProblems())
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *uiBrowser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// open navigates to path and waits for its main content.
func (b *uiBrowser) open(path string) {
	b.t.Helper()
	b.do("opening "+path, chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS("main")))
}

// shot saves a full-page screenshot of the current page as <n>-name.png in the artifact
// directory, and checks that the page does not overflow the window horizontally.
func (b *uiBrowser) shot(name string) []byte {
	b.t.Helper()
	if eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth + 1`) {
		b.t.Errorf("page %s is wider than the window (layout break)", name)
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	b.shots++
	path := filepath.Join(b.t.ArtifactDir(), fmt.Sprintf("%02d-%s.png", b.shots, name))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	return png
}

func (b *uiBrowser) takeProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

// noProblems fails on every console error or CSP violation reported so far.
func (b *uiBrowser) noProblems(where string) {
	b.t.Helper()
	time.Sleep(100 * time.Millisecond) // the page's last messages
	for _, p := range b.takeProblems() {
		b.t.Errorf("%s: the browser reported %s", where, p)
	}
}

// text returns the text of the element matching the CSS selector sel.
func (b *uiBrowser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// waitText polls until the element sel holds want.
func (b *uiBrowser) waitText(sel, want string, timeout time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||""`, sel)))
		if strings.Contains(s, want) {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s does not show %q after %s: %q", sel, want, timeout, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConsoleInABrowser walks the console's pages as a user does.
func TestConsoleInABrowser(t *testing.T) {
	cs := startConsoleStack(t, "", nil)
	b := newUIBrowser(t, cs.api)

	// Sign in.
	b.open("/")
	b.shot("signin")
	b.do("signing in",
		chromedp.SendKeys(chromedp.ID("token"), consoleTestToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Sections"]`)))
	b.shot("overview-empty")
	b.noProblems("sign-in")

	// A source: its key shown once, then the live debugger shows an event sent with it.
	b.open("/sources/new")
	b.do("creating a source",
		chromedp.SendKeys(chromedp.ID("id"), "shop"),
		chromedp.SendKeys(chromedp.ID("name"), "Shop"),
		chromedp.Submit(chromedp.ID("id")),
		chromedp.WaitVisible(chromedp.ID("write-key")))
	key := strings.TrimSpace(b.text("#write-key"))
	if !strings.HasPrefix(key, "wk_") {
		t.Fatalf("write key %q", key)
	}
	b.shot("source-created")
	b.open("/sources/shop")
	b.waitText("#live-status", "Live", 10*time.Second)
	sent := time.Now()
	cs.mustSend(t, key, "/v1/track", `{"userId":"browser-1","event":"Checkout Started"}`)
	b.waitText("#live-events", "Checkout Started", 5*time.Second)
	if took := time.Since(sent); took > 2*time.Second {
		t.Errorf("the live debugger showed the event %s after it was sent", took)
	}
	b.do("opening the event", chromedp.Click(chromedp.CSS("#live-events li button")), chromedp.WaitVisible(chromedp.ID("event-detail")))
	if d := b.text("#event-detail"); !strings.Contains(d, `"event": "Checkout Started"`) {
		t.Errorf("event detail: %s", d)
	}
	b.shot("source-debugger")
	b.noProblems("sources")

	// A deletion request, seen to finish (the page refreshes itself while it runs).
	b.open("/deletions")
	b.do("creating a deletion request",
		chromedp.SendKeys(chromedp.ID("subjectIds"), "browser-1"),
		chromedp.Submit(chromedp.ID("subjectIds")),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	b.waitText("main table", "FINISHED", 15*time.Second)
	b.shot("deletions")
	b.noProblems("deletions")

	b.open("/settings")
	b.shot("settings")
	b.open("/")
	b.shot("overview")
	b.noProblems("overview")
}
