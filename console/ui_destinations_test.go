package console_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// destBrowser and destPage are the shared browser and page (ui_test.go), following redirects.
type (
	destBrowser = browser
	destPage    = uiPage
)

func newDestBrowser(t *testing.T, h *harness) *destBrowser { return h.signInFollowing(t) }

// expectDestPage fails unless p has status and holds every text (HTML-escaped as the page is).
func expectDestPage(t *testing.T, p destPage, status int, texts ...string) {
	t.Helper()
	if p.Status != status {
		t.Fatalf("%s: status %d, want %d:\n%s", p.URL, p.Status, status, p.Body)
	}
	for _, s := range texts {
		if !strings.Contains(p.Body, s) {
			t.Fatalf("%s: no %q in the page:\n%s", p.URL, s, p.Body)
		}
	}
}

// fieldError is the error paragraph of the input id, as the forms write it.
func destFieldErr(id, msg string) string {
	return `<p id="` + id + `-error" class="field-error">` + html.EscapeString(msg) + `</p>`
}

var destHiddenInput = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// destHiddenFields are the hidden inputs of a page (the setup flow's carried state), but the CSRF
// token.
func destHiddenFields(body string) url.Values {
	out := url.Values{}
	for _, m := range destHiddenInput.FindAllStringSubmatch(body, -1) {
		if m[1] != "_csrf" {
			out.Add(m[1], html.UnescapeString(m[2]))
		}
	}
	return out
}

// step sends the setup flow's form: the page's hidden fields plus the step's inputs.
func (b *destBrowser) step(prev destPage, inputs url.Values) destPage {
	b.t.Helper()
	form := destHiddenFields(prev.Body)
	for k, v := range inputs {
		form[k] = v
	}
	return b.post("/destinations/new/webhooks", form)
}

func destHarness(t *testing.T) *harness {
	return newHarness(t, func(c *console.Config) { c.TestTimeout = 300 * time.Millisecond })
}

// TestUIDestinationSetup: the catalog, then the setup flow step by step, each step's
// errors (the API's messages) next to their inputs, a complete walk that creates a destination
// with two URLs, a header and a secret, and one created disabled.
func TestUIDestinationSetup(t *testing.T) {
	h := destHarness(t)
	b := newDestBrowser(t, h)

	expectDestPage(t, b.get("/destinations"), http.StatusOK, `href="/destinations/file-hooks"`, "Add a destination")
	expectDestPage(t, b.get("/destinations/new"), http.StatusOK, "<h2>Webhooks</h2>", `href="/destinations/new/webhooks"`)
	first := b.get("/destinations/new/webhooks")
	expectDestPage(t, first, http.StatusOK, `aria-current="step">1. Name and sources`, `<label for="id">Id</label>`, `value="web"`)

	// Step 1: no id and no source; then a taken id.
	p := b.step(first, url.Values{"step": {"1"}, "id": {""}})
	expectDestPage(t, p, http.StatusBadRequest, `id="id-error" class="field-error">`,
		`<p id="sources-error" class="field-error">Pick at least one source: its events are what this destination receives.</p>`)
	if strings.Contains(p.Body, "url0-error") {
		t.Fatal("step 1 shows an error of step 2")
	}
	p = b.step(first, url.Values{"step": {"1"}, "id": {"file-hooks"}, "sources": {"web"}})
	expectDestPage(t, p, http.StatusConflict, destFieldErr("id", `a destination with id "file-hooks" exists already`), `aria-invalid="true"`)

	// Step 2: a bad URL, a header that is no header name, a header line without a colon.
	step2 := b.step(first, url.Values{"step": {"1"}, "id": {"hooks2"}, "name": {"Billing"}, "sources": {"web"}})
	expectDestPage(t, step2, http.StatusOK, `aria-current="step">2. Webhook URLs`, `<label for="url0">URL 1</label>`, `<label for="headers0">Static headers of URL 1</label>`,
		`name="addURL"`, "Add a URL")
	if strings.Contains(step2.Body, `<label for="url1">`) {
		t.Fatal("step 2 shows more than one URL before Add a URL")
	}
	p = b.step(step2, url.Values{"step": {"2"}, "url0": {"ftp://x"}, "url1": {"http://127.0.0.1:9/b"}, "headers1": {"X Team: a"}, "url2": {"http://127.0.0.1:9/c"}, "headers2": {"no colon"}})
	expectDestPage(t, p, http.StatusBadRequest,
		destFieldErr("url0", `must be an absolute http or https URL with a host, got "ftp://x"`),
		destFieldErr("headers1", `"X Team" is not a valid HTTP header name`),
		destFieldErr("headers2", `line 1: write each header as “Name: value”`))
	p = b.step(step2, url.Values{"step": {"2"}, "url3": {"http://127.0.0.1:9/d"}, "headers3": {"Content-Type: text/plain"}})
	expectDestPage(t, p, http.StatusBadRequest, destFieldErr("headers3", `"Content-Type" is set by Tributary on every request and cannot be configured`))
	p = b.step(step2, url.Values{"step": {"2"}})
	expectDestPage(t, p, http.StatusBadRequest, `<p class="field-error" role="alert">at least 1 webhook is required</p>`)
	step3 := b.step(step2, url.Values{"step": {"2"}, "url0": {"http://127.0.0.1:9/a"}, "headers0": {"Authorization: Bearer tok-123\nX-Team: growth"}, "url1": {"http://127.0.0.1:9/b"}})
	expectDestPage(t, step3, http.StatusOK, `aria-current="step">3. Shared secret`, `type="password"`, "Advanced options", "Standard Webhooks")

	// Step 3: Standard Webhooks needs the secret; Back keeps every input.
	p = b.step(step3, url.Values{"step": {"3"}, "standardWebhooks": {"true"}})
	expectDestPage(t, p, http.StatusBadRequest, destFieldErr("standardWebhooks", "requires sharedSecret"))
	back := b.step(step3, url.Values{"step": {"3"}, "back": {"1"}})
	expectDestPage(t, back, http.StatusOK, `aria-current="step">2. Webhook URLs`, `value="http://127.0.0.1:9/a"`, "Authorization: Bearer tok-123")
	review := b.step(step3, url.Values{"step": {"3"}, "secret": {"s3cret-value-42"}, "standardWebhooks": {"true"}})
	expectDestPage(t, review, http.StatusOK, `aria-current="step">4. Review and enable`, "<code>http://127.0.0.1:9/a</code>", "Headers: Authorization, X-Team",
		"<code>X-Signature</code> on every request, and Standard Webhooks headers", `name="enable" value="true" checked`)
	if strings.Count(review.Body, "s3cret-value-42") != 1 || !strings.Contains(review.Body, `<input type="hidden" name="secret" value="s3cret-value-42">`) {
		t.Fatal("the review step must carry the secret in its hidden field only")
	}
	done := b.step(review, url.Values{"step": {"4"}, "enable": {"true"}})
	expectDestPage(t, done, http.StatusOK, "Destination hooks2 created and enabled", "<h1>Destination hooks2")
	if !strings.HasSuffix(strings.SplitN(done.URL, "?", 2)[0], "/destinations/hooks2") {
		t.Fatalf("after the last step: %s", done.URL)
	}
	d, ok := h.env.Store.Snapshot().DestinationByID("hooks2")
	if !ok {
		t.Fatal("hooks2 is not in the config")
	}
	if d.Name != "Billing" || !d.IsEnabled() || len(d.Sources) != 1 || d.Sources[0] != "web" || len(d.Settings.Webhooks) != 2 ||
		d.Settings.Webhooks[0].URL != "http://127.0.0.1:9/a" || d.Settings.Webhooks[0].Headers["Authorization"] != "Bearer tok-123" ||
		d.Settings.Webhooks[0].Headers["X-Team"] != "growth" || d.Settings.Webhooks[1].URL != "http://127.0.0.1:9/b" ||
		d.Settings.SharedSecret != "s3cret-value-42" || !d.Settings.StandardWebhooks || d.Origin != schemas.OriginConsole {
		t.Fatalf("created: %+v", d)
	}
	if strings.Contains(done.Body, "s3cret-value-42") {
		t.Fatal("the destination page shows the secret")
	}

	// The same walk, created disabled; the id is taken by then at the last step.
	walk := func(id string, enable bool) destPage {
		p := b.step(first, url.Values{"step": {"1"}, "id": {id}, "sources": {"web"}})
		p = b.step(p, url.Values{"step": {"2"}, "url0": {"http://127.0.0.1:9/z"}})
		p = b.step(p, url.Values{"step": {"3"}})
		in := url.Values{"step": {"4"}}
		if enable {
			in.Set("enable", "true")
		}
		return b.step(p, in)
	}
	expectDestPage(t, walk("quiet", false), http.StatusOK, "Destination quiet created, disabled", `<span class="badge">disabled</span>`)
	if q, _ := h.env.Store.Snapshot().DestinationByID("quiet"); q == nil || q.IsEnabled() || q.Settings.SharedSecret != "" {
		t.Fatalf("quiet: %+v", q)
	}
	p = b.step(first, url.Values{"step": {"4"}, "id": {"quiet"}, "sources": {"web"}, "url0": {"http://127.0.0.1:9/z"}, "enable": {"true"}})
	expectDestPage(t, p, http.StatusConflict, `aria-current="step">4. Review and enable`, "<h2>1. Name and sources</h2>", destFieldErr("id", `a destination with id "quiet" exists already`))
	expectDestPage(t, b.get("/destinations"), http.StatusOK, `href="/destinations/hooks2"`, `href="/destinations/quiet"`)
}

// TestUIDestinationPage: a destination's page — the header's enable/disable, the charts (SVG
// with axes, units and a hover title per point; an empty state without attempts; 24 h), the
// delivery log (filter, paging, an attempt's request with the rebuilt body and its X-Signature,
// and the answer), the DLQ and its replay, the test form, the edit form and delete.
func TestUIDestinationPage(t *testing.T) {
	h := destHarness(t)
	b := newDestBrowser(t, h)
	expect(t, h.do(http.MethodPost, "/v1/destinations", map[string]any{"id": "signed", "type": "webhooks", "sources": []string{"web"},
		"settings": map[string]any{"sharedSecret": "sign-me-0123", "webhooks": []any{map[string]any{"url": "http://127.0.0.1:9/signed", "headers": map[string]string{"Authorization": "Bearer abc"}}}}}), http.StatusCreated)
	servicetest.Eventually(t, 5*time.Second, "destination signed", func() bool { _, ok := h.env.Store.Snapshot().DestinationByID("signed"); return ok })

	// No attempt yet: the empty states say what to do.
	p := b.get("/destinations/signed")
	expectDestPage(t, p, http.StatusOK, `class="chart-empty">No attempt in the last hour`, `<span class="badge ok">enabled</span>`, `>Disable</button>`,
		`<a href="/destinations/signed" aria-current="page">Health</a>`, `<a href="/destinations/signed?tab=messages">Messages</a>`)
	expectDestPage(t, b.get("/destinations/signed?tab=messages"), http.StatusOK, "No message yet.", `href="/destinations/signed?tab=test"`,
		`<a href="/destinations/signed?tab=messages" aria-current="page">Messages</a>`)
	expectDestPage(t, b.get("/destinations/signed?tab=dlq"), http.StatusOK, "The dead-letter queue is empty.")

	// Attempts: one message of the source's events, delivered after a failure; and 120 more.
	now := time.Now().UTC()
	event := []byte(`{"type":"track","event":"Signed Up","userId":"u1","messageId":"m-ui-1","properties":{"plan":"pro"}}`)
	h.env.Produce(&kgo.Record{Topic: schemas.TopicEvents, Key: []byte("u1"), Value: event,
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("web")}, {Key: schemas.HeaderMessageID, Value: []byte("m-ui-1")}, {Key: schemas.HeaderType, Value: []byte("track")}}})
	var recs []*kgo.Record
	for i := range 120 {
		class, status := "ok", 200
		if i%4 == 0 {
			class, status = "status_5xx", 503
		}
		recs = append(recs, &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("signed"),
			Value: attemptJSON("signed", fmt.Sprintf("m-bulk-%03d", i), "http://127.0.0.1:9/signed", 1, status, float64(5+i%40), class, now.Add(-time.Duration(120-i)*20*time.Second))})
	}
	recs = append(recs,
		&kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("signed"), Value: attemptJSON("signed", "m-ui-1", "http://127.0.0.1:9/signed", 1, 500, 30, "status_5xx", now.Add(-2*time.Second))},
		&kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("signed"), Value: attemptJSON("signed", "m-ui-1", "http://127.0.0.1:9/signed", 2, 200, 12, "ok", now.Add(-time.Second))},
		&kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("signed"), Value: attemptJSON("signed", "m-gone", "http://127.0.0.1:9/signed", 1, 200, 12, "ok", now)})
	h.env.Produce(recs...)
	servicetest.Eventually(t, 5*time.Second, "the attempts on the page", func() bool {
		p = b.get("/destinations/signed?tab=messages&view=attempts")
		return strings.Contains(p.Body, "m-gone")
	})
	log := p
	p = b.get("/destinations/signed")
	expectDestPage(t, p, http.StatusOK, `<svg class="chart" viewBox="0 0 420 210" role="img" aria-label="Success rate per minute over the last hour`,
		`>100 %</text>`, `>0 %</text>`, " ms</text>", ">UTC</text>", `class="bar-bad"`, `class="line line-p50"`, `class="line line-p99"`, "attempts</title></rect>",
		"The charts' numbers")
	expectDestPage(t, log, http.StatusOK, `Older attempts`)
	if n := strings.Count(p.Body, `<rect class="hit"`); n != 2*60 {
		t.Fatalf("%d hover targets, want 60 per chart", n)
	}
	if !regexp.MustCompile(`<title>\d\d:\d\d · \d+\.\d % · \d+ attempts</title>`).MatchString(p.Body) || !regexp.MustCompile(`<title>\d\d:\d\d · p50 [\d.]+ ms · p99 [\d.]+ ms · \d+ attempts</title>`).MatchString(p.Body) {
		t.Fatal("no hover value with its unit in the charts")
	}
	day := b.get("/destinations/signed?window=24h")
	expectDestPage(t, day, http.StatusOK, `aria-label="Success rate per 10 minutes over the last 24 hours`, `href="/destinations/signed?window=24h" aria-current="true"`)
	if n := strings.Count(day.Body, `<rect class="hit"`); n < 2*144 {
		t.Fatalf("%d hover targets over 24 h, want 144 per chart", n)
	}

	// The log: filtered, paged.
	fail := b.get("/destinations/signed?tab=messages&view=attempts&status=failure")
	expectDestPage(t, fail, http.StatusOK, `<option value="failure" selected>`, "status_5xx")
	if strings.Contains(fail.Body, `<span class="badge ok">200</span>`) {
		t.Fatal("the failure filter shows a success")
	}
	expectDestPage(t, b.get("/destinations/signed?tab=messages&view=attempts&status=tls"), http.StatusOK, "No attempt is “tls” in the log.")
	older := regexp.MustCompile(`href="(/destinations/signed\?tab=messages&amp;view=attempts&amp;status=&amp;cursor=\d+)"`).FindStringSubmatch(log.Body)
	if older == nil {
		t.Fatal("no link to older attempts")
	}
	expectDestPage(t, b.get(html.UnescapeString(older[1])), http.StatusOK, "Newest attempts")

	// An attempt: the request (headers with the computed X-Signature and the static header,
	// the body as the router builds it) and the answer.
	seqOf := func(body, msg string) string {
		m := regexp.MustCompile(`href="/destinations/signed/attempts/(\d+)">[^<]*</a> <span class="muted day">[^<]*</span></td>\s*<td><a href="/destinations/signed/messages/` + msg + `"><code class="id">` + msg + `</code></a>`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no attempt of %s in the log", msg)
		}
		return m[1]
	}
	_, wantBody, err := schemas.DecodeRoutingViewAppendBody(nil, event)
	if err != nil {
		t.Fatal(err)
	}
	a := b.get("/destinations/signed/attempts/" + seqOf(log.Body, "m-ui-1"))
	expectDestPage(t, a, http.StatusOK, "<code>POST http://127.0.0.1:9/signed</code>", "<code>Tributary/1.0</code>", "<code>application/json</code>",
		"<code>X-Message-Id</code></td><td class=\"url\"><code>m-ui-1</code>",
		"<code>X-Signature</code></td><td class=\"url\"><code>"+schemas.XSignature("sign-me-0123", wantBody)+"</code>",
		"<code>Authorization</code></td><td class=\"url\"><code>Bearer "+schemas.Mask+"</code>", // masked (docs/console.md#secrets)
		"<pre tabindex=\"0\">"+html.EscapeString(string(wantBody))+"</pre>", "&#34;event&#34;: &#34;Signed Up&#34;", "<dt>Status</dt><dd>200</dd>", "<dt>Attempt</dt><dd>2</dd>",
		`<a href="/destinations/signed/messages/m-ui-1">the message, with all its attempts</a>`)
	// The message page shows the body sent, as the attempt page does, and both attempts.
	expectDestPage(t, b.get("/destinations/signed/messages/m-ui-1"), http.StatusOK, "<pre tabindex=\"0\">"+html.EscapeString(string(wantBody))+"</pre>",
		`<span class="badge ok">delivered</span>`, "<h3>Attempt 1 · ", "<h3>Attempt 2 · ")
	expectDestPage(t, b.get("/destinations/signed/messages/m-gone"), http.StatusOK, "The body is no longer in the console&#39;s memory")
	gone := b.get("/destinations/signed/attempts/" + seqOf(log.Body, "m-gone"))
	expectDestPage(t, gone, http.StatusOK, "The body is no longer in the console&#39;s memory (it keeps the last 100 events per source).",
		"computed per body", "<code>X-Signature</code>")
	expectDestPage(t, b.get("/destinations/signed/attempts/999999"), http.StatusNotFound, "is not in the delivery log")
	expectDestPage(t, b.get("/destinations/ghost"), http.StatusNotFound, "There is no destination")

	// The test form: no deliverer in the harness, so every URL is pending; its answer is a
	// redirect to the test tab (a reload sends nothing again).
	tp := b.post("/destinations/signed/test", url.Values{"type": {"identify"}})
	expectDestPage(t, tp, http.StatusOK, "What each URL answered", `<code class="id">http://127.0.0.1:9/signed</code>`, `<span class="badge warn">pending</span>`,
		"is the deliverer running?", `<option value="identify" selected>`, `<a href="/destinations/signed?tab=messages&amp;view=attempts">delivery log</a>`, "&#34;type&#34;: &#34;identify&#34;", `aria-current="page">Test</a>`)
	if !strings.Contains(tp.URL, "tab=test") || !strings.Contains(tp.URL, "test=test-") {
		t.Fatalf("after a test: %s", tp.URL)
	}
	expectDestPage(t, b.post("/destinations/signed/test", url.Values{"type": {"nope"}}), http.StatusBadRequest, `<p id="test-error" class="field-error" role="alert">must be one of`)

	// Disable, then enable; a disabled destination can be tested (before it is enabled).
	p = b.post("/destinations/signed/enabled", url.Values{"enabled": {"false"}, "takeOver": {"true"}})
	expectDestPage(t, p, http.StatusOK, "Destination signed disabled", `<span class="badge">disabled</span>`, `>Enable</button>`)
	if d, _ := h.env.Store.Snapshot().DestinationByID("signed"); d.IsEnabled() {
		t.Fatal("still enabled")
	}
	expectDestPage(t, b.post("/destinations/signed/test", url.Values{"type": {"track"}}), http.StatusOK, "What each URL answered", "it gets test events only")
	p = b.post("/destinations/signed/enabled", url.Values{"enabled": {"true"}})
	expectDestPage(t, p, http.StatusOK, "Destination signed enabled", `<span class="badge ok">enabled</span>`)
	if d, _ := h.env.Store.Snapshot().DestinationByID("signed"); !d.IsEnabled() || d.Settings.SharedSecret != "sign-me-0123" {
		t.Fatalf("after enable: %+v", d)
	}
	// A file-managed destination needs the take-over; a stale version is refused.
	expectDestPage(t, b.post("/destinations/file-hooks/enabled", url.Values{"enabled": {"false"}}), http.StatusConflict, "is managed by file:base.yaml")
	expectDestPage(t, b.post("/destinations/signed/enabled", url.Values{"enabled": {"false"}, "version": {"1"}}), http.StatusConflict, "read it again and re-apply your change")

	// The edit form: a bad URL next to its input; then saved, the secret kept, and the header
	// value, shown masked and posted back masked, kept too.
	p = b.get("/destinations/signed?tab=settings")
	version := regexp.MustCompile(`name="version" value="(\d+)"`).FindStringSubmatch(p.Body)[1]
	expectDestPage(t, p, http.StatusOK, `<label for="edit-url0">URL 1</label>`, `value="http://127.0.0.1:9/signed"`, "Authorization: Bearer "+schemas.Mask, "leave this empty to keep it")
	if strings.Contains(p.Body, "sign-me-0123") || strings.Contains(p.Body, "Bearer abc") {
		t.Fatal("the page shows the secret")
	}
	edit := url.Values{"version": {version}, "name": {"Signed hooks"}, "sources": {"web"}, "url0": {"http://127.0.0.1:9/signed"}, "headers0": {"Authorization: Bearer " + schemas.Mask}, "url1": {"nope"}}
	expectDestPage(t, b.post("/destinations/signed/edit", edit), http.StatusBadRequest,
		destFieldErr("edit-url1", `must be an absolute http or https URL with a host, got "nope"`), "The destination was not saved")
	edit.Set("url1", "http://127.0.0.1:9/second")
	expectDestPage(t, b.post("/destinations/signed/edit", edit), http.StatusOK, "Destination signed saved.")
	d, _ := h.env.Store.Snapshot().DestinationByID("signed")
	if d.Name != "Signed hooks" || len(d.Settings.Webhooks) != 2 || d.Settings.Webhooks[1].URL != "http://127.0.0.1:9/second" || d.Settings.SharedSecret != "sign-me-0123" ||
		d.Settings.Webhooks[0].Headers["Authorization"] != "Bearer abc" {
		t.Fatalf("after edit: %+v", d)
	}
	expectDestPage(t, b.post("/destinations/signed/edit", edit), http.StatusConflict, "read it again and re-apply your change")

	// Delete.
	expectDestPage(t, b.post("/destinations/signed/delete", nil), http.StatusOK, "Destination signed deleted.")
	if _, ok := h.env.Store.Snapshot().DestinationByID("signed"); ok {
		t.Fatal("signed is still in the config")
	}
}

// TestUIDestinationDLQ: a dead letter listed with a checkbox and select-all, replayed from the
// page (selected, then all), with the count in the flash.
func TestUIDestinationDLQ(t *testing.T) {
	h := destHarness(t)
	b := newDestBrowser(t, h)
	now := time.Now().UTC()
	for _, id := range []string{"m-dead-1", "m-dead-2"} {
		h.env.Produce(&kgo.Record{Topic: schemas.TopicDLQ, Key: []byte("file-hooks:u1"), Value: []byte(`{"type":"track","event":"Order Completed","userId":"u1"}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("file-hooks")}, {Key: schemas.HeaderMessageID, Value: []byte(id)},
				{Key: schemas.HeaderReason, Value: []byte("retries exhausted")}, {Key: schemas.HeaderLastStatus, Value: []byte("500")},
				{Key: schemas.HeaderLastError, Value: []byte("HTTP 500")}, {Key: schemas.HeaderAttempt, Value: []byte("8")},
				{Key: schemas.HeaderFirstAttemptAt, Value: []byte(schemas.FormatTimestamp(now.Add(-time.Hour)))}}})
	}
	var p destPage
	servicetest.Eventually(t, 10*time.Second, "the dead letters on the page", func() bool {
		p = b.send(http.MethodGet, "/destinations/file-hooks?tab=dlq", nil)
		return strings.Contains(p.Body, "m-dead-1") && strings.Contains(p.Body, "m-dead-2") && strings.Contains(p.Body, `Dead letters <span class="badge warn">2</span>`)
	})
	expectDestPage(t, p, http.StatusOK, `data-select-all="messageIds"`, `name="messageIds" value="m-dead-1"`, "retries exhausted", `Dead letters <span class="badge warn">2</span>`,
		`<button type="submit" name="replay" value="selected">Replay selected</button>`, `name="replay" value="all"`)
	b.get("/destinations/file-hooks?tab=dlq") // the page with dead letters within its budget too
	// The dead letters' times in the form of every other time of the UI, not raw ISO.
	if !regexp.MustCompile(`<td class="when">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</td>`).MatchString(p.Body) || strings.Contains(p.Body, "Z</td>") {
		t.Fatal("a dead letter's time is not in the UI's time format")
	}

	expectDestPage(t, b.post("/destinations/file-hooks/dlq/replay", url.Values{"replay": {"selected"}}), http.StatusBadRequest, "Select the messages to replay first")
	p = b.post("/destinations/file-hooks/dlq/replay", url.Values{"replay": {"selected"}, "messageIds": {"m-dead-2"}})
	expectDestPage(t, p, http.StatusOK, "Replayed 1 message: their new attempts show in the delivery log.")
	if !strings.HasSuffix(p.URL, "#dlq") && !strings.Contains(p.URL, "done=") {
		t.Fatalf("after replay: %s", p.URL)
	}
	p = b.post("/destinations/file-hooks/dlq/replay", url.Values{"replay": {"all"}})
	expectDestPage(t, p, http.StatusOK, "Replayed 1 message")
	expectDestPage(t, b.post("/destinations/file-hooks/dlq/replay", url.Values{"replay": {"all"}}), http.StatusOK, "Nothing to replay")
	expectDestPage(t, b.post("/destinations/ghost/dlq/replay", url.Values{"replay": {"all"}}), http.StatusNotFound, "There is no destination")
}

// TestUIDestinationAccess: every destinations page redirects to the sign-in without a session
// (a form is 401), and a form without the session's CSRF token is refused.
func TestUIDestinationAccess(t *testing.T) {
	h := destHarness(t)
	anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/destinations", "/destinations/new", "/destinations/new/webhooks", "/destinations/file-hooks", "/destinations/file-hooks/attempts/1",
		"/destinations/file-hooks/messages/m1"} {
		resp, err := anon.Get(h.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin?next="+url.QueryEscape(path) {
			t.Errorf("GET %s without a session: %d to %q", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	for _, path := range []string{"/destinations/new/webhooks", "/destinations/file-hooks/enabled", "/destinations/file-hooks/edit", "/destinations/file-hooks/delete",
		"/destinations/file-hooks/dlq/replay", "/destinations/file-hooks/test", "/destinations/file-hooks/messages/m1/retry", "/destinations/file-hooks/messages/m1/replay"} {
		resp, err := anon.PostForm(h.srv.URL+path, url.Values{"enabled": {"false"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s without a session: %d", path, resp.StatusCode)
		}
	}
	b := newDestBrowser(t, h)
	b.get("/destinations/file-hooks")
	for _, path := range []string{"/destinations/new/webhooks", "/destinations/file-hooks/enabled", "/destinations/file-hooks/edit", "/destinations/file-hooks/delete",
		"/destinations/file-hooks/dlq/replay", "/destinations/file-hooks/test", "/destinations/file-hooks/messages/m1/retry", "/destinations/file-hooks/messages/m1/replay"} {
		expectDestPage(t, b.send(http.MethodPost, path, url.Values{"enabled": {"false"}, "takeOver": {"true"}}), http.StatusForbidden, "CSRF token does not match")
		expectDestPage(t, b.send(http.MethodPost, path, url.Values{"_csrf": {"forged"}, "enabled": {"false"}, "takeOver": {"true"}}), http.StatusForbidden)
	}
	if d, ok := h.env.Store.Snapshot().DestinationByID("file-hooks"); !ok || !d.IsEnabled() {
		t.Fatal("a refused form changed the destination")
	}
}
