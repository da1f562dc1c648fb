package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// lacks fails when the page holds any of texts.
func (p uiPage) lacks(t testing.TB, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(p.Body, s) {
			t.Fatalf("the page holds %q:\n%s", s, p.Body)
		}
	}
}

// uiMessages produces one message of each status to file-hooks: m-ok delivered (user-5's Order
// Completed), m-500 retrying after a 500 (user-5's Cart Viewed, its answer's body holding
// markup), m-anon delivered (an anonymous page view), m-dead dead-lettered (user-7), m-drop
// dropped before the destination.
func uiMessages(t *testing.T, h *harness) {
	now := time.Now().UTC()
	at := func(d time.Duration) string { return schemas.FormatTimestamp(now.Add(d)) }
	msg := func(id, typ, event, user string, d time.Duration) schemas.AttemptRecord {
		return schemas.AttemptRecord{MessageID: id, Attempt: 1, At: at(d), Type: typ, Event: event, UserID: user, ReceivedAt: at(d - time.Second),
			URL: "https://a.example.com/in", Status: 200, ErrorClass: schemas.ClassOK, LatencyMs: 3}
	}
	ok := msg("m-ok", "track", "Order Completed", "user-5", -5*time.Second)
	failed := msg("m-500", "track", "Cart Viewed", "user-5", -4*time.Second)
	failed.Status, failed.ErrorClass, failed.Error = 500, schemas.ClassStatus5xx, "status_5xx: HTTP 500 from a.example.com:443"
	failed.ResponseHeaders, failed.ResponseBody = map[string]string{"X-Request-Id": "req-42"}, "<b>database down</b>"
	failed.NextAttemptAt = at(10 * time.Minute)
	anon := msg("m-anon", "page", "Pricing", "", -3*time.Second)
	anon.AnonymousID = "anon-1"
	dead := msg("m-dead", "track", "Order Completed", "user-7", -2*time.Second)
	dead.Status, dead.ErrorClass, dead.Error, dead.DeadLettered = 500, schemas.ClassStatus5xx, "status_5xx: HTTP 500", "retries exhausted"
	drop := msg("m-drop", "track", "Order Completed", "user-8", -time.Second)
	drop.URL, drop.Status, drop.ErrorClass, drop.LatencyMs, drop.Reason = "", 0, schemas.ClassFiltered, 0, schemas.FilterReason("integrations")
	h.env.Produce(attemptRecord(t, ok), attemptRecord(t, failed), attemptRecord(t, anon), attemptRecord(t, dead), attemptRecord(t, drop))
}

// TestUIMessagesTab: the Messages tab lists the destination's messages, newest first, with
// their type, event, user, status and attempts, each row linking to its message page; the
// search form finds them by user id, anonymous id, event, type, status and message id through
// the API's filters; a bad value is said on the page (200, the form kept), not answered 400;
// the delivery log of attempts stays one link away and links each attempt to its message.
func TestUIMessagesTab(t *testing.T) {
	h := destHarness(t)
	b := newDestBrowser(t, h)
	uiMessages(t, h)
	var p uiPage
	servicetest.Eventually(t, 10*time.Second, "the messages on the tab", func() bool {
		p = b.get("/destinations/file-hooks?tab=messages")
		return strings.Contains(p.Body, "m-drop") && strings.Contains(p.Body, "m-ok")
	})
	p.contains(t, http.StatusOK, `<a href="/destinations/file-hooks/messages/m-500"><code class="id">m-500</code></a>`,
		`<span class="badge ok">delivered</span>`, `<span class="badge warn">retrying</span>`, `<span class="badge bad">dead-lettered</span>`,
		`<span class="badge">filtered</span>`, "<code>anon-1</code>", "Cart Viewed", `href="/destinations/file-hooks?tab=messages&amp;view=attempts"`)
	if strings.Index(p.Body, "m-drop") > strings.Index(p.Body, "m-ok") {
		t.Error("the messages are not newest first")
	}

	search := func(q url.Values) uiPage {
		t.Helper()
		q.Set("tab", "messages")
		return b.get("/destinations/file-hooks?" + q.Encode())
	}
	p = search(url.Values{"userId": {"user-5"}})
	p.contains(t, http.StatusOK, "m-ok", "m-500", `name="userId" value="user-5"`)
	p.lacks(t, "m-anon", "m-dead", "m-drop")
	p = search(url.Values{"event": {"Cart Viewed"}})
	p.contains(t, http.StatusOK, "m-500")
	p.lacks(t, "m-ok", "m-dead")
	p = search(url.Values{"event": {"Order Completed"}, "status": {"dead_lettered"}})
	p.contains(t, http.StatusOK, "m-dead", `<option value="dead_lettered" selected>`)
	p.lacks(t, "m-ok", "m-drop")
	search(url.Values{"anonymousId": {"anon-1"}}).contains(t, http.StatusOK, "m-anon")
	p = search(url.Values{"type": {"page"}})
	p.contains(t, http.StatusOK, "m-anon")
	p.lacks(t, "m-ok")
	search(url.Values{"messageId": {"m-dead"}}).contains(t, http.StatusOK, "/destinations/file-hooks/messages/m-dead")
	search(url.Values{"since": {"1h"}, "userId": {"user-7"}}).contains(t, http.StatusOK, "m-dead")
	search(url.Values{"userId": {"nobody"}}).contains(t, http.StatusOK, "No message matches this search.")

	// Bad values: the page says what is wrong, with the form as typed.
	search(url.Values{"status": {"lost"}}).contains(t, http.StatusOK, `<p class="error" role="alert">The search was not run: status: must be one of delivered, retrying, dead_lettered, filtered`)
	p = search(url.Values{"since": {"yesterday"}, "userId": {"user-5"}})
	p.contains(t, http.StatusOK, "The search was not run: since: must be a time", `name="since" value="yesterday"`)
	p.lacks(t, "m-500")
	search(url.Values{"cursor": {"x"}}).contains(t, http.StatusOK, "The search was not run: cursor: not a cursor of this API")
	search(url.Values{"event": {strings.Repeat("e", 2000)}}).contains(t, http.StatusOK, "The search was not run: event: at most 1024 bytes")

	// The delivery log of attempts: each attempt links to its page and to its message.
	b.get("/destinations/file-hooks?tab=messages&view=attempts").contains(t, http.StatusOK, "the delivery log of attempts",
		`<a href="/destinations/file-hooks/messages/m-500"><code class="id">m-500</code></a>`, `href="/destinations/file-hooks/attempts/`,
		`<input type="hidden" name="view" value="attempts">`)
}

// TestUIMessagesPaging: a page holds 50 messages; "Older messages" carries the search and the
// cursor, and the next page holds the rest.
func TestUIMessagesPaging(t *testing.T) {
	h := destHarness(t)
	b := newDestBrowser(t, h)
	now := time.Now().UTC()
	var recs []*kgo.Record
	for i := range 55 {
		recs = append(recs, attemptRecord(t, schemas.AttemptRecord{MessageID: "m-p" + string(rune('a'+i/26)) + string(rune('a'+i%26)), Attempt: 1,
			At: schemas.FormatTimestamp(now.Add(time.Duration(i-60) * time.Second)), Type: "track", Event: "Paged", UserID: "user-p",
			URL: "https://a.example.com/in", Status: 200, ErrorClass: schemas.ClassOK}))
	}
	h.env.Produce(recs...)
	var p uiPage
	servicetest.Eventually(t, 10*time.Second, "55 messages", func() bool {
		p = b.get("/destinations/file-hooks?tab=messages&userId=user-p")
		return strings.Contains(p.Body, "m-pcc") // the newest
	})
	p.contains(t, http.StatusOK, "Older messages")
	p.lacks(t, "m-paa", "Newest messages")
	i := strings.Index(p.Body, `Older messages`)
	j := strings.LastIndex(p.Body[:i], `href="`)
	older := strings.ReplaceAll(p.Body[j+len(`href="`):i-2], "&amp;", "&")
	if !strings.Contains(older, "userId=user-p") || !strings.Contains(older, "cursor=") {
		t.Fatalf("the older page's link %q", older)
	}
	p = b.get(older)
	p.contains(t, http.StatusOK, "m-paa", "m-pae", "Newest messages")
	p.lacks(t, "m-paf", "Older messages")
}

// TestUIMessagePage: the message page of each status: what the message is, every attempt with
// the endpoint's answer (a 500's headers and body, escaped), its other destinations, and its
// action: "Retry now" while it is retrying (which sends the waiting message and comes back to
// the page, post/redirect/get), "Replay" once it is dead-lettered, none when delivered or
// filtered; an unknown message is a 404 page; the funnel's samples and the Pending and Dead
// letters tabs' rows link to the message pages.
func TestUIMessagePage(t *testing.T) {
	h := destHarness(t)
	b := newDestBrowser(t, h)
	uiMessages(t, h)
	// m-500 waits in a retry tier; m-dead is in the DLQ.
	now := time.Now()
	h.env.Produce(&kgo.Record{Topic: schemas.RetryTopic(time.Second), Key: []byte("file-hooks:user-5"), Value: []byte(`{"version":1,"type":"track","messageId":"m-500","userId":"user-5"}`),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("file-hooks")}, {Key: schemas.HeaderMessageID, Value: []byte("m-500")},
			{Key: schemas.HeaderType, Value: []byte("track")}, {Key: schemas.HeaderAttempt, Value: []byte("1")},
			{Key: schemas.HeaderFirstAttemptAt, Value: []byte(schemas.FormatTimestamp(now.Add(-time.Minute)))},
			{Key: schemas.HeaderDueAt, Value: []byte(schemas.FormatTimestamp(now.Add(10 * time.Minute)))},
			{Key: schemas.HeaderLastError, Value: []byte("status_5xx: HTTP 500")}, {Key: schemas.HeaderLastStatus, Value: []byte("500")}}},
		&kgo.Record{Topic: schemas.TopicDLQ, Key: []byte("file-hooks:user-7"), Value: []byte(`{"type":"track","event":"Order Completed","userId":"user-7"}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("file-hooks")}, {Key: schemas.HeaderMessageID, Value: []byte("m-dead")},
				{Key: schemas.HeaderReason, Value: []byte("retries exhausted")}, {Key: schemas.HeaderLastStatus, Value: []byte("500")},
				{Key: schemas.HeaderLastError, Value: []byte("HTTP 500")}, {Key: schemas.HeaderAttempt, Value: []byte("8")},
				{Key: schemas.HeaderFirstAttemptAt, Value: []byte(schemas.FormatTimestamp(now.Add(-time.Hour)))}}})
	var p uiPage
	servicetest.Eventually(t, 10*time.Second, "the messages and the waiting one", func() bool {
		p = b.get("/destinations/file-hooks/messages/m-500")
		return p.Status == http.StatusOK && strings.Contains(b.get("/destinations/file-hooks?tab=pending").Body, "<code>m-500</code>") &&
			strings.Contains(b.get("/destinations/file-hooks?tab=dlq").Body, "m-dead")
	})
	// The Pending and Dead letters tabs link their rows to the message pages.
	b.get("/destinations/file-hooks?tab=pending").contains(t, http.StatusOK, `<a href="/destinations/file-hooks/messages/m-500" aria-label="Message m-500: its attempts">`)
	b.get("/destinations/file-hooks?tab=dlq").contains(t, http.StatusOK, `<a href="/destinations/file-hooks/messages/m-dead" aria-label="Message m-dead: its attempts">`)
	p.contains(t, http.StatusOK, "Cart Viewed", "<code>user-5</code>", `<span class="badge warn">retrying</span>`, "next attempt",
		`<span class="badge bad">500 status_5xx</span>`, "<code>X-Request-Id</code>", "<code>req-42</code>",
		`<pre tabindex="0" class="response-body">&lt;b&gt;database down&lt;/b&gt;</pre>`, "<code>https://a.example.com/in</code>",
		`action="/destinations/file-hooks/messages/m-500/retry"`, ">Retry now</button>")
	p.lacks(t, "<b>database down</b>", ">Replay</button>")

	p = b.get("/destinations/file-hooks/messages/m-ok")
	p.contains(t, http.StatusOK, "Order Completed", `<span class="badge ok">delivered</span>`, `<span class="badge ok">200</span>`)
	p.lacks(t, ">Retry now</button>", ">Replay</button>")
	p = b.get("/destinations/file-hooks/messages/m-dead")
	p.contains(t, http.StatusOK, `<span class="badge bad">dead-lettered</span>`, "retries exhausted", `action="/destinations/file-hooks/messages/m-dead/replay"`, ">Replay</button>")
	p.lacks(t, ">Retry now</button>")
	p = b.get("/destinations/file-hooks/messages/m-drop")
	p.contains(t, http.StatusOK, `<span class="badge">filtered</span>`, "Nothing was sent: the message was dropped before this destination.")
	p.lacks(t, ">Retry now</button>", ">Replay</button>")
	b.get("/destinations/file-hooks/messages/m-anon").contains(t, http.StatusOK, "anonymous id <code>anon-1</code>")
	b.get("/destinations/file-hooks/messages/nope").contains(t, http.StatusNotFound, "This message is not in the messages view of destination file-hooks")
	b.get("/destinations/ghost/messages/m-ok").contains(t, http.StatusNotFound, "There is no destination")

	// Retry now: the waiting message is sent at once, and the browser is back on its page.
	deliveries := h.env.Reader(schemas.TopicDeliveries)
	b.get("/destinations/file-hooks/messages/m-500")
	p = b.post("/destinations/file-hooks/messages/m-500/retry", nil)
	p.contains(t, http.StatusOK, "Sent now: its attempt shows below within seconds")
	if !strings.Contains(p.URL, "/destinations/file-hooks/messages/m-500?done=") {
		t.Fatalf("after retry now: %s", p.URL)
	}
	if c := deliveries.WaitFor(1, 5*time.Second); servicetest.Header(c[0], schemas.HeaderMessageID) != "m-500" {
		t.Fatalf("retry now sent %v", c[0].Headers)
	}
	b.post("/destinations/file-hooks/messages/m-ok/retry", nil).contains(t, http.StatusOK, "Nothing sent: the message is no longer waiting")

	// Replay: the dead letter goes back to delivery, and the browser is back on its page.
	b.get("/destinations/file-hooks/messages/m-dead")
	p = b.post("/destinations/file-hooks/messages/m-dead/replay", nil)
	p.contains(t, http.StatusOK, "Replayed: it is delivered again with a fresh retry window")
	if !strings.Contains(p.URL, "/destinations/file-hooks/messages/m-dead?done=") {
		t.Fatalf("after replay: %s", p.URL)
	}
	b.post("/destinations/file-hooks/messages/m-ok/replay", nil).contains(t, http.StatusOK, "Nothing replayed: the dead-letter queue holds no copy of this message")
	b.post("/destinations/ghost/messages/m-dead/replay", nil).contains(t, http.StatusNotFound, "There is no destination")
	b.post("/destinations/ghost/messages/m-dead/retry", nil).contains(t, http.StatusNotFound, "There is no destination")

	// The funnel's samples link to their message pages.
	servicetest.Eventually(t, 10*time.Second, "the funnel's sample links", func() bool {
		return strings.Contains(b.get("/destinations/file-hooks").Body, `href="/destinations/file-hooks/messages/m-drop"`)
	})
}
