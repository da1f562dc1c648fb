package console_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// planted are the deleted user's values the console must forget.
var planted = []string{"ada.deleted@example.com", "4111111111111111", "0612345678", "5500000000000004", "anon.deleted@example.com", "later.suppressed@example.com", "m-del-"}

// trackJSON is a tracking.events value of user (userId, or anonymousId when anonymous).
func trackJSON(msg, user string, anonymous bool, props string) []byte {
	id := `"userId":` + fmt.Sprintf("%q", user)
	if anonymous {
		id = `"anonymousId":` + fmt.Sprintf("%q", user)
	}
	now := schemas.FormatTimestamp(time.Now())
	return []byte(`{"type":"track","messageId":"` + msg + `",` + id + `,"event":"Order Completed","timestamp":"` + now + `","receivedAt":"` + now + `","properties":` + props + `}`)
}

// eventRecord is a tracking.events record of the source web, keyed as ingest keys it.
func eventRecord(msg, user string, anonymous bool, props string) *kgo.Record {
	return &kgo.Record{Topic: schemas.TopicEvents, Key: []byte(user), Value: trackJSON(msg, user, anonymous, props),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("web")}, {Key: schemas.HeaderMessageID, Value: []byte(msg)}, {Key: schemas.HeaderType, Value: []byte("track")}}}
}

// deadLetterRecord is a webhooks.dlq record of file-hooks.
func deadLetterRecord(msg, user, props string) *kgo.Record {
	return &kgo.Record{Topic: schemas.TopicDLQ, Key: []byte("file-hooks:" + user), Value: trackJSON(msg, user, false, props),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("file-hooks")}, {Key: schemas.HeaderMessageID, Value: []byte(msg)},
			{Key: schemas.HeaderReason, Value: []byte("status_4xx")}, {Key: schemas.HeaderFirstAttemptAt, Value: []byte(schemas.FormatTimestamp(time.Now()))}}}
}

// consoleViews is every answer of the API and every page of the UI that shows a user's
// messages: the recent events, the delivery log (and an attempt's page, with its body), the DLQ
// lists, the overview. (A message's attempts, GET /v1/messages/{id}/attempts, are checked by
// their status: a 404 names the message id asked for.)
func consoleViews(t *testing.T, h *harness, b *browser, attemptPages ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, path := range []string{"/v1/sources/web/events/recent", "/v1/destinations/file-hooks/attempts?limit=1000", "/v1/destinations/file-hooks/dlq?replayed=true"} {
		out[path] = string(h.do(http.MethodGet, path, nil).Body)
	}
	for _, path := range append([]string{"/", "/sources/web", "/destinations/file-hooks"}, attemptPages...) {
		out[path] = b.get(path).Body
	}
	return out
}

// nowhere fails if a view holds one of values.
func nowhere(t *testing.T, when string, views map[string]string, values ...string) {
	t.Helper()
	for path, body := range views {
		for _, v := range values {
			if strings.Contains(body, v) {
				t.Errorf("%s: %s still shows %q", when, path, v)
			}
		}
	}
}

// TestDeletedUserForgotten: after a SUPPRESS_WITH_DELETE regulation, no answer of the API and
// no page of the UI holds the user's messages (recent events, accepted and rejected; the live
// stream; the delivery log and the bodies of its attempt pages; the DLQ lists), the other users'
// entries stay, and a restarted console does not read them back. The suppressed user's later
// events never show, until an UNSUPPRESS; the purge is counted and the regulation reported
// forgotten.
func TestDeletedUserForgotten(t *testing.T) { synctest.Test(t, testDeletedUserForgotten) }

func testDeletedUserForgotten(t *testing.T) {
	h := newVirtualHarness(t, func(c *console.Config) { c.RecentEvents = 8 })
	b := h.signInFollowing(t)
	recentHas := func(h *harness, text string) bool {
		return strings.Contains(string(h.do(http.MethodGet, "/v1/sources/web/events/recent", nil).Body), text)
	}
	// One at a time, so that the ring's order is the order written: nine events in a ring of
	// eight, so that it has wrapped.
	secret := `{"email":"ada.deleted@example.com","card":"4111111111111111","phone":"0612345678"}`
	for _, r := range []*kgo.Record{
		eventRecord("m-keep-1", "u-keep", false, `{"email":"first.kept@example.com"}`),
		eventRecord("m-del-1", "u-del", false, secret),
		eventRecord("m-keep-2", "u-keep", false, `{"email":"kept.two@example.com"}`),
		eventRecord("m-del-2", "u-del", false, secret),
		eventRecord("m-keep-3", "u-keep", false, `{"email":"kept.three@example.com"}`),
		eventRecord("m-del-3", "u-del", false, secret),
		// Another user's, whose anonymousId is the deleted user's id: not the deleted user's.
		{Topic: schemas.TopicEvents, Key: []byte("u-other"), Value: []byte(`{"type":"track","messageId":"m-other","userId":"u-other","anonymousId":"u-del","event":"E","properties":{"note":"other-with-anon"}}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("web")}, {Key: schemas.HeaderMessageID, Value: []byte("m-other")}, {Key: schemas.HeaderType, Value: []byte("track")}}},
		eventRecord("m-keep-4", "u-keep", false, `{"email":"kept.four@example.com"}`),
		{Topic: schemas.TopicRejected, Key: []byte("u-del"), Value: []byte(`{"type":"track","userId":"u-del","properties":{"card":"5500000000000004"}}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderReason, Value: []byte("event: required")}, {Key: schemas.HeaderSourceID, Value: []byte("web")}}},
	} {
		h.env.Produce(r)
		msg := string(r.Value)
		servicetest.Eventually(t, 5*time.Second, "event in the recent events", func() bool { return recentHas(h, msg[len(msg)-30:]) })
	}
	// A message without a userId whose anonymousId is the id the regulation names: the user's.
	h.env.Produce(eventRecord("m-anon", "u-del", true, `{"email":"anon.deleted@example.com"}`))
	h.env.Produce(
		&kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("file-hooks"), Value: attemptJSON("file-hooks", "m-del-2", "http://127.0.0.1:9/file", 1, 200, 5, "ok", time.Now())},
		&kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("file-hooks"), Value: attemptJSON("file-hooks", "m-keep-2", "http://127.0.0.1:9/file", 1, 200, 5, "ok", time.Now())},
		deadLetterRecord("m-del-3", "u-del", secret),
		deadLetterRecord("m-keep-3", "u-keep", `{"email":"kept.three@example.com"}`),
	)
	var delSeq string
	servicetest.Eventually(t, 5*time.Second, "the attempts and dead letters", func() bool {
		page := h.do(http.MethodGet, "/v1/destinations/file-hooks/attempts", nil).JSON(t)
		for _, a := range page["data"].([]any) {
			if a := a.(map[string]any); a["messageId"] == "m-del-2" {
				delSeq = a["id"].(string)
			}
		}
		dlq := string(h.do(http.MethodGet, "/v1/destinations/file-hooks/dlq", nil).Body)
		return delSeq != "" && strings.Contains(dlq, "m-del-3") && strings.Contains(dlq, "m-keep-3") && recentHas(h, "anon.deleted@example.com")
	})
	attemptPage := "/destinations/file-hooks/attempts/" + delSeq
	messagePage := "/destinations/file-hooks/messages/m-del-2"
	before := consoleViews(t, h, b, attemptPage, messagePage)
	for _, path := range []string{"/v1/sources/web/events/recent", "/sources/web", attemptPage, messagePage} {
		if !strings.Contains(before[path], "ada.deleted@example.com") {
			t.Fatalf("before the deletion, %s does not show the planted email: the test shows nothing", path)
		}
	}
	if !strings.Contains(before["/v1/destinations/file-hooks/dlq?replayed=true"], "m-del-3") {
		t.Fatal("before the deletion, the DLQ list does not show m-del-3")
	}
	// The ids of the deleted user's recent events: a live stream tells they are forgotten.
	var forgottenIDs []string
	for _, e := range h.do(http.MethodGet, "/v1/sources/web/events/recent", nil).JSON(t)["data"].([]any) {
		if e := e.(map[string]any); strings.Contains(fmt.Sprint(e["message"]), "u-del") && e["messageId"] != "m-other" {
			forgottenIDs = append(forgottenIDs, e["id"].(string))
		}
	}
	if len(forgottenIDs) != 4 { // m-del-2, m-del-3, the rejected one, m-anon
		t.Fatalf("the deleted user's recent events: %v, want 4", forgottenIDs)
	}

	// A live stream open during the deletion.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL+"/v1/sources/web/events/live", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	live := bufio.NewReader(resp.Body)
	// liveUntil reads the stream until a line holds want, and returns what it read.
	liveUntil := func(want string) string {
		t.Helper()
		var read strings.Builder
		for {
			line, err := live.ReadString('\n')
			read.WriteString(line)
			if err != nil {
				t.Fatalf("reading the live stream for %q: %v", want, err)
			}
			if strings.Contains(line, want) {
				return read.String()
			}
		}
	}

	servicetest.NextMillisecond() // the regulation is later than every planted event
	r := h.do(http.MethodPost, "/v1/regulations", map[string]any{"regulationType": "SUPPRESS_WITH_DELETE", "subjectType": "USER_ID", "subjectIds": []string{"u-del"}})
	expect(t, r, http.StatusOK)
	id := r.Data(t)["regulateId"].(string)
	servicetest.Eventually(t, 5*time.Second, "the deleted user's events gone", func() bool { return !recentHas(h, "ada.deleted@example.com") })
	after := consoleViews(t, h, b, attemptPage, messagePage)
	nowhere(t, "after the deletion", after, planted...)
	expect(t, h.do(http.MethodGet, "/v1/messages/m-del-2/attempts", nil), http.StatusNotFound)
	expect(t, h.do(http.MethodGet, "/v1/messages/m-keep-2/attempts", nil), http.StatusOK)
	for _, kept := range []string{"kept.two@example.com", "kept.three@example.com", "kept.four@example.com", "other-with-anon", "m-keep-2"} {
		if !strings.Contains(after["/v1/sources/web/events/recent"]+after["/v1/destinations/file-hooks/attempts?limit=1000"], kept) {
			t.Errorf("after the deletion, another user's %q is gone", kept)
		}
	}
	if !strings.Contains(after["/v1/destinations/file-hooks/dlq?replayed=true"], "m-keep-3") {
		t.Errorf("after the deletion, another user's dead letter is gone: %s", after["/v1/destinations/file-hooks/dlq?replayed=true"])
	}
	// The kept events stay in their order, newest first.
	var order []string
	for _, e := range h.do(http.MethodGet, "/v1/sources/web/events/recent", nil).JSON(t)["data"].([]any) {
		order = append(order, fmt.Sprint(e.(map[string]any)["messageId"]))
	}
	if got := strings.Join(order, " "); got != "m-keep-4 m-other m-keep-3 m-keep-2" {
		t.Errorf("recent events after the purge: %s, want m-keep-4 m-other m-keep-3 m-keep-2", got)
	}

	// The router processes it: its status (the deletion's time T) and the suppression.
	processed := time.Now()
	h.env.Produce(
		&kgo.Record{Topic: schemas.TopicDeletionsStatus, Key: []byte(id), Value: schemas.DeletionStatus{RequestID: id, UserID: "u-del", Kind: schemas.KindSuppressWithDelete, ProcessedAt: schemas.FormatTimestamp(processed)}.Record()},
		&kgo.Record{Topic: schemas.TopicSuppressions, Key: []byte("u-del"), Value: schemas.Suppression{UserID: "u-del", RequestID: id, SuppressedAt: schemas.FormatTimestamp(processed)}.Record()},
	)
	servicetest.Eventually(t, 5*time.Second, "the regulation forgotten", func() bool { return h.svc.Forgotten(id) })
	if h.svc.Forgotten("no-such-regulation") {
		t.Error("a regulation the console does not know is forgotten")
	}
	// The suppressed user's later events never show; another user's do.
	servicetest.NextMillisecond()
	h.env.Produce(eventRecord("m-del-later", "u-del", false, `{"email":"later.suppressed@example.com"}`))
	h.env.Produce(eventRecord("m-keep-5", "u-keep", false, `{"email":"kept.five@example.com"}`))
	read := liveUntil("kept.five@example.com")
	if strings.Contains(read, "later.suppressed") || strings.Contains(read, "ada.deleted") {
		t.Errorf("the live stream showed the suppressed user's event:\n%s", read)
	}
	for _, id := range forgottenIDs { // the debugger's page removes them
		if !strings.Contains(read, "event: forgotten\nid: "+id+"\n") {
			t.Errorf("the live stream did not tell that event %s is forgotten:\n%s", id, read)
		}
	}
	nowhere(t, "after a suppressed user's later event", consoleViews(t, h, b, attemptPage), planted...)
	if v := counterValue(t, h, "tributary_console_forgotten_entries_total", "events"); v != 5 {
		t.Errorf("tributary_console_forgotten_entries_total{view=events} = %v, want 5 (3 in the ring, 1 rejected, 1 later)", v)
	}
	for _, view := range []string{"attempts", "dlq"} {
		if v := counterValue(t, h, "tributary_console_forgotten_entries_total", view); v != 1 {
			t.Errorf("tributary_console_forgotten_entries_total{view=%s} = %v, want 1", view, v)
		}
	}
	if v := counterValue(t, h, "tributary_console_forget_purges_total", ""); v < 1 {
		t.Errorf("tributary_console_forget_purges_total = %v, want at least 1", v)
	}
	resp.Body.Close()

	// A restarted console reads the topics back: the user's entries are not among them.
	h.stop()
	h2 := startConsole(t, h.env, func(c *console.Config) { c.RecentEvents = 8 })
	b2 := h2.signInFollowing(t)
	restarted := consoleViews(t, h2, b2, attemptPage)
	nowhere(t, "after a restart", restarted, planted...)
	expect(t, h2.do(http.MethodGet, "/v1/messages/m-del-2/attempts", nil), http.StatusNotFound)
	for _, kept := range []string{"kept.five@example.com", "other-with-anon", "m-keep-2"} {
		if !strings.Contains(restarted["/v1/sources/web/events/recent"]+restarted["/v1/destinations/file-hooks/attempts?limit=1000"], kept) {
			t.Errorf("after a restart, another user's %q is missing", kept)
		}
	}
	if !strings.Contains(restarted["/v1/destinations/file-hooks/dlq?replayed=true"], "m-keep-3") {
		t.Errorf("after a restart, another user's dead letter is missing")
	}
	if !h2.svc.Forgotten(id) {
		t.Error("after a restart, the regulation is not reported forgotten")
	}

	// UNSUPPRESS: the user's events show again from then on (those of the suppression do not).
	r = h2.do(http.MethodPost, "/v1/regulations", map[string]any{"regulationType": "UNSUPPRESS", "subjectType": "USER_ID", "subjectIds": []string{"u-del"}})
	expect(t, r, http.StatusOK)
	unsuppress := r.Data(t)["regulateId"].(string)
	h2.env.Produce( // the router's status and tombstone
		&kgo.Record{Topic: schemas.TopicDeletionsStatus, Key: []byte(unsuppress), Value: schemas.DeletionStatus{RequestID: unsuppress, UserID: "u-del", Kind: schemas.KindUnsuppress, ProcessedAt: schemas.FormatTimestamp(time.Now())}.Record()},
		&kgo.Record{Topic: schemas.TopicSuppressions, Key: []byte("u-del")},
	)
	servicetest.Eventually(t, 5*time.Second, "the unsuppression read", func() bool { return h2.svc.Forgotten(unsuppress) })
	servicetest.NextMillisecond()
	h2.env.Produce(eventRecord("m-back", "u-del", false, `{"email":"back.again@example.com"}`))
	servicetest.Eventually(t, 5*time.Second, "the unsuppressed user's event", func() bool { return recentHas(h2, "back.again@example.com") })
	nowhere(t, "after UNSUPPRESS", consoleViews(t, h2, b2, attemptPage), planted...)
}

// counterValue is the value of a counter of the console, with label view (or none).
func counterValue(t *testing.T, h *harness, name, view string) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if view == "" || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == view) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestDeleteOnlyForgetsThePast: a DELETE_ONLY regulation forgets the user's entries received
// before it, and suppresses nothing: the user's later events show.
func TestDeleteOnlyForgetsThePast(t *testing.T) { synctest.Test(t, testDeleteOnlyForgetsThePast) }

func testDeleteOnlyForgetsThePast(t *testing.T) {
	h := newVirtualHarness(t, nil)
	recentHas := func(text string) bool {
		return strings.Contains(string(h.do(http.MethodGet, "/v1/sources/web/events/recent", nil).Body), text)
	}
	h.env.Produce(eventRecord("m-old", "u-x", false, `{"email":"old.deleted@example.com"}`), eventRecord("m-y", "u-y", false, `{"email":"y.kept@example.com"}`))
	servicetest.Eventually(t, 5*time.Second, "the events", func() bool { return recentHas("old.deleted@example.com") && recentHas("y.kept@example.com") })
	servicetest.NextMillisecond()
	expect(t, h.do(http.MethodPost, "/v1/regulations", map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": []string{"u-x"}}), http.StatusOK)
	servicetest.Eventually(t, 5*time.Second, "the user's past events gone", func() bool { return !recentHas("old.deleted@example.com") })
	servicetest.NextMillisecond()
	h.env.Produce(eventRecord("m-new", "u-x", false, `{"email":"new.shown@example.com"}`))
	servicetest.Eventually(t, 5*time.Second, "the user's later event", func() bool { return recentHas("new.shown@example.com") })
	if !recentHas("y.kept@example.com") || recentHas("old.deleted@example.com") {
		t.Errorf("recent events: %s", h.do(http.MethodGet, "/v1/sources/web/events/recent", nil).Body)
	}
}

// TestViewsReadTheRegulationsFirst: a starting console reads nothing into its views before it
// has read what they must forget: while one of the topics of the rules (here the suppression
// list, not created yet) is not read to its end, the recent events stay empty; then the other
// user's event shows, and the deleted user's never does, not even for a moment.
func TestViewsReadTheRegulationsFirst(t *testing.T) {
	synctest.Test(t, testViewsReadTheRegulationsFirst)
}

func testViewsReadTheRegulationsFirst(t *testing.T) {
	h := newVirtualHarness(t, nil)
	recent := func(srv *httptest.Server) string {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/sources/web/events/recent", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	h.env.Produce(eventRecord("m-del", "u-del", false, `{"email":"ada.deleted@example.com"}`), eventRecord("m-keep", "u-keep", false, `{"email":"kept@example.com"}`))
	servicetest.Eventually(t, 5*time.Second, "the events", func() bool {
		b := recent(h.srv)
		return strings.Contains(b, "ada.deleted") && strings.Contains(b, "kept@")
	})
	servicetest.NextMillisecond()
	expect(t, h.do(http.MethodPost, "/v1/regulations", map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": []string{"u-del"}}), http.StatusOK)
	servicetest.Eventually(t, 5*time.Second, "the deleted user's event gone", func() bool { return !strings.Contains(recent(h.srv), "ada.deleted") })
	h.stop()

	const later = "tracking.suppressions.later"
	cfg := console.DefaultConfig()
	cfg.Addr, cfg.Token, cfg.ShutdownTimeout, cfg.SuppressionsTopic = "127.0.0.1:0", testToken, 2*time.Second, later
	svc, err := console.New(cfg, console.Deps{
		Deps: platform.Deps{
			Kafka:     h.env.Kafka,
			KafkaOpts: h.env.KafkaOpts,
			Logger:    zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
			Health:    platform.NewHealth(),
		}, Store: h.env.Store,
	})
	if err != nil {
		t.Fatal(err)
	}
	listen(t, h.env, svc)
	h.env.Start("console", svc.Run)
	srv := serve(t, h.env, svc.Handler())
	servicetest.Consistently(t, time.Second, "the recent events empty before the rules are read", func() string {
		if b := recent(srv); !strings.Contains(b, `"data":[]`) {
			return "the recent events were read before the rules: " + b
		}
		return ""
	})
	if _, err := kadm.NewClient(h.env.Client).CreateTopic(context.Background(), 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, later); err != nil {
		t.Fatal(err)
	}
	servicetest.Eventually(t, 15*time.Second, "the other user's event", func() bool {
		b := recent(srv)
		if strings.Contains(b, "ada.deleted") {
			t.Fatalf("the deleted user's event was read back: %s", b)
		}
		return strings.Contains(b, "kept@example.com")
	})
}
