package deliverer_test

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestAttemptRecordsTellTheMessageAndTheAnswer: the attempt records of a delivery say what the
// message is (type from its header, event and user from its body, receivedAt), what the
// endpoint answered (headers, body), and what became of the delivery: due again on a retry
// tier (nextAttemptAt), dead-lettered (deadLettered), delivered (neither).
func TestAttemptRecordsTellTheMessageAndTheAnswer(t *testing.T) {
	rc := newReceiver(t, func(n int, r *http.Request, w http.ResponseWriter) {
		if strings.HasSuffix(r.URL.Path, "/gone") {
			w.WriteHeader(http.StatusGone)
			_, _ = w.Write([]byte(`{"error":"no such hook"}`))
			return
		}
		if n == 1 {
			w.Header().Set("X-Request-Id", "req-1")
			w.WriteHeader(500)
			_, _ = w.Write([]byte("database down"))
			return
		}
		w.WriteHeader(200)
	})
	h := newHarness(t, "1s", destYAML(dest("flaky", []string{rc.URL + "/in"}, ""), dest("gone", []string{rc.URL + "/gone"}, "")))
	attempts := h.reader(schemas.TopicAttempts)
	h.run(h.config())
	h.send("flaky", "m1")
	attempts.waitFor(2, 15*time.Second) // the 500, then the 200 from the tier: m1 has the first request
	h.send("gone", "m2")
	recs := attempts.waitFor(3, 15*time.Second)
	byOutcome := map[string]schemas.AttemptRecord{}
	for _, r := range recs {
		a, err := schemas.DecodeAttemptRecord(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if a.Type != "track" || a.Event != "Order Completed" || a.UserID != "u-"+a.MessageID || a.ReceivedAt == "" {
			t.Errorf("record %s: does not say what the message is", r.Value)
		}
		byOutcome[a.MessageID+" "+strconv.Itoa(a.Attempt)] = a
	}
	first, second, dead := byOutcome["m1 1"], byOutcome["m1 2"], byOutcome["m2 1"]
	if first.ResponseBody != "database down" || first.ResponseHeaders["X-Request-Id"] != "req-1" || first.NextAttemptAt == "" || first.DeadLettered != "" {
		t.Errorf("the 500: %+v", first)
	}
	if second.Status != 200 || second.NextAttemptAt != "" || second.DeadLettered != "" {
		t.Errorf("the 200: %+v", second)
	}
	if dead.DeadLettered != "status_4xx" || dead.NextAttemptAt != "" || !strings.Contains(dead.ResponseBody, "no such hook") {
		t.Errorf("the 410: %+v", dead)
	}
	if at, err := schemas.ParseTimestamp(first.NextAttemptAt); err != nil || at.Before(time.Now().Add(-time.Minute)) {
		t.Errorf("nextAttemptAt %q", first.NextAttemptAt)
	}
	if !bytes.Contains(recs[0].Value, []byte(`"type":"track"`)) {
		t.Errorf("record %s", recs[0].Value)
	}
}

// TestAttemptRecordsTwoURLsOneRefusing: a destination with two URLs, the first answering 200
// and the second refusing connections: each message's two records (one per URL) say the same
// message and no retry (a message is done once one URL answered 2xx), the refusal with its
// class and no answer.
func TestAttemptRecordsTwoURLsOneRefusing(t *testing.T) {
	good := newReceiver(t, ok200)
	h := newHarness(t, "1s", destYAML(dest("flaky", []string{good.URL + "/in", "http://127.0.0.1:1/refused"}, "")))
	attempts := h.reader(schemas.TopicAttempts)
	h.run(h.config())
	h.send("flaky", "m1", "m2")
	recs := attempts.waitFor(4, 15*time.Second)
	classes := map[string][]schemas.ErrorClass{}
	for _, r := range recs {
		a, err := schemas.DecodeAttemptRecord(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if a.UserID != "u-"+a.MessageID || a.Event != "Order Completed" || a.NextAttemptAt != "" || a.DeadLettered != "" {
			t.Errorf("record %s", r.Value)
		}
		if a.ErrorClass == schemas.ClassConnection && (a.ResponseBody != "" || a.ResponseHeaders != nil) {
			t.Errorf("a refused connection with an answer: %s", r.Value)
		}
		classes[a.MessageID] = append(classes[a.MessageID], a.ErrorClass)
	}
	for _, id := range []string{"m1", "m2"} {
		if c := classes[id]; len(c) != 2 || !slices.Contains(c, schemas.ClassOK) || !slices.Contains(c, schemas.ClassConnection) {
			t.Errorf("%s: classes %v, want ok and connection", id, c)
		}
	}
}
