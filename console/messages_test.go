package console_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// attemptRecord is a webhooks.attempts record of file-hooks as the deliverer writes it.
func attemptRecord(t testing.TB, a schemas.AttemptRecord) *kgo.Record {
	t.Helper()
	a.DestinationID = "file-hooks"
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte(a.DestinationID), Value: b}
}

// sameTime reports whether two RFC 3339 times are the same instant.
func sameTime(a, b string) bool {
	ta, errA := time.Parse(time.RFC3339Nano, a)
	tb, errB := time.Parse(time.RFC3339Nano, b)
	return errA == nil && errB == nil && ta.Equal(tb)
}

// TestMessagesAPI: the messages of a destination, from webhooks.attempts: with two URLs, the
// first answering 200 and the second refusing connections, the message is delivered with both
// URLs' attempts under it; a 500's answer (body and headers) is shown in its attempt, and the
// message moves from retrying (with its next attempt time) to delivered; messages are found by
// user and by event; sealed records are read opened, plain ones naming their user's key are
// read as they are, and a deleted user's of either kind (its key shredded) are not shown.
func TestMessagesAPI(t *testing.T) { synctest.Test(t, testMessagesAPI) }

func testMessagesAPI(t *testing.T) {
	h := newVirtualHarness(t, nil)
	keys := h.env.Keyring()
	now := time.Now().UTC()
	at := func(d time.Duration) string { return schemas.FormatTimestamp(now.Add(d)) }
	msg := func(id, user, event string, d time.Duration) schemas.AttemptRecord {
		return schemas.AttemptRecord{MessageID: id, Attempt: 1, At: at(d), Type: "track", Event: event, UserID: user, ReceivedAt: at(d - time.Second)}
	}
	two1 := msg("m-two", "user-5", "Order Completed", 0)
	two1.URL, two1.Status, two1.ErrorClass, two1.LatencyMs = "https://a.example.com/in", 200, schemas.ClassOK, 2
	two2 := msg("m-two", "user-5", "Order Completed", 0)
	two2.URL, two2.ErrorClass, two2.Error = "https://b.example.com/in", schemas.ClassConnection, "connection: connection refused"
	failed := msg("m-500", "user-5", "Cart Viewed", time.Second)
	failed.URL, failed.Status, failed.ErrorClass, failed.Error = "https://a.example.com/in", 500, schemas.ClassStatus5xx, "status_5xx: HTTP 500 from a.example.com:443"
	failed.ResponseHeaders, failed.ResponseBody = map[string]string{"X-Request-Id": "req-42"}, "database down"
	failed.NextAttemptAt = at(11 * time.Second)
	h.env.Produce(attemptRecord(t, two1), attemptRecord(t, two2), attemptRecord(t, failed))

	get := func(path string) []map[string]any {
		t.Helper()
		var out []map[string]any
		for _, m := range h.do("GET", path, nil).JSON(t)["data"].([]any) {
			out = append(out, m.(map[string]any))
		}
		return out
	}
	servicetest.Eventually(t, 10*time.Second, "the messages", func() bool { return len(get("/v1/destinations/file-hooks/messages")) == 2 })
	two := get("/v1/destinations/file-hooks/messages?messageId=m-two")
	if len(two) != 1 || two[0]["status"] != "delivered" || len(two[0]["attempts"].([]any)) != 2 {
		t.Fatalf("the two-URL message: %v", two)
	}
	m := get("/v1/messages/m-500")
	if next, _ := m[0]["nextAttemptAt"].(string); len(m) != 1 || m[0]["status"] != "retrying" || !sameTime(next, at(11*time.Second)) {
		t.Fatalf("the failed message: %v", m)
	}
	a := m[0]["attempts"].([]any)[0].(map[string]any)
	if a["responseBody"] != "database down" || a["responseHeaders"].(map[string]any)["X-Request-Id"] != "req-42" || a["status"] != 500.0 {
		t.Fatalf("the 500's attempt: %v", a)
	}

	// The retry is delivered.
	retried := msg("m-500", "user-5", "Cart Viewed", 11*time.Second)
	retried.Attempt, retried.URL, retried.Status, retried.ErrorClass = 2, "https://a.example.com/in", 200, schemas.ClassOK
	// Sealed records: bob's opens; jane's key is shredded.
	bob, jane := msg("m-bob", "bob", "Signed Up", 2*time.Second), msg("m-jane", "jane", "Signed Up", 2*time.Second)
	bob.URL, bob.Status, bob.ErrorClass = "https://a.example.com/in", 200, schemas.ClassOK
	jane.URL, jane.Status, jane.ErrorClass = "https://a.example.com/in", 200, schemas.ClassOK
	bobRec, janeRec := attemptRecord(t, bob), attemptRecord(t, jane)
	for user, rec := range map[string]*kgo.Record{"bob": bobRec, "jane": janeRec} { // sealed with the user's key
		if err := keys.SealRecords(h.env.Ctx, []*kgo.Record{rec}, func(*kgo.Record) []byte { return []byte(user) }); err != nil {
			t.Fatal(err)
		}
	}
	// Plain records naming their user's key (an attempt of a sealed delivery without an
	// answer): carol's key lives, dan's is shredded.
	carol, dan := msg("m-carol", "carol", "Signed Up", 3*time.Second), msg("m-dan", "dan", "Signed Up", 3*time.Second)
	carol.URL, carol.Status, carol.ErrorClass = "https://a.example.com/in", 200, schemas.ClassOK
	dan.URL, dan.Status, dan.ErrorClass = "https://a.example.com/in", 200, schemas.ClassOK
	carolRec, danRec := attemptRecord(t, carol), attemptRecord(t, dan)
	for user, rec := range map[string]*kgo.Record{"carol": carolRec, "dan": danRec} {
		probe := &kgo.Record{Value: []byte("{}")}
		if err := keys.SealRecords(h.env.Ctx, []*kgo.Record{probe}, func(*kgo.Record) []byte { return []byte(user) }); err != nil {
			t.Fatal(err)
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: schemas.HeaderUserKey, Value: shred.KeyOf(probe)})
	}
	for _, user := range []string{"jane", "dan"} {
		if n, err := keys.Shred(h.env.Ctx, user); err != nil || n != 1 {
			t.Fatalf("Shred(%s) = %d, %v", user, n, err)
		}
	}
	// The console's keyring reads the shred before the attempts' reader gets jane's record (a
	// deletion's regulation makes the console forget what it opened before: TestForget*).
	synctest.Wait()
	h.env.Produce(attemptRecord(t, retried), bobRec, janeRec, danRec, carolRec)
	servicetest.Eventually(t, 10*time.Second, "the retry and the sealed records", func() string {
		got := get("/v1/destinations/file-hooks/messages?event=Signed+Up")
		if len(got) != 2 || got[0]["messageId"] != "m-carol" || got[1]["messageId"] != "m-bob" || get("/v1/messages/m-500")[0]["status"] != "delivered" {
			return fmt.Sprint(got)
		}
		return ""
	})
	if m := get("/v1/messages/m-500")[0]; m["nextAttemptAt"] != nil || len(m["attempts"].([]any)) != 2 {
		t.Fatalf("delivered after a retry: %v", m)
	}
	var ids []string
	for _, m := range get("/v1/destinations/file-hooks/messages?userId=user-5") {
		ids = append(ids, m["messageId"].(string))
	}
	if strings.Join(ids, " ") != "m-500 m-two" {
		t.Fatalf("user-5's messages: %v, want m-500 m-two (newest first)", ids)
	}
	for _, id := range []string{"m-jane", "m-dan"} {
		if r := h.do("GET", "/v1/messages/"+id, nil); r.Status != 404 {
			t.Fatalf("a deleted user's message %s: %d %s", id, r.Status, r.Body)
		}
	}
	r := h.do("GET", "/v1/destinations/file-hooks/messages?status=lost", nil)
	expectError(t, r, 400, "invalid", "status: must be one of delivered, retrying, dead_lettered, filtered, got \"lost\"", "status")
}
