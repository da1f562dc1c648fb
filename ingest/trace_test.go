package ingest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

const (
	tracedID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	tracedParent = "00-" + tracedID + "-00f067aa0ba902b7-01"
)

// TestRequestTraceOnRecords: every message of a request carries the request's traceparent and
// tracestate on its tracking.events record (docs/topics.md#trace-context); a malformed
// traceparent is ignored and the request succeeds; a request without one adds no header.
func TestRequestTraceOnRecords(t *testing.T) {
	h := newHarness(t)
	hdr := basic(testKey)
	hdr["Traceparent"], hdr["Tracestate"] = tracedParent, "vendor=abc"
	if st, body := h.post("/v1/batch", []byte(`{"batch":[{"type":"track","userId":"u1","event":"A"},{"type":"track","userId":"u2","event":"B"}]}`), hdr); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	hdr["Traceparent"] = "00-" + tracedID + "-00f067aa0ba902b7" // no flags
	if st, body := h.post("/v1/track", []byte(`{"userId":"u3","event":"C"}`), hdr); st != 200 {
		t.Fatalf("a malformed traceparent: %d %s", st, body)
	}
	if st, body := h.post("/v1/track", []byte(`{"userId":"u4","event":"D"}`), basic(testKey)); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	want := map[string][2]string{"u1": {tracedParent, "vendor=abc"}, "u2": {tracedParent, "vendor=abc"}, "u3": {}, "u4": {}}
	for _, r := range consume(t, h.brokers, schemas.TopicEvents, 4) {
		if got := [2]string{header(r, schemas.HeaderTraceparent), header(r, schemas.HeaderTracestate)}; got != want[string(r.Key)] {
			t.Errorf("%s: traceparent, tracestate %q, want %q", r.Key, got, want[string(r.Key)])
		}
		if len(r.Headers) != 3 && header(r, schemas.HeaderTraceparent) == "" {
			t.Errorf("%s: headers %v", r.Key, r.Headers)
		}
	}
}

// TestIngestSpans: with span export on, a request is a span continuing its traceparent (source
// id, event count, status), and its records carry that span's context; a record of the Kafka
// front door with a traceparent continues it likewise (docs/operations.md#tracing).
func TestIngestSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	s := platform.DefaultTracingSettings()
	s.Exporter = exp
	tr, err := platform.NewTracer(s, "tributary-ingest")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()
	h := newHarnessWith(t, Deps{Deps: platform.Deps{Tracer: tr}})
	hdr := basic(testKey)
	hdr["Traceparent"] = tracedParent
	if st, body := h.post("/v1/batch", []byte(`{"batch":[{"type":"track","userId":"u1","event":"A"},{"type":"track","userId":"u2","event":"B"}]}`), hdr); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	const kafkaID = "0af7651916cd43dd8448eb211c80319c"
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	in := &kgo.Record{Topic: schemas.TopicInbound, Key: []byte("k1"), Value: []byte(`{"type":"track","userId":"k1","event":"K"}`),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderWriteKey, Value: []byte(testKey)}, {Key: schemas.HeaderTraceparent, Value: []byte("00-" + kafkaID + "-b7ad6b7169203331-01")}}}
	if err := cl.ProduceSync(ctx, in).FirstErr(); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.svc.Run(runCtx) }()
	recs := consume(t, h.brokers, schemas.TopicEvents, 3)
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	_ = tr.Flush(context.Background())
	spans := map[string]string{} // trace id → span id
	for _, sp := range exp.GetSpans() {
		attrs := map[string]string{}
		for _, a := range sp.Attributes {
			attrs[string(a.Key)] = a.Value.String()
		}
		switch sp.SpanContext.TraceID().String() {
		case tracedID:
			if sp.Name != "POST /v1/batch" || attrs["tributary.source.id"] != "web" || attrs["tributary.event.count"] != "2" || attrs["http.response.status_code"] != "200" {
				t.Errorf("request span %s %v", sp.Name, attrs)
			}
		case kafkaID:
			if sp.Name != "ingest "+schemas.TopicInbound || attrs["tributary.source.id"] != "web" {
				t.Errorf("front door span %s %v", sp.Name, attrs)
			}
		default:
			t.Errorf("span %s of another trace", sp.Name)
		}
		spans[sp.SpanContext.TraceID().String()] = sp.SpanContext.SpanID().String()
	}
	for _, r := range recs {
		tp := header(r, schemas.HeaderTraceparent)
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || spans[parts[1]] == "" || parts[2] != spans[parts[1]] {
			t.Errorf("%s: traceparent %q, want the span of its request or record (%v)", r.Key, tp, spans)
		}
	}
}

// TestTracedMessageAllocatesNoMore: a message of a traced request costs no allocation more
// than an untraced one (the trace headers share the record's header slice), span export off.
func TestTracedMessageAllocatesNoMore(t *testing.T) {
	s := &Service{cfg: DefaultConfig()}
	src := &schemas.Source{ID: "web"}
	raw := []byte(`{"type":"track","event":"Order Completed","userId":"user-48213","properties":{"total":129.99}}`)
	now := time.Now()
	plain := &envelope{receivedAt: now, ip: "203.0.113.9"}
	traced := &envelope{receivedAt: now, ip: "203.0.113.9", trace: platform.TraceContext{Parent: []byte(tracedParent), State: []byte("vendor=abc")}}
	allocs := func(env *envelope) float64 {
		return testing.AllocsPerRun(200, func() {
			if _, rej := s.prepare(raw, src, env); rej != nil {
				t.Fatal(rej.reason)
			}
		})
	}
	rec, _ := s.prepare(raw, src, traced)
	if header(rec, schemas.HeaderTraceparent) != tracedParent || header(rec, schemas.HeaderTracestate) != "vendor=abc" || len(rec.Headers) != 5 {
		t.Fatalf("headers %v", rec.Headers)
	}
	if a, b := allocs(plain), allocs(traced); b > a {
		t.Errorf("a traced message: %v allocations, an untraced one %v", b, a)
	}
}
