package deliverer_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/schemas"
)

// Dead letters are re-enqueued, filtered by destination, with a fresh window, and delivered.
func TestReplayDeadLetters(t *testing.T) {
	var fixed atomic.Bool
	respond := func(_ int, _ *http.Request, w http.ResponseWriter) {
		if !fixed.Load() {
			w.WriteHeader(http.StatusGone)
		}
	}
	a, b := newReceiver(t, respond), newReceiver(t, respond)
	h := newHarness(t, "1s,2s", destYAML(dest("a", []string{a.URL}, ""), dest("b", []string{b.URL}, "")))
	dlq := h.reader(schemas.TopicDLQ)
	deliveries := h.reader(schemas.TopicDeliveries)
	h.run(h.config())
	h.send("a", "a1", "a2", "a3")
	h.send("b", "b1")
	dlq.waitFor(4, 10*time.Second)
	deliveries.waitFor(4, 10*time.Second)
	before := time.Now()

	fixed.Store(true)
	n, err := deliverer.Replay(h.ctx, h.kafka, h.logger, schemas.TopicDLQ, schemas.TopicDeliveries,
		deliverer.ReplayFilter{DestinationID: "a", Since: before.Add(-time.Minute)})
	if err != nil || n != 3 {
		t.Fatalf("replayed %d (%v), want 3", n, err)
	}
	a.waitRequests(t, 6, 10*time.Second) // 3 refused, then 3 replayed
	time.Sleep(time.Second)
	if len(b.requests()) != 1 {
		t.Fatalf("destination b was replayed too: %d requests", len(b.requests()))
	}
	if len(a.requests()) != 6 {
		t.Fatalf("destination a got %d requests, want 6", len(a.requests()))
	}
	for _, r := range deliveries.waitFor(7, 5*time.Second)[4:] {
		fa, _ := schemas.ParseTimestamp(hdr(r, "first-attempt-at"))
		if hdr(r, "attempt") != "1" || fa.Before(before.Add(-time.Second)) || hdr(r, "reason") != "" || hdr(r, "destination-id") != "a" {
			t.Errorf("replayed record headers %v", r.Headers)
		}
	}
	if n, err := deliverer.Replay(h.ctx, h.kafka, h.logger, schemas.TopicDLQ, schemas.TopicDeliveries,
		deliverer.ReplayFilter{Until: before.Add(-time.Hour)}); err != nil || n != 0 {
		t.Fatalf("a time filter before every dead letter replayed %d (%v)", n, err)
	}
}
