package deliverer_test

import (
	"bytes"
	"net/http"
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
