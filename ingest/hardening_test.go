package ingest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tributary-cdp/tributary/platform"
)

// INGEST_MAX_IN_FLIGHT: a request beyond the bound is shed with 503 and Retry-After at once;
// the in-flight gauge, the produce latency and the rejections by reason are measured.
func TestBoundedConcurrencyAndMetrics(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxInFlight = 1 })
	h.svc.inFlight <- struct{}{} // another request holds the only slot
	status, body := h.post("/v1/track", []byte(`{"userId":"u","event":"E"}`), basic(testKey))
	if status != 503 || !strings.Contains(body, `"code":"overloaded"`) {
		t.Fatalf("over the bound: %d %s", status, body)
	}
	<-h.svc.inFlight
	if status, body := h.post("/v1/track", []byte(`{"userId":"u","event":"E"}`), basic(testKey)); status != 200 {
		t.Fatalf("within the bound: %d %s", status, body)
	}
	if got := testutil.ToFloat64(h.svc.metrics.inFlight); got != 0 {
		t.Fatalf("in-flight gauge %v after the requests ended", got)
	}
	if n := testutil.CollectAndCount(h.svc.metrics.produceSeconds); n != 1 {
		t.Fatalf("produce histogram has %d series", n)
	}
	h.post("/v1/batch", []byte(`{"batch":[{"type":"track","userId":"u"},{"type":"track","event":"E"},{"type":"identify","userId":"u"}]}`), basic(testKey))
	h.post("/v1/track", []byte(`{"event":"E"}`), basic(testKey))
	if got := testutil.ToFloat64(h.svc.metrics.rejected.WithLabelValues("invalid_message")); got != 3 {
		t.Fatalf("rejected{invalid_message} = %v, want 3", got)
	}
	if err := (&Config{Addr: "x", ProduceTimeout: 1, EventsTopic: "a", RejectedTopic: "b", InboundTopic: "c", InboundGroup: "g", MaxInFlight: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "INGEST_MAX_IN_FLIGHT") {
		t.Fatalf("negative bound: %v", err)
	}
}

// A rejected message goes to tracking.rejected as sent, but without a body writeKey: no write
// key rests in Kafka.
func TestRejectedRecordKeepsNoWriteKey(t *testing.T) {
	h := newHarness(t)
	status, body := h.post("/v1/batch", []byte(`{"batch":[{"type":"track","userId":"u","writeKey":"`+testKey+`","_metadata":{"x":1}}],"writeKey":"`+testKey+`"}`), nil)
	if status != 200 || !strings.Contains(body, `"rejected"`) {
		t.Fatalf("%d %s", status, body)
	}
	r := consume(t, h.brokers, "tracking.rejected", 1)[0]
	if strings.Contains(string(r.Value), testKey) || !strings.Contains(string(r.Value), `"_metadata":{"x":1}`) {
		t.Fatalf("rejected value %s", r.Value)
	}
}

// TestOversizedHeaders: headers over platform.DefaultMaxHeaderBytes are answered 431 by
// ingest's own server (docs/ingest.md#limits), a 3 MB header value included, never a 500.
func TestOversizedHeaders(t *testing.T) {
	h := newHarness(t)
	if err := h.svc.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.svc.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	for _, size := range []int{platform.DefaultMaxHeaderBytes + 8<<10, 3 << 20} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+h.svc.Addr()+"/v1/track", strings.NewReader(`{"type":"track","event":"E","userId":"u"}`))
		req.SetBasicAuth(testKey, "")
		req.Header.Set("X-Big", strings.Repeat("h", size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("a %d-byte header: %v", size, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("a %d-byte header: %d, want 431", size, resp.StatusCode)
		}
	}
}
