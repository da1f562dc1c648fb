package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// piiPlanted are the personal values of the planted message (docs/console.md#pii-access): a
// principal without PII access finds none of them in any answer or page.
var piiPlanted = []string{"u-planted", "a-planted", "planted@example.com", "203.0.113.77", "Planted Street"}

// piiNote is the note of a masked page.
const piiNote = "PII masked: your role has no PII access."

// piiEvent is a tracking.events record of the source web holding every planted value.
func piiEvent(messageID string) *kgo.Record {
	now := schemas.FormatTimestamp(time.Now())
	v := `{"type":"track","event":"Order Completed","messageId":"` + messageID + `","userId":"u-planted","anonymousId":"a-planted",` +
		`"timestamp":"` + now + `","receivedAt":"` + now + `","properties":{"email":"planted@example.com","total":12.5},` +
		`"context":{"ip":"203.0.113.77","traits":{"address":"1 Planted Street"}}}`
	return &kgo.Record{Topic: schemas.TopicEvents, Key: []byte("u-planted"), Value: []byte(v),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("web")}, {Key: schemas.HeaderMessageID, Value: []byte(messageID)}, {Key: schemas.HeaderType, Value: []byte("track")}}}
}

// plantPII produces the planted message m-planted everywhere the console shows messages: the
// source's events (and a rejected one quoting the email), two attempts to file-hooks (a 500
// whose answer quotes the email, as JSON and as text), a retry tier, and the DLQ (m-planted-dead).
func plantPII(t *testing.T, h *harness) {
	t.Helper()
	now := time.Now().UTC()
	at := func(d time.Duration) string { return schemas.FormatTimestamp(now.Add(d)) }
	attempt := func(url, body string) schemas.AttemptRecord {
		return schemas.AttemptRecord{MessageID: "m-planted", Attempt: 1, At: at(0), Type: "track", Event: "Order Completed", UserID: "u-planted",
			AnonymousID: "a-planted", ReceivedAt: at(-time.Second), URL: url, Status: 500, ErrorClass: schemas.ClassStatus5xx,
			Error: "status_5xx: HTTP 500 from a.example.com:443", ResponseHeaders: map[string]string{"X-Request-Id": "req-42"}, ResponseBody: body,
			NextAttemptAt: at(10 * time.Minute)}
	}
	h.env.Produce(piiEvent("m-planted"),
		&kgo.Record{Topic: schemas.TopicRejected, Key: []byte("u-planted"), Value: []byte(`{"type":"track","userId":"u-planted","properties":{"email":"planted@example.com"`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("web")}, {Key: schemas.HeaderReason, Value: []byte("malformed JSON")}}},
		attemptRecord(t, attempt("https://a.example.com/in", `{"error":"no account for planted@example.com"}`)),
		attemptRecord(t, attempt("https://b.example.com/in", "no account for planted@example.com at 1 Planted Street")),
		&kgo.Record{Topic: schemas.RetryTopic(time.Second), Key: []byte("file-hooks:u-planted"), Value: piiEvent("m-planted").Value,
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("file-hooks")}, {Key: schemas.HeaderMessageID, Value: []byte("m-planted")},
				{Key: schemas.HeaderType, Value: []byte("track")}, {Key: schemas.HeaderAttempt, Value: []byte("1")},
				{Key: schemas.HeaderFirstAttemptAt, Value: []byte(at(-time.Minute))}, {Key: schemas.HeaderDueAt, Value: []byte(at(10 * time.Minute))},
				{Key: schemas.HeaderLastError, Value: []byte("status_5xx: HTTP 500 from a.example.com")}, {Key: schemas.HeaderLastStatus, Value: []byte("500")}}},
		deadLetterRecord("m-planted-dead", "u-planted", `{"email":"planted@example.com"}`))
	servicetest.Eventually(t, 10*time.Second, "the planted message in every view", func() bool {
		for path, want := range map[string]int{"/v1/sources/web/events/recent": 2, "/v1/destinations/file-hooks/messages": 1,
			"/v1/destinations/file-hooks/attempts": 2, "/v1/destinations/file-hooks/pending": 1, "/v1/destinations/file-hooks/dlq": 1} {
			r := h.do(http.MethodGet, path, nil)
			if list, _ := r.JSON(t)["data"].([]any); r.Status != http.StatusOK || len(list) != want {
				return false
			}
		}
		return true
	})
}

// piiAnswers are the API's answers that carry message content: the operations console/openapi.yaml
// marks x-pii (TestPIIMaskedInEveryAnswer checks the list is theirs), each with a request of
// it ({replay}: the replay by u-planted; the live stream is read apart), what the answer shows
// either way (metadata), and whether it holds the planted values with PII access (the DLQ and
// the pending list carry ids, types and errors only).
var piiAnswers = []struct {
	op, method, path, shows string
	carries                 bool
}{
	{"GET /v1/sources/{id}/events/recent", "GET", "/v1/sources/web/events/recent", "m-planted", true},
	{"GET /v1/sources/{id}/events/live", "", "", "", true},
	{"GET /v1/destinations/{id}/messages", "GET", "/v1/destinations/file-hooks/messages", "Order Completed", true},
	{"GET /v1/messages/{messageId}", "GET", "/v1/messages/m-planted", "Order Completed", true},
	{"GET /v1/messages/{messageId}/attempts", "GET", "/v1/messages/m-planted/attempts", "Order Completed", true},
	{"GET /v1/destinations/{id}/attempts", "GET", "/v1/destinations/file-hooks/attempts", "Order Completed", true},
	{"GET /v1/destinations/{id}/dlq", "GET", "/v1/destinations/file-hooks/dlq?replayed=true", "m-planted-dead", false},
	{"GET /v1/destinations/{id}/pending", "GET", "/v1/destinations/file-hooks/pending", "m-planted", false},
	{"GET /v1/replays", "GET", "/v1/replays", "file-hooks", true},
	{"GET /v1/replays/{id}", "GET", "/v1/replays/{replay}", "file-hooks", true},
	{"DELETE /v1/replays/{id}", "DELETE", "/v1/replays/{replay}", "file-hooks", true},
	{"POST /v1/replays/{id}/cancel", "POST", "/v1/replays/{replay}/cancel", "file-hooks", true},
}

// TestPIIMaskedInEveryAnswer: every answer of the API that carries message content (the
// operations openapi.yaml marks x-pii) shows the planted values to a principal with PII access
// and none of them, in any byte, to one without; the metadata stays (message id, event name,
// type, status); a user's id is one hash across answers and requests; the live stream is masked
// too.
func TestPIIMaskedInEveryAnswer(t *testing.T) {
	var marked, listed []string
	for path, item := range oasLoad(t).Paths.Map() {
		for method, op := range item.Operations() {
			if op.Extensions["x-pii"] != nil {
				marked = append(marked, method+" "+path)
			}
		}
	}
	for _, a := range piiAnswers {
		listed = append(listed, a.op)
	}
	slices.Sort(marked)
	slices.Sort(listed)
	if !slices.Equal(marked, listed) {
		t.Fatalf("openapi.yaml marks x-pii %v; the test checks %v", marked, listed)
	}

	h := destHarness(t)
	plantPII(t, h)
	r := h.do(http.MethodPost, "/v1/replays", map[string]any{"destinationId": "file-hooks", "from": schemas.FormatTimestamp(time.Now().Add(-time.Hour)),
		"filter": map[string]string{"userId": "u-planted"}})
	expect(t, r, http.StatusCreated)
	replay := r.Data(t)["replayId"].(string)
	for _, pii := range []bool{true, false} {
		h.svc.PinPII(pii)
		for _, a := range piiAnswers {
			if a.path == "" {
				continue
			}
			path := strings.ReplaceAll(a.path, "{replay}", replay)
			r := h.do(a.method, path, nil)
			body := string(r.Body)
			if r.Status != http.StatusOK || !strings.Contains(body, a.shows) {
				t.Fatalf("PII %v: %s %s: %d %s", pii, a.method, path, r.Status, body)
			}
			for _, v := range piiPlanted {
				if found := strings.Contains(body, v); pii && a.carries && v == "u-planted" && !found {
					t.Errorf("with PII access, %s lacks %q: %s", a.path, v, body)
				} else if !pii && found {
					t.Errorf("without PII access, %s holds %q: %s", a.path, v, body)
				}
			}
		}
	}

	// Without PII access, a user's id is one hash: in the messages, the attempts and the events.
	first := func(path string) map[string]any {
		return h.do(http.MethodGet, path, nil).JSON(t)["data"].([]any)[0].(map[string]any)
	}
	user := first("/v1/messages/m-planted")["userId"].(string)
	if !strings.HasPrefix(user, "user:") || user != first("/v1/destinations/file-hooks/attempts")["userId"] ||
		user != first("/v1/destinations/file-hooks/messages")["userId"] {
		t.Fatalf("the masked user id %q differs across answers", user)
	}
	var ev struct {
		Message struct {
			UserID, Event, MessageID string
			Properties               map[string]any
		}
	}
	for _, e := range h.do(http.MethodGet, "/v1/sources/web/events/recent", nil).JSON(t)["data"].([]any) {
		if e.(map[string]any)["status"] == "accepted" {
			b, _ := json.Marshal(e)
			_ = json.Unmarshal(b, &ev)
		}
	}
	if ev.Message.UserID != user || ev.Message.Event != "Order Completed" || ev.Message.MessageID != "m-planted" || ev.Message.Properties["email"] != "[masked]" {
		t.Fatalf("the masked event: %+v (user %s)", ev.Message, user)
	}
	msg := first("/v1/messages/m-planted")
	if a := msg["attempts"].([]any)[0].(map[string]any); a["responseBody"] != `{"error":"[masked]"}` || a["status"] != 500.0 || a["class"] != "status_5xx" {
		t.Fatalf("a masked attempt: %v", a)
	}

	// The live stream, masked from its start.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL+"/v1/sources/web/events/live", nil)
	req.Header.Set("Authorization", servicetest.Bearer(testToken))
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), ": watching") {
	}
	h.env.Produce(piiEvent("m-planted-live"))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		for _, v := range piiPlanted {
			if strings.Contains(data, v) {
				t.Fatalf("without PII access, the live stream holds %q: %s", v, data)
			}
		}
		if !strings.Contains(data, "m-planted-live") || !strings.Contains(data, `"userId":"`+user+`"`) {
			t.Fatalf("the live event: %s", data)
		}
		break
	}
}

// TestPIIUserSearchRefused: without PII access, a messages search by user id or anonymous id
// is refused (403 forbidden), by the API and by the Messages tab (which does not show the id
// typed again), and so is a replay by user id (its count would answer the same), by the API
// and the Replay tab; by message id and event name the search works.
func TestPIIUserSearchRefused(t *testing.T) {
	h := destHarness(t)
	plantPII(t, h)
	b := h.signIn(t)
	h.svc.PinPII(false)
	expectError(t, h.do(http.MethodGet, "/v1/destinations/file-hooks/messages?userId=u-planted", nil), http.StatusForbidden, "forbidden",
		"searching by user id needs PII access (docs/console.md#pii-access)", "userId")
	expectError(t, h.do(http.MethodGet, "/v1/destinations/file-hooks/messages?anonymousId=a-planted", nil), http.StatusForbidden, "forbidden",
		"searching by anonymous id needs PII access (docs/console.md#pii-access)", "anonymousId")
	expectError(t, h.do(http.MethodPost, "/v1/replays", map[string]any{"destinationId": "file-hooks", "from": schemas.FormatTimestamp(time.Now().Add(-time.Hour)),
		"dryRun": true, "filter": map[string]string{"userId": "u-planted"}}), http.StatusForbidden, "forbidden",
		"replaying by user id needs PII access (docs/console.md#pii-access)", "filter.userId")
	b.get("/destinations/file-hooks?tab=replay")
	b.post("/destinations/file-hooks/replays", url.Values{"from": {"1h"}, "userId": {"u-planted"}, "action": {"count"}}).
		contains(t, http.StatusForbidden, "replaying by user id needs PII access")
	for _, q := range []string{"messageId=m-planted", "event=Order+Completed"} {
		r := h.do(http.MethodGet, "/v1/destinations/file-hooks/messages?"+q, nil)
		if list, _ := r.JSON(t)["data"].([]any); r.Status != http.StatusOK || len(list) != 1 {
			t.Fatalf("?%s: %d %s", q, r.Status, r.Body)
		}
	}
	p := b.get("/destinations/file-hooks?tab=messages&userId=u-planted")
	p.contains(t, http.StatusOK, "The search was not run: searching by user id needs PII access", piiNote)
	p.lacks(t, piiPlanted...)
	b.get("/destinations/file-hooks?tab=messages&messageId=m-planted").contains(t, http.StatusOK, `href="/destinations/file-hooks/messages/m-planted"`)

	h.svc.PinPII(true)
	if r := h.do(http.MethodGet, "/v1/destinations/file-hooks/messages?userId=u-planted", nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "m-planted") {
		t.Fatalf("with PII access, the search by user id: %d %s", r.Status, r.Body)
	}
}

// TestPIIMaskedInPages: every page that shows message content (the Messages tab and its
// delivery log, the message and attempt pages, the source's debugger, the Replay tab's replays
// by user) shows the planted values
// with PII access and none of them without, with a note saying so; the Pending and Dead letters
// tabs hold none either way.
func TestPIIMaskedInPages(t *testing.T) {
	h := destHarness(t)
	plantPII(t, h)
	b := h.signIn(t)
	expect(t, h.do(http.MethodPost, "/v1/replays", map[string]any{"destinationId": "file-hooks", "from": schemas.FormatTimestamp(time.Now().Add(-time.Hour)),
		"filter": map[string]string{"userId": "u-planted"}}), http.StatusCreated)
	seq := h.do(http.MethodGet, "/v1/destinations/file-hooks/attempts", nil).JSON(t)["data"].([]any)[0].(map[string]any)["id"].(string)
	pages := []struct {
		path   string
		shows  []string // with PII access
		masked string   // without
	}{
		{"/destinations/file-hooks?tab=messages", []string{"u-planted"}, "<code>user:"},
		{"/destinations/file-hooks?tab=messages&view=attempts", nil, "m-planted"},
		{"/destinations/file-hooks/messages/m-planted", []string{"u-planted", "a-planted", "planted@example.com", "203.0.113.77"}, "<code>user:"},
		{"/destinations/file-hooks/attempts/" + seq, []string{"planted@example.com", "203.0.113.77"}, "m-planted"},
		{"/sources/web", []string{"u-planted", "planted@example.com"}, "m-planted"},
		{"/destinations/file-hooks?tab=replay", []string{"user u-planted"}, "user user:"},
	}
	for _, pii := range []bool{true, false} {
		h.svc.PinPII(pii)
		for _, pg := range pages {
			p := b.get(pg.path)
			if pii {
				p.contains(t, http.StatusOK, pg.shows...)
				p.lacks(t, piiNote)
				continue
			}
			p.contains(t, http.StatusOK, piiNote, pg.masked)
			p.lacks(t, piiPlanted...)
		}
		for _, path := range []string{"/destinations/file-hooks?tab=pending", "/destinations/file-hooks?tab=dlq"} {
			b.get(path).lacks(t, piiPlanted...)
		}
	}
	b.get("/destinations/file-hooks/messages/m-planted").contains(t, http.StatusOK, "Order Completed", "[masked]", "<code>user:")
}

// TestPIIMaskedProfile: without PII access the profile page masks the profile's ids, traits,
// computed traits, merged and external ids (their keys and types stay) and the id looked up;
// its audiences stay.
func TestPIIMaskedProfile(t *testing.T) {
	h, _ := audiencesHarness(t)
	b := h.signIn(t)
	secrets := []string{"ada@example.com", ">pro<", "idfa-77", "anon-5f0a", "User u1", `value="u1"`}
	p := b.get("/audiences/profile?userId=u1")
	p.contains(t, http.StatusOK, "ada@example.com", "idfa-77", "User u1", "power-users")
	p.lacks(t, piiNote)
	h.svc.PinPII(false)
	p = b.get("/audiences/profile?userId=u1")
	p.contains(t, http.StatusOK, piiNote, "power-users", "<code>email</code>", "<code>ios.idfa</code>", "[masked]", "User user:")
	p.lacks(t, secrets...)
	b.get("/audiences/profile?userId=nobody").lacks(t, "nobody")
}
