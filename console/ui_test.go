package console_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// browser is a signed-in web client of a console: a cookie jar, redirects followed or not. Every
// answer is checked for what every page must have: the CSP, no inline style, and a GET under
// the render budget.
type browser struct {
	t    testing.TB
	h    *harness
	c    *http.Client
	csrf string
}

// uiPage is one answer of the UI.
type uiPage struct {
	Status   int
	URL      string // after redirects
	Header   http.Header
	Body     string
	Location string
	Took     time.Duration
}

// pageBudget is the render budget of a page (docs/benchmarks.md: under 100 ms server-side), measured on
// loopback around the request; the race detector's slowdown gets four times that (the figures
// without it are in docs/benchmarks.md).
var pageBudget = func() time.Duration {
	if raceEnabled {
		return 400 * time.Millisecond
	}
	return 100 * time.Millisecond
}()

// signIn signs a new browser in with the console token; it follows no redirect.
func (h *harness) signIn(t testing.TB) *browser {
	t.Helper()
	b := h.newBrowser(t, false)
	p := b.post("/signin", url.Values{"token": {testToken}, "next": {"/"}})
	if p.Status != http.StatusSeeOther || p.Location != "/" {
		t.Fatalf("sign-in: %d %s %s", p.Status, p.Location, p.Body)
	}
	b.get("/") // takes the CSRF token
	return b
}

// signInFollowing is signIn for a browser that follows redirects, as a user's does.
func (h *harness) signInFollowing(t testing.TB) *browser {
	t.Helper()
	b := h.newBrowser(t, true)
	b.get("/signin")
	if p := b.post("/signin", url.Values{"token": {testToken}}); p.Status != http.StatusOK || strings.Contains(p.URL, "/signin") {
		t.Fatalf("sign-in: %d %s", p.Status, p.URL)
	}
	return b
}

func (h *harness) newBrowser(t testing.TB, follow bool) *browser {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: h.env.HTTPClient().Transport}
	if !follow {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return &browser{t: t, h: h, c: c}
}

var csrfInput = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

func (b *browser) do(req *http.Request) uiPage {
	b.t.Helper()
	start := time.Now()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	p := uiPage{Status: resp.StatusCode, URL: resp.Request.URL.String(), Header: resp.Header, Body: string(body), Location: resp.Header.Get("Location"), Took: time.Since(start)}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") {
		b.t.Errorf("%s %s: Content-Security-Policy %q", req.Method, req.URL.Path, csp)
	}
	if strings.Contains(p.Body, " style=") || strings.Contains(p.Body, "<style") {
		b.t.Errorf("%s %s: an inline style, which the CSP blocks", req.Method, req.URL.Path)
	}
	if m := csrfInput.FindStringSubmatch(p.Body); m != nil {
		b.csrf = m[1]
	}
	return p
}

// get fetches a page, under the render budget.
func (b *browser) get(path string) uiPage {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.h.srv.URL+path, nil)
	p := b.do(req)
	if p.Took > pageBudget {
		b.t.Errorf("GET %s took %s, over the %s budget", path, p.Took, pageBudget)
	}
	return p
}

// send sends a request with a form body as it is (no CSRF token added).
func (b *browser) send(method, path string, form url.Values) uiPage {
	b.t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.h.srv.URL+path, rd)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return b.do(req)
}

// post sends a form, with the CSRF token of the last page unless form sets _csrf.
func (b *browser) post(path string, form url.Values) uiPage {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["_csrf"]; !ok && b.csrf != "" {
		form.Set("_csrf", b.csrf)
	}
	req, _ := http.NewRequest(http.MethodPost, b.h.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// contains fails unless the page has status and holds every text.
func (p uiPage) contains(t testing.TB, status int, texts ...string) {
	t.Helper()
	if p.Status != status {
		t.Fatalf("status %d, want %d: %s", p.Status, status, p.Body)
	}
	for _, s := range texts {
		if !strings.Contains(p.Body, s) {
			t.Fatalf("the page lacks %q:\n%s", s, p.Body)
		}
	}
}

// TestUISignInAndSecurity: sign-in, the session cookie's attributes, redirects without a
// session, CSRF refusals, the CSP on every page, sign-out.
func TestUISignInAndSecurity(t *testing.T) {
	h := newHarness(t, nil)
	anon := &browser{t: t, h: h, c: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, path := range []string{"/", "/sources", "/sources/web", "/destinations", "/deletions", "/settings", "/audiences"} {
		p := anon.get(path)
		if p.Status != http.StatusSeeOther || p.Location != "/signin?next="+url.QueryEscape(path) {
			t.Errorf("%s without a session: %d %s", path, p.Status, p.Location)
		}
	}
	if p := anon.post("/sources/new", url.Values{"id": {"x"}}); p.Status != http.StatusUnauthorized {
		t.Errorf("a POST without a session: %d", p.Status)
	}
	anon.get("/signin").contains(t, http.StatusOK, `name="token"`, `<label for="token">Console token</label>`)
	anon.post("/signin", url.Values{"token": {"wrong-token-0123456789"}}).contains(t, http.StatusUnauthorized, "That is not the console token")
	// An open redirect is refused: next stays on the console.
	jar, _ := cookiejar.New(nil)
	b2 := &browser{t: t, h: h, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, next := range []string{"//evil.example.com/", "/\t/evil.example/phish", "/\n/evil.example", "/\\evil.example", "https://evil.example/",
		"javascript:alert(1)", "evil.example", "/\t\\evil.example"} {
		if p := b2.post("/signin", url.Values{"token": {testToken}, "next": {next}}); p.Location != "/" {
			t.Errorf("next=%q: redirected to %q", next, p.Location)
		}
	}
	if p := b2.post("/signin", url.Values{"token": {testToken}, "next": {"/destinations/x?window=24h"}}); p.Location != "/destinations/x?window=24h" {
		t.Errorf("a console path: redirected to %q", p.Location)
	}

	b := h.signIn(t)
	u, _ := url.Parse(h.srv.URL)
	var session *http.Cookie
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "tributary_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatal("no session cookie")
	}
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/signin", strings.NewReader("token="+testToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if sc := resp.Header.Get("Set-Cookie"); !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") {
		t.Errorf("session cookie: %s", sc)
	}
	for _, path := range []string{"/", "/sources", "/sources/web", "/sources/new", "/destinations", "/deletions", "/settings", "/audiences", "/signin", "/nope"} {
		p := b.get(path)
		csp := p.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if p.Header.Get("X-Frame-Options") != "DENY" || p.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", path, p.Header)
		}
		if strings.Contains(p.Body, "<script>") || strings.Contains(p.Body, " style=") || strings.Contains(p.Body, "onclick") {
			t.Errorf("%s: inline script or style", path)
		}
		if p.Took > pageBudget {
			t.Errorf("%s took %s", path, p.Took)
		}
	}
	// A result message in a link is shown only with this console's MAC.
	if p := b.get("/?done=Session+expired%3A+paste+your+token+at+evil.example"); strings.Contains(p.Body, "Session expired") {
		t.Error("a page shows a message a link made up")
	}
	if p := b.get("/nope"); p.Status != http.StatusNotFound {
		t.Errorf("/nope: %d", p.Status)
	}
	// CSRF: a form without the token, with another one, or from another site.
	b.post("/sources/new", url.Values{"id": {"x"}, "_csrf": {""}}).contains(t, http.StatusForbidden, "CSRF")
	b.post("/sources/new", url.Values{"id": {"x"}, "_csrf": {"forged"}}).contains(t, http.StatusForbidden, "CSRF")
	req, _ = http.NewRequest(http.MethodPost, h.srv.URL+"/sources/new", strings.NewReader(url.Values{"id": {"x"}, "_csrf": {b.csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example.com")
	if p := b.do(req); p.Status != http.StatusForbidden {
		t.Errorf("cross-origin POST: %d", p.Status)
	}
	if _, ok := h.env.Store.Snapshot().SourceByID("x"); ok {
		t.Fatal("a refused form created a source")
	}
	// Static files: CSP too, no session needed.
	if p := anon.get("/static/app.js"); p.Status != http.StatusOK || p.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("static: %d", p.Status)
	}
	// Sign out: the cookie goes, the next page asks to sign in.
	b.post("/signout", nil)
	if p := b.get("/"); p.Status != http.StatusSeeOther {
		t.Errorf("after sign-out: %d", p.Status)
	}
}

// TestUISources: create a source (the key once, with its curl), the page, the tracking plan,
// rotation, the debugger's recent events, delete; errors next to their field.
func TestUISources(t *testing.T) {
	h := newHarness(t, nil)
	b := h.signIn(t)
	b.get("/sources").contains(t, http.StatusOK, `href="/sources/web"`, "Add a source")
	b.get("/sources/new")
	bad := b.post("/sources/new", url.Values{"id": {"Bad Id"}})
	bad.contains(t, http.StatusBadRequest, `id="id-error" class="field-error">&#34;Bad Id&#34; must contain only a-z, 0-9, &#39;-&#39; and &#39;_&#39;</p>`, `aria-invalid="true"`)
	// The key is shown after a redirect (a reload creates nothing), to this session only.
	created := b.post("/sources/new", url.Values{"id": {"app"}, "name": {"App"}})
	if created.Status != http.StatusSeeOther || !strings.HasPrefix(created.Location, "/sources/app/key?k=") {
		t.Fatalf("creating a source: %d %s", created.Status, created.Location)
	}
	keyPage := created.Location
	created = b.get(keyPage)
	created.contains(t, http.StatusOK, "Tributary keeps only its hash", "Source app created.", "/v1/track", `data-copy="write-key"`)
	if again := b.get(keyPage); again.Body != created.Body {
		t.Fatal("a reload of the key's page does not show the same key")
	}
	h.signIn(t).get(keyPage).contains(t, http.StatusGone, "rotate the key of source app")
	key := regexp.MustCompile(`<code id="write-key">(wk_[^<]+)</code>`).FindStringSubmatch(created.Body)
	if key == nil {
		t.Fatalf("no key on the page: %s", created.Body)
	}
	if src, ok := h.env.Store.Snapshot().SourceByKeyHash(schemas.HashWriteKey(key[1])); !ok || src.ID != "app" || src.Name != "App" {
		t.Fatal("the key shown does not resolve to the source")
	}
	if p := b.get("/sources/app"); strings.Contains(p.Body, key[1]) {
		t.Fatal("the source page shows the key")
	}
	dup := b.post("/sources/new", url.Values{"id": {"app"}})
	dup.contains(t, http.StatusBadRequest, "a source with id &#34;app&#34; exists already")

	h.env.Produce(&kgo.Record{Topic: schemas.TopicEvents, Key: []byte("u1"), Value: []byte(`{"type":"track","event":"Signed Up","userId":"u1","messageId":"m-ui-1"}`),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("app")}, {Key: schemas.HeaderMessageID, Value: []byte("m-ui-1")}, {Key: schemas.HeaderType, Value: []byte("track")}}})
	servicetest.Eventually(t, 5*time.Second, "the event on the source page", func() bool {
		return strings.Contains(b.get("/sources/app").Body, "m-ui-1")
	})
	page := b.get("/sources/app")
	page.contains(t, http.StatusOK, `id="live-events"`, `data-stream="/sources/app/live"`, `class="recent-event"`, "1 accepted")

	b.post("/sources/app", url.Values{"name": {"Mobile app"}, "blocked": {"Debug\nTest Event\n"}})
	if src, _ := h.env.Store.Snapshot().SourceByID("app"); src.Name != "Mobile app" || src.TrackingPlan == nil || len(src.TrackingPlan.BlockedEvents) != 2 {
		t.Fatalf("after saving: %+v", src)
	}
	b.get("/sources/app")
	rot := b.post("/sources/app/rotate", url.Values{"overlap": {"24h"}})
	if rot.Status != http.StatusSeeOther {
		t.Fatalf("rotating: %d %s", rot.Status, rot.Body)
	}
	rot = b.get(rot.Location)
	rot.contains(t, http.StatusOK, "The previous key keeps working until", "Write key of app rotated.")
	newKey := regexp.MustCompile(`<code id="write-key">(wk_[^<]+)</code>`).FindStringSubmatch(rot.Body)
	snap := h.env.Store.Snapshot()
	for _, k := range []string{key[1], newKey[1]} {
		if _, ok := snap.SourceByKeyHash(schemas.HashWriteKey(k)); !ok {
			t.Fatal("a key of the overlap does not work")
		}
	}
	// The file's source: saving without taking over is refused, next to the form.
	b.get("/sources/web")
	b.post("/sources/web", url.Values{"name": {"Mine"}}).contains(t, http.StatusConflict, "managed by file:base.yaml")
	b.get("/sources/app")
	b.post("/sources/app/delete", nil)
	if _, ok := h.env.Store.Snapshot().SourceByID("app"); ok {
		t.Fatal("source not deleted")
	}
}

// TestUIOverviewDeletionsSettings: the overview's problem spots, a deletion request through its
// form (errors next to the field), the settings' export.
func TestUIOverviewDeletionsSettings(t *testing.T) {
	h := newHarness(t, nil)
	b := h.signIn(t)
	b.get("/").contains(t, http.StatusOK, "No problem", `href="/destinations/file-hooks"`, `href="/sources/web"`)
	now := time.Now()
	var recs []*kgo.Record
	for i := range 10 {
		class, status := "status_5xx", 500
		if i < 2 {
			class, status = "ok", 200
		}
		recs = append(recs, &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("file-hooks"),
			Value: attemptJSON("file-hooks", "m"+string(rune('a'+i)), "http://127.0.0.1:9/file", 1, status, 12, class, now)})
	}
	recs = append(recs, &kgo.Record{Topic: schemas.TopicRejected, Key: []byte("u"), Value: []byte(`{"type":"track"}`),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderReason, Value: []byte("event: required")}, {Key: schemas.HeaderSourceID, Value: []byte("web")}}})
	h.env.Produce(recs...)
	servicetest.Eventually(t, 5*time.Second, "the problems on the overview", func() bool {
		p := b.get("/")
		return strings.Contains(p.Body, `<a href="/destinations/file-hooks">Destination file-hooks is failing: 8 messages wait for a retry and 2 were delivered in the last hour.</a>`) &&
			strings.Contains(p.Body, `<a href="/sources/web#debugger">Source web had 1 message rejected in the last hour.</a>`)
	})

	b.get("/deletions").contains(t, http.StatusOK, "No deletion request yet", `<label for="subjectIds">User ids</label>`)
	b.post("/deletions", url.Values{"subjectIds": {""}, "regulationType": {"DELETE_ONLY"}}).
		contains(t, http.StatusBadRequest, `id="subjectIds-error" class="field-error">at least one user id is required</p>`)
	ok := b.post("/deletions", url.Values{"subjectIds": {"u1\nu2, u3"}, "regulationType": {"SUPPRESS_WITH_DELETE"}, "sourceIds": {"web"}})
	if ok.Status != http.StatusSeeOther || !strings.Contains(ok.Location, "created+for+3+user+ids") {
		t.Fatalf("deletion request: %d %s %s", ok.Status, ok.Location, ok.Body)
	}
	b.get("/deletions").contains(t, http.StatusOK, "SUPPRESS_WITH_DELETE", "RUNNING", `data-refresh="2"`)

	set := b.get("/settings")
	set.contains(t, http.StatusOK, "Download tributary.yaml", "writeKeyHash: sha256:")
	exp := b.get("/settings/export")
	if exp.Status != http.StatusOK || !strings.HasPrefix(exp.Header.Get("Content-Type"), "application/yaml") || !strings.Contains(exp.Body, "id: file-hooks") {
		t.Fatalf("export: %d %s", exp.Status, exp.Header.Get("Content-Type"))
	}
}

// TestDeletionsPageStores: the deletion requests page shows each store's progress (the ones
// waited for, then another that reported), what it did, and the time to FINISHED.
func TestDeletionsPageStores(t *testing.T) {
	h := newHarness(t, nil)
	b := h.signIn(t)
	r := h.do(http.MethodPost, "/v1/regulations", map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": []string{"u1", "u2"}})
	expect(t, r, http.StatusOK)
	id, _ := r.Data(t)["regulateId"].(string)
	for _, u := range []string{"u1", "u2"} {
		h.env.Produce(&kgo.Record{Topic: schemas.TopicDeletionsStatus, Key: []byte(id), Value: schemas.DeletionStatus{RequestID: id, UserID: u,
			Kind: schemas.KindDeleteOnly, Notices: 1, ProcessedAt: schemas.FormatTimestamp(time.Now())}.Record()})
	}
	h.env.Produce(audiencesReport(id, "u1"))
	servicetest.Eventually(t, 5*time.Second, "audiences' report on u1 shown", func() bool {
		return strings.Contains(b.get("/deletions").Body, `<span class="badge warn">audiences</span> 1/2 <span class="muted">profiles 1, tombstones 2</span>`)
	})
	b.get("/deletions").contains(t, http.StatusOK, "RUNNING", `<span class="badge ok">router</span> 2/2 <span class="muted">notices 2</span>`)
	h.env.Produce(audiencesReport(id, "u2"))
	rep := schemas.DeletionReport{RequestID: id, UserID: "u1", Store: schemas.StoreDeliverer, Counts: map[string]int64{schemas.CountDropped: 4}, DoneAt: schemas.FormatTimestamp(time.Now())}
	h.env.Produce(&kgo.Record{Topic: schemas.TopicDeletionsStatus, Key: []byte(schemas.DeletionReportKey(id, schemas.StoreDeliverer)), Value: rep.Record()})
	servicetest.Eventually(t, 5*time.Second, "FINISHED", func() bool {
		p := b.get("/deletions").Body
		return strings.Contains(p, `<span class="badge ok">FINISHED</span> in `) && strings.Contains(p, `<span class="badge">deliverer</span> 1/2 (not waited for) <span class="muted">dropped 4</span>`)
	})
}
