package devstack_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// analyticsJS returns the folder of @segment/analytics-next's browser builds (dist/umd), installed
// from testdata/browser/package-lock.json with npm ci when missing, and the Chromium to run it
// in. Without them the test is skipped loudly; TEST_BROWSER=1 makes that a failure.
func analyticsJS(t *testing.T) (dist, chromium string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the whole stack and a browser")
	}
	const test, env = "the analytics.js browser test", "TEST_BROWSER"
	err := errors.New("no chromium, chromium-browser or google-chrome in PATH")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, lookErr := exec.LookPath(name); lookErr == nil {
			chromium, err = p, nil
			break
		}
	}
	servicetest.RequireRuntime(t, env, test, "Chromium (Debian: apt-get install chromium)", err)
	npm, err := exec.LookPath("npm")
	servicetest.RequireRuntime(t, env, test, "npm", err)
	dir, _ := filepath.Abs(filepath.Join("testdata", "browser"))
	dist = filepath.Join(dir, "node_modules", "@segment", "analytics-next", "dist", "umd")
	if _, err := os.Stat(filepath.Join(dist, "standalone.js")); err != nil {
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	return dist, chromium
}

// snippetPage is a website that loads analytics.js the way Segment's snippet does: a stub that
// queues the calls, the write key, _cdn (where analytics.js loads its settings from: the ingest,
// as it would be cdn.segment.com) and the load options, then the standalone build, which this
// site hosts itself. INGEST stands for the ingest's base URL.
const snippetPage = `<!doctype html>
<html><head><title>Pricing - Tributary browser test</title>
<script>
  var analytics = window.analytics = [];
  analytics.methods = ["identify", "track", "page", "group", "alias", "screen", "reset", "ready"];
  analytics.methods.forEach(function (m) {
    analytics[m] = function () {
      var args = Array.prototype.slice.call(arguments);
      args.unshift(m);
      analytics.push(args);
      return analytics;
    };
  });
  analytics._writeKey = "wk_e2e";
  analytics._cdn = "INGEST";
  analytics._loadOptions = {};
  analytics.identify("browser-user-1", {email: "ada@example.com"});
  analytics.track("Signed Up", {plan: "pro"});
  analytics.page();
</script>
<script async src="/analytics.js/v1/wk_e2e/analytics.min.js"></script>
</head><body><h1>Pricing</h1></body></html>`

// npmPage loads the library's UMD build (what a bundler makes of the npm package) and calls
// AnalyticsBrowser.load with cdnURL pointing at the ingest, with the batching delivery strategy.
const npmPage = `<!doctype html>
<html><head><title>Pricing - Tributary browser test</title>
<script src="/analytics-next/bundles/index.js"></script>
<script>
  var analytics = AnalyticsNext.AnalyticsBrowser.load(
    {writeKey: "wk_e2e", cdnURL: "INGEST"},
    {integrations: {"Segment.io": {deliveryStrategy: {strategy: "batching", config: {size: 3, timeout: 500}}}}});
  analytics.track("First", {n: 1});
  analytics.track("Second", {n: 2});
  analytics.track("Third", {n: 3});
</script>
</head><body><h1>Pricing</h1></body></html>`

// browserRun is what one page load did: the webhooks that arrived, and what the browser saw.
type browserRun struct {
	hooks     map[string]map[string]any // userId or event → webhook body
	userAgent string
	responses map[string]int    // path of each call to ingest → its status
	headers   map[string]string // of the first call to ingest: Content-Type and Authorization
}

// runPage serves a site on http://localhost (another origin than the ingest, 127.0.0.1, so the
// browser checks CORS) whose /pricing is html, opens it in headless Chromium, and waits for want
// webhooks and for the browser to have seen the answers of calls of its calls to ingest.
func runPage(t *testing.T, html string, want, calls int) browserRun {
	t.Helper()
	dist, chromium := analyticsJS(t)
	rc := &hook{}
	receiver := httptest.NewServer(rc)
	t.Cleanup(receiver.Close)
	st := startStack(t, receiver.URL+"/browser")
	ingest := "http://" + st.IngestAddr()

	site := http.NewServeMux()
	site.HandleFunc("/analytics.js/v1/{key}/analytics.min.js", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join(dist, "standalone.js"))
	})
	site.Handle("/analytics-next/bundles/", http.StripPrefix("/analytics-next/bundles/", http.FileServer(http.Dir(dist))))
	site.HandleFunc("/pricing", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, strings.ReplaceAll(html, "INGEST", ingest))
	})
	siteSrv := httptest.NewServer(site)
	t.Cleanup(siteSrv.Close)
	pageURL := strings.Replace(siteSrv.URL, "127.0.0.1", "localhost", 1) + "/pricing?utm_source=test"

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelTimeout)

	var mu sync.Mutex
	var problems []string
	run := browserRun{responses: map[string]int{}, headers: map[string]string{}}
	requests := map[network.RequestID]string{}
	err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				problems = append(problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(parts, " ")))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			problems = append(problems, "exception: "+msg)
		case *network.EventRequestWillBeSent:
			if strings.HasPrefix(ev.Request.URL, ingest+"/v1/") && ev.Request.Method == http.MethodPost {
				requests[ev.RequestID] = strings.TrimPrefix(ev.Request.URL, ingest)
				if len(run.headers) == 0 {
					for k, v := range ev.Request.Headers {
						run.headers[http.CanonicalHeaderKey(k)] = fmt.Sprint(v)
					}
				}
			}
		case *network.EventResponseReceived:
			if path, ok := requests[ev.RequestID]; ok {
				run.responses[path] = int(ev.Response.Status)
			}
		case *network.EventLoadingFailed:
			why := ev.ErrorText
			if ev.CorsErrorStatus != nil {
				why += " (CORS: " + string(ev.CorsErrorStatus.CorsError) + ")"
			}
			problems = append(problems, fmt.Sprintf("request %s failed: %s", requests[ev.RequestID], why))
		}
	})
	if err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatalf("opening %s: %v", pageURL, err)
	}
	ua, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.userAgent`))
	if err != nil {
		t.Fatalf("reading the user agent: %v", err)
	}
	run.userAgent = ua

	deadline := time.Now().Add(30 * time.Second)
	for {
		rc.mu.Lock()
		n := len(rc.got)
		rc.mu.Unlock()
		if n >= want {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			t.Fatalf("%d of %d webhooks; the browser's calls to ingest: %v; its problems: %q", n, want, run.responses, problems)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The browser reports an answer (Network.responseReceived) after ingest sent it, and the
	// webhooks can arrive first: wait for the answers of the page's calls to ingest too.
	for {
		mu.Lock()
		n := len(run.responses)
		mu.Unlock()
		if n >= calls {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			t.Fatalf("%d of %d answers from ingest seen by the browser: %v", n, calls, run.responses)
		}
		time.Sleep(50 * time.Millisecond)
	}
	reqs, bodies := rc.wait(t, want)
	run.hooks = map[string]map[string]any{}
	for i, r := range reqs {
		if !schemas.VerifyXSignature("e2e-secret", bodies[i], r.Header.Get("X-Signature")) {
			t.Errorf("X-Signature of %s does not verify", bodies[i])
		}
		var m map[string]any
		if err := json.Unmarshal(bodies[i], &m); err != nil {
			t.Fatal(err)
		}
		key, _ := m["event"].(string)
		if key == "" {
			key, _ = m["type"].(string)
		}
		run.hooks[key] = m
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("the browser reported %s", p)
	}
	return run
}

// TestAnalyticsJSInABrowser: Segment's analytics.js, unmodified, loaded by the snippet on a
// website of another origin, loads its settings from ingest and sends identify, track and page; each arrives at the webhook
// endpoint, signed, with what the browser knows: one anonymousId, the page, the user agent.
func TestAnalyticsJSInABrowser(t *testing.T) {
	run := runPage(t, snippetPage, 3, 3)

	for _, path := range []string{"/v1/i", "/v1/t", "/v1/p"} {
		if run.responses[path] != 200 {
			t.Errorf("the browser's POST %s: status %d (all: %v)", path, run.responses[path], run.responses)
		}
	}
	if ct := run.headers["Content-Type"]; ct != "text/plain" || !strings.HasPrefix(run.headers["Authorization"], "Basic ") {
		t.Errorf("analytics.js sent headers %v; want text/plain and Basic auth (so the browser preflighted)", run.headers)
	}
	identify, track, pageCall := run.hooks["identify"], run.hooks["Signed Up"], run.hooks["page"]
	if identify == nil || track == nil || pageCall == nil {
		t.Fatalf("webhooks %v", run.hooks)
	}
	anon, _ := identify["anonymousId"].(string)
	if len(anon) < 10 {
		t.Errorf("anonymousId %q", anon)
	}
	for name, m := range map[string]map[string]any{"identify": identify, "track": track, "page": pageCall} {
		ctx, _ := m["context"].(map[string]any)
		lib, _ := ctx["library"].(map[string]any)
		page, _ := ctx["page"].(map[string]any)
		if m["anonymousId"] != anon || m["userId"] != "browser-user-1" {
			t.Errorf("%s: anonymousId %v userId %v, want %s and browser-user-1 on every call", name, m["anonymousId"], m["userId"], anon)
		}
		if ctx["userAgent"] != run.userAgent || ctx["ip"] != "127.0.0.1" {
			t.Errorf("%s: userAgent %q ip %v; the browser's user agent is %q", name, ctx["userAgent"], ctx["ip"], run.userAgent)
		}
		if lib["name"] != "analytics.js" || lib["version"] != "next-1.84.3" {
			t.Errorf("%s: library %v", name, lib)
		}
		if page["path"] != "/pricing" || page["title"] != "Pricing - Tributary browser test" || !strings.HasPrefix(fmt.Sprint(page["url"]), "http://localhost:") || page["search"] != "?utm_source=test" {
			t.Errorf("%s: context.page %v", name, page)
		}
		if m["receivedAt"] == nil || m["messageId"] == nil || m["writeKey"] != nil {
			t.Errorf("%s: %v", name, m)
		}
	}
	if traits, _ := identify["traits"].(map[string]any); traits["email"] != "ada@example.com" {
		t.Errorf("identify traits %v", identify["traits"])
	}
	if props, _ := track["properties"].(map[string]any); props["plan"] != "pro" {
		t.Errorf("track properties %v", track["properties"])
	}
	if ctx, _ := track["context"].(map[string]any); fmt.Sprint(ctx["campaign"]) != "map[source:test]" {
		t.Errorf("track context.campaign %v", ctx["campaign"])
	}
}

// TestAnalyticsJSBatching: loaded as from npm with cdnURL set to the ingest, and with its
// batching delivery strategy, analytics.js posts its calls together to /v1/b; they arrive like
// single calls.
func TestAnalyticsJSBatching(t *testing.T) {
	run := runPage(t, npmPage, 3, 1)
	if run.responses["/v1/b"] != 200 || len(run.responses) != 1 {
		t.Errorf("the browser's calls to ingest: %v, want one POST /v1/b answered 200", run.responses)
	}
	for _, event := range []string{"First", "Second", "Third"} {
		m := run.hooks[event]
		if m == nil || m["type"] != "track" || m["anonymousId"] == nil {
			t.Errorf("%s: %v", event, m)
		}
	}
}
