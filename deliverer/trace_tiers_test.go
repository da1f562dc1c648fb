package deliverer_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestTraceparentThroughTiersAndDLQ: a delivery's traceparent and tracestate stay on its retry
// tier record and its dead letter, and every attempt's POST carries them
// (docs/topics.md#trace-context), span export off.
func TestTraceparentThroughTiersAndDLQ(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	recv := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
	h := newHarness(t, "1s", destYAML(dest("a", []string{recv.URL}, "")))
	tier, dlq := h.reader(schemas.RetryTopic(time.Second)), h.reader(schemas.TopicDLQ)
	h.run(h.config())
	recs := deliveryRecords("a", "traced")
	recs[0].Headers = append(recs[0].Headers, kgo.RecordHeader{Key: schemas.HeaderTraceparent, Value: []byte(parent)},
		kgo.RecordHeader{Key: schemas.HeaderTracestate, Value: []byte("vendor=abc")})
	h.env.Produce(recs...)
	for i, r := range recv.waitRequests(t, 2, 15*time.Second) {
		if r.header.Get("Traceparent") != parent || r.header.Get("Tracestate") != "vendor=abc" {
			t.Errorf("POST %d: traceparent %q tracestate %q", i+1, r.header.Get("Traceparent"), r.header.Get("Tracestate"))
		}
	}
	for name, r := range map[string]*kgo.Record{"tier": tier.waitFor(1, 10*time.Second)[0], "dead letter": dlq.waitFor(1, 10*time.Second)[0]} {
		if hdr(r, schemas.HeaderTraceparent) != parent || hdr(r, schemas.HeaderTracestate) != "vendor=abc" {
			t.Errorf("%s record: headers %v", name, r.Headers)
		}
	}
}
