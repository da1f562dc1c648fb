package ingest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
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

// TestMessageIDThatCannotBeAHeaderRefused: a messageId becomes the X-Message-Id header of every
// webhook, so one with a control character (which no HTTP request may carry) or a leading or
// trailing space (which HTTP drops) is refused where it enters, alike over HTTP and from
// tracking.inbound (docs/ingest.md#request-format): a single call gets 400, a batch a rejected
// entry for that message only, the front door a tracking.rejected record with its reason. Before,
// ingest accepted them, and the deliverer retried each for hours, every failure counting toward
// its host's circuit breaker.
func TestMessageIDThatCannotBeAHeaderRefused(t *testing.T) {
	h := newHarness(t)
	const ctrl = "messageId: must not contain control characters"
	for _, id := range []string{`p1\u0007`, `x\r\nX-Injected: 1`, `a\u0000`, `dd-1 `} {
		status, body := h.post("/v1/track", []byte(`{"userId":"u","event":"E","messageId":"`+id+`"}`), basic(testKey))
		if status != http.StatusBadRequest || !strings.Contains(body, `"code":"invalid_message"`) || !strings.Contains(body, "messageId: must not") {
			t.Errorf("single call with messageId %q: %d %s", id, status, body)
		}
	}
	status, body := h.post("/v1/batch", []byte(`{"batch":[`+
		`{"type":"track","userId":"u","event":"E","messageId":"ok-1"},`+
		`{"type":"track","userId":"u","event":"E","messageId":"p1\u0007"},`+
		`{"type":"track","userId":"u","event":"E","messageId":"ok-2"}]}`), basic(testKey))
	var resp response
	if err := json.Unmarshal([]byte(body), &resp); err != nil || status != http.StatusOK {
		t.Fatalf("batch: %d %s", status, body)
	}
	if len(resp.Rejected) != 1 || resp.Rejected[0].Index != 1 || resp.Rejected[0].Code != "invalid_message" || !strings.HasPrefix(resp.Rejected[0].Reason, ctrl) {
		t.Fatalf("batch rejected %+v, want message 1 only, for its messageId", resp.Rejected)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wk := []kgo.RecordHeader{{Key: schemas.HeaderWriteKey, Value: []byte(testKey)}}
	if err := cl.ProduceSync(ctx,
		&kgo.Record{Topic: schemas.TopicInbound, Key: []byte("k-poison"), Value: []byte(`{"type":"track","userId":"k-poison","event":"E","messageId":"x\r\nX-Injected: 1"}`), Headers: wk},
		&kgo.Record{Topic: schemas.TopicInbound, Key: []byte("k-good"), Value: []byte(`{"type":"track","userId":"k-good","event":"E","messageId":"ok-3"}`), Headers: wk},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.svc.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	ids := map[string]bool{}
	for _, r := range consume(t, h.brokers, schemas.TopicEvents, 3) {
		ids[header(r, schemas.HeaderMessageID)] = true
	}
	if len(ids) != 3 || !ids["ok-1"] || !ids["ok-2"] || !ids["ok-3"] {
		t.Errorf("tracking.events holds %v, want ok-1, ok-2 and ok-3 only", ids)
	}
	reasons := map[string]string{}
	for _, r := range consume(t, h.brokers, schemas.TopicRejected, 2) {
		reasons[string(r.Key)] = header(r, schemas.HeaderReason)
	}
	if !strings.HasPrefix(reasons["k-poison"], ctrl+" (found U+000D at byte 1)") {
		t.Errorf("front door: tracking.rejected reason %q", reasons["k-poison"])
	}
	if !strings.HasPrefix(reasons["u"], ctrl+" (found U+0007 at byte 2)") {
		t.Errorf("batch: tracking.rejected reason %q", reasons["u"])
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
