package console_test

import (
	"bytes"
	"html"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// The forms of the console's pages: post/redirect/get, every field error at once, the config
// import, the setup flow's add-a-URL, secret generator and test before enabling, the computed
// trait's previews and the sign-in page's token file.

// TestUIConfigImport: a config file pasted, its dry run's diff (nothing written), a file changed
// after its preview previewed again, then applied with a redirect; a bad file's errors with
// their lines; an uploaded file (multipart) previewed too.
func TestUIConfigImport(t *testing.T) {
	h := newHarness(t, nil)
	b := h.signIn(t)
	b.get("/settings").contains(t, http.StatusOK, `action="/settings/import" enctype="multipart/form-data"`, `<label for="import-yaml">`, `name="file" type="file"`)

	bad := b.post("/settings/import", url.Values{"yaml": {"sources:\n  - id: Bad Id\n    writeKey: wk_test_bad_0123456789\n"}})
	bad.contains(t, http.StatusBadRequest, "The file was not applied", "2: sources[0].id")
	b.post("/settings/import", url.Values{"yaml": {"  "}}).contains(t, http.StatusBadRequest, "Paste a config file")

	file := "sources:\n  - id: shop\n    name: Shop\n    writeKey: wk_test_shop_0123456789\n"
	dry := b.post("/settings/import", url.Values{"yaml": {file}})
	dry.contains(t, http.StatusOK, "What applying it changes", `<span class="badge ok">create</span>`, "shop</code>", `id="import-apply"`, "1 change.")
	if _, ok := h.env.Store.Snapshot().SourceByID("shop"); ok {
		t.Fatal("a dry run wrote the source")
	}
	digest := regexp.MustCompile(`name="digest" value="([0-9a-f]+)"`).FindStringSubmatch(dry.Body)
	if digest == nil {
		t.Fatal("the preview does not say which file it previewed")
	}
	changed := b.post("/settings/import", url.Values{"yaml": {file + "  - id: other\n    writeKey: wk_test_other_0123456789\n"}, "apply": {"true"}, "digest": {digest[1]}})
	changed.contains(t, http.StatusOK, "The file changed since its preview: nothing was applied.", "2 changes.")
	if _, ok := h.env.Store.Snapshot().SourceByID("other"); ok {
		t.Fatal("a file other than the one previewed was applied")
	}
	applied := b.post("/settings/import", url.Values{"yaml": {file}, "apply": {"true"}, "digest": {digest[1]}})
	if applied.Status != http.StatusSeeOther || !strings.HasPrefix(applied.Location, "/settings?done=") || !strings.Contains(applied.Location, "1+change") {
		t.Fatalf("applying: %d %s %s", applied.Status, applied.Location, applied.Body)
	}
	if src, ok := h.env.Store.Snapshot().SourceByID("shop"); !ok || src.Name != "Shop" {
		t.Fatal("the applied file's source is not in the config")
	}

	// An upload: the file's text replaces the textarea's, and is previewed.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("_csrf", b.csrf)
	_ = mw.WriteField("yaml", "ignored")
	fw, _ := mw.CreateFormFile("file", "tributary.yaml")
	_, _ = fw.Write([]byte("sources:\n  - id: shop2\n    writeKey: wk_test_shop2_0123456789\n"))
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/settings/import", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	up := b.do(req)
	up.contains(t, http.StatusOK, `<span class="badge bad">delete</span>`, "shop</code>", `<span class="badge ok">create</span>`, "shop2</code>", "id: shop2")
}

// TestUIDestinationSetupExtras: "Add a URL" shows one more row and keeps what was typed; every
// error of a step at once (each bad header line, a header name the config refuses, a bad URL),
// with an earlier step's error shown beside them; a generated secret; a destination created
// disabled and sent a test event before it is enabled.
func TestUIDestinationSetupExtras(t *testing.T) {
	h := destHarness(t)
	b := newDestBrowser(t, h)
	first := b.get("/destinations/new/webhooks")
	step2 := b.step(first, url.Values{"step": {"1"}, "id": {"extras"}, "sources": {"web"}})
	more := b.step(step2, url.Values{"step": {"2"}, "url0": {"http://127.0.0.1:9/a"}, "addURL": {"1"}})
	expectDestPage(t, more, http.StatusOK, `<label for="url1">URL 2</label>`, `value="http://127.0.0.1:9/a"`, `aria-current="step">2. Webhook URLs`)
	if strings.Contains(more.Body, "field-error") || strings.Contains(more.Body, `<label for="url2">`) {
		t.Fatal("Add a URL shows errors, or more than one more row")
	}

	p := b.step(more, url.Values{"step": {"2"}, "url0": {"ftp://x"}, "headers0": {"no colon\nX Team: a\nalso none"}, "url1": {"http://127.0.0.1:9/b"}})
	expectDestPage(t, p, http.StatusBadRequest, destFieldErr("url0", `must be an absolute http or https URL with a host, got "ftp://x"`),
		html.EscapeString("line 1: write each header as “Name: value”; line 3: write each header as “Name: value”"), html.EscapeString(`"X Team" is not a valid HTTP header name`))
	// The id taken meanwhile (carried from step 1): its error with step 2's, each step's inputs shown.
	form := destHiddenFields(more.Body)
	form.Set("id", "file-hooks")
	form.Set("step", "2")
	form.Set("url0", "nope")
	p = b.post("/destinations/new/webhooks", form)
	expectDestPage(t, p, http.StatusConflict, "<h2>1. Name and sources</h2>", "<h2>2. Webhook URLs</h2>", destFieldErr("id", `a destination with id "file-hooks" exists already`),
		destFieldErr("url0", `must be an absolute http or https URL with a host, got "nope"`))

	step3 := b.step(more, url.Values{"step": {"2"}, "url0": {"http://127.0.0.1:9/a"}})
	gen := b.step(step3, url.Values{"step": {"3"}, "generateSecret": {"1"}})
	m := regexp.MustCompile(`<code id="generated-secret" class="id">([0-9a-f]{64})</code>`).FindStringSubmatch(gen.Body)
	if gen.Status != http.StatusOK || m == nil || !strings.Contains(gen.Body, `value="`+m[1]+`"`) || !strings.Contains(gen.Body, `aria-current="step">3. Shared secret`) {
		t.Fatalf("generating a secret: %d\n%s", gen.Status, gen.Body)
	}
	review := b.step(gen, url.Values{"step": {"3"}, "secret": {m[1]}})
	expectDestPage(t, review, http.StatusOK, `name="then" value="test"`)
	done := b.step(review, url.Values{"step": {"4"}, "enable": {"true"}, "then": {"test"}})
	expectDestPage(t, done, http.StatusOK, "Destination extras created, disabled: send it a test event", `aria-current="page">Test</a>`, `<span class="badge">disabled</span>`,
		"it gets test events only")
	d, ok := h.env.Store.Snapshot().DestinationByID("extras")
	if !ok || d.IsEnabled() || d.Settings.SharedSecret != m[1] {
		t.Fatalf("created for a test first: %+v", d)
	}
	expectDestPage(t, b.post("/destinations/extras/test", url.Values{"type": {"track"}}), http.StatusOK, "What each URL answered")
}

// TestUIDestinationEditAllErrors: the edit form reports the form's own errors and the config's
// at once (a header line without a colon did hide a bad URL until it was fixed); "Add a URL"
// and "Generate a secret" change the form, not the destination.
func TestUIDestinationEditAllErrors(t *testing.T) {
	h := destHarness(t)
	b := newDestBrowser(t, h)
	expect(t, h.do(http.MethodPost, "/v1/destinations", map[string]any{"id": "edited", "type": "webhooks", "sources": []string{"web"},
		"settings": map[string]any{"sharedSecret": "keep-me-0123", "webhooks": []any{map[string]any{"url": "http://127.0.0.1:9/e"}}}}), http.StatusCreated)
	servicetest.Eventually(t, 5*time.Second, "destination edited", func() bool { _, ok := h.env.Store.Snapshot().DestinationByID("edited"); return ok })
	p := b.get("/destinations/edited?tab=settings")
	version := regexp.MustCompile(`name="version" value="(\d+)"`).FindStringSubmatch(p.Body)[1]
	expectDestPage(t, p, http.StatusOK, `aria-current="page">Settings</a>`, `name="addURL"`, `name="generateSecret"`)
	if strings.Contains(p.Body, `<label for="edit-url1">`) {
		t.Fatal("the edit form shows an empty second URL")
	}
	edit := url.Values{"version": {version}, "sources": {"web"}, "url0": {"http://127.0.0.1:9/e"}, "headers0": {"no colon"}, "url1": {"nope"}}
	expectDestPage(t, b.post("/destinations/edited/edit", edit), http.StatusBadRequest, "The destination was not saved",
		destFieldErr("edit-headers0", "line 1: write each header as “Name: value”"), destFieldErr("edit-url1", `must be an absolute http or https URL with a host, got "nope"`))

	more := b.post("/destinations/edited/edit", url.Values{"version": {version}, "sources": {"web"}, "url0": {"http://127.0.0.1:9/e"}, "addURL": {"1"}})
	expectDestPage(t, more, http.StatusOK, `<label for="edit-url1">URL 2</label>`)
	gen := b.post("/destinations/edited/edit", url.Values{"version": {version}, "sources": {"web"}, "url0": {"http://127.0.0.1:9/e"}, "generateSecret": {"1"}})
	expectDestPage(t, gen, http.StatusOK, "not saved yet: save the form", `id="edit-generated-secret"`)
	if d, _ := h.env.Store.Snapshot().DestinationByID("edited"); d.Settings.SharedSecret != "keep-me-0123" || len(d.Settings.Webhooks) != 1 {
		t.Fatalf("a form action changed the destination: %+v", d)
	}
	saved := b.post("/destinations/edited/edit", url.Values{"version": {version}, "sources": {"web"}, "url0": {"http://127.0.0.1:9/e"}, "url1": {"http://127.0.0.1:9/f"}})
	expectDestPage(t, saved, http.StatusOK, "Destination edited saved.", `aria-current="page">Settings</a>`)
	if !strings.Contains(saved.URL, "tab=settings") {
		t.Fatalf("after saving: %s", saved.URL)
	}
}

// TestUITraitPreview: the computed trait form's trait key and value preview (the profiles that
// sent the event, in the window for the kinds that have one), the backfill said for a kind
// the profile's counters do not hold, and a profile's computed trait without a value shown as
// "no data yet".
func TestUITraitPreview(t *testing.T) {
	h, fake := audiencesHarness(t)
	b := h.signIn(t)
	b.get("/traits/new").contains(t, http.StatusOK, `data-preview-url="/traits/preview"`, `id="trait-preview"`, `formaction="/traits/preview"`)
	preview := func(form url.Values, want ...string) {
		t.Helper()
		p := b.post("/traits/preview", form)
		if p.Status != http.StatusOK || !strings.HasPrefix(p.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("preview %v: %d %q", form, p.Status, p.Body)
		}
		for _, w := range want {
			if !strings.Contains(p.Body, w) {
				t.Fatalf("preview %v: %q, want %q", form, p.Body, w)
			}
		}
	}
	preview(url.Values{"name": {"Orders 30 Days"}, "kind": {"count"}, "event": {"Order Completed"}, "within": {"720h"}},
		"Trait key: orders_30_days.", "≈ 1,234 of 56,789 profiles sent Order Completed in the window: they get a count now")
	if got := fake.lastRule(); got != `{"event":"Order Completed","within":"720h"}` {
		t.Errorf("the rule previewed: %s", got)
	}
	preview(url.Values{"name": {"Last Plan"}, "kind": {"last"}, "event": {"Plan Changed"}, "property": {"plan"}, "within": {"720h"}},
		"Trait key: last_plan.", "last is backfilled from the events tracking.events retains once it is saved")
	if got := fake.lastRule(); got != `{"event":"Plan Changed"}` {
		t.Errorf("the rule previewed for a kind without a window: %s", got)
	}
	preview(url.Values{"kind": {"count"}}, "Name it to see its trait key.", "Fill in the event")

	b.get("/traits/new")
	if p := b.post("/traits/new", url.Values{"id": {"last-plan"}, "name": {"Last Plan"}, "source": {"web"}, "kind": {"last"}, "event": {"Plan Changed"}, "property": {"plan"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("creating the trait: %d %s", p.Status, p.Body)
	}
	b.get("/traits/last-plan").contains(t, http.StatusOK, `<code id="trait-key">last_plan</code>`)
	b.get("/audiences/profile?userId=u1").contains(t, http.StatusOK, `<td><code>last_plan</code></td><td><span class="muted">no data yet</span></td>`,
		`<td><code>orders_30_days</code></td><td>3</td>`)
}

// TestUISignInNamesTokenFile: the sign-in page names the file the token is kept in, as the
// console's settings say, not a fixed path.
func TestUISignInNamesTokenFile(t *testing.T) {
	h := newHarness(t, func(c *console.Config) { c.TokenFile = "/srv/tributary/console-token" })
	anon := h.newBrowser(t, false)
	p := anon.get("/signin")
	p.contains(t, http.StatusOK, `<code class="id">/srv/tributary/console-token</code>`)
	if strings.Contains(p.Body, ".data/console-token") {
		t.Fatal("the sign-in page names .data/console-token")
	}
	anon.post("/signin", url.Values{"token": {"wrong-token-0123456789"}}).contains(t, http.StatusUnauthorized, "kept in /srv/tributary/console-token")
}
