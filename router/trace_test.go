package router

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

const tracedParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func headersOf(r *kgo.Record) map[string]string {
	h := map[string]string{}
	for _, kv := range r.Headers {
		h[kv.Key] = string(kv.Value)
	}
	return h
}

// Every delivery of a message carries its trace context (docs/topics.md#trace-context): as it
// came with export off, the routing span's with export on; a message without one has none.
func TestRouteCarriesTraceContext(t *testing.T) {
	cfg := mustConfig(t, routeYAML)
	msg := `{"type":"track","event":"Order Completed","userId":"u1","messageId":"m1"}`
	traced := func() *kgo.Record {
		rec := eventRecord(t, "web", msg)
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: schemas.HeaderTraceparent, Value: []byte(tracedParent)},
			kgo.RecordHeader{Key: schemas.HeaderTracestate, Value: []byte("vendor=abc")})
		return rec
	}

	step := Step{DeliveriesTopic: "out", Config: testConfig{cfg}, FirstAttemptAt: []byte("2026-01-01T00:00:00.000Z")}
	routed, o, err := step.Route(traced(), Deliveries{})
	if err != nil || o != Routed || routed.Len() != 2 {
		t.Fatalf("outcome %s, err %v, %d deliveries", o, err, routed.Len())
	}
	for _, d := range routed.Records {
		if h := headersOf(d); h[schemas.HeaderTraceparent] != tracedParent || h[schemas.HeaderTracestate] != "vendor=abc" || h["message-id"] != "m1" {
			t.Errorf("export off: headers %v, want the message's traceparent and tracestate", h)
		}
	}
	routed, _, _ = step.Route(eventRecord(t, "web", msg), Deliveries{})
	for _, d := range routed.Records {
		if h := headersOf(d); len(h[schemas.HeaderTraceparent]) != 0 || len(d.Headers) != 6 {
			t.Errorf("an untraced message: headers %v", h)
		}
	}

	exp := tracetest.NewInMemoryExporter()
	s := platform.DefaultTracingSettings()
	s.Exporter = exp
	tr, err := platform.NewTracer(s, "tributary-router")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()
	step.Tracer = tr
	routed, _, _ = step.Route(traced(), Deliveries{})
	_ = tr.Flush(context.Background())
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "route" {
		t.Fatalf("spans %v, want one route span", spans)
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + spans[0].SpanContext.SpanID().String() + "-01"
	for _, d := range routed.Records {
		if h := headersOf(d); h[schemas.HeaderTraceparent] != want || h[schemas.HeaderTracestate] != "vendor=abc" {
			t.Errorf("export on: traceparent %q, want %q (the route span)", h[schemas.HeaderTraceparent], want)
		}
	}
	var count int64
	for _, a := range spans[0].Attributes {
		if a.Key == "tributary.destination.count" {
			count = a.Value.AsInt64()
		}
	}
	if count != 2 || !strings.HasPrefix(spans[0].Parent.SpanID().String(), "00f067aa") {
		t.Errorf("route span: %d destinations, parent %s", count, spans[0].Parent.SpanID())
	}
}

// BenchmarkRouteTrace: routing one message to two destinations without a trace context, with
// one and span export off (the headers copied), and with export on at 10% sampling: a message
// without a trace context (a new trace each) and one under an unsampled parent (no span).
func BenchmarkRouteTrace(b *testing.B) {
	cfg := mustConfig(b, routeYAML)
	msg := `{"type":"track","event":"Order Completed","userId":"u1","messageId":"m1","properties":{"total":42}}`
	plain := eventRecord(b, "web", msg)
	traced := eventRecord(b, "web", msg)
	traced.Headers = append(traced.Headers, kgo.RecordHeader{Key: schemas.HeaderTraceparent, Value: []byte(tracedParent[:len(tracedParent)-2] + "00")})
	s := platform.DefaultTracingSettings()
	s.Exporter, s.Sampler, s.SamplerArg = tracetest.NewNoopExporter(), "parentbased_traceidratio", "0.1"
	tr, err := platform.NewTracer(s, "tributary-router")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()
	for _, c := range []struct {
		name   string
		rec    *kgo.Record
		tracer *platform.Tracer
	}{
		{"untraced", plain, nil},
		{"traced export off", traced, nil},
		{"untraced export on 10%", plain, tr},
		{"unsampled parent export on 10%", traced, tr},
	} {
		b.Run(c.name, func(b *testing.B) {
			step := Step{DeliveriesTopic: "out", Config: testConfig{cfg}, FirstAttemptAt: []byte("2026-01-01T00:00:00.000Z"), Tracer: c.tracer}
			out := Deliveries{}
			b.ReportAllocs()
			for b.Loop() {
				out, _, _ = step.Route(c.rec, out.Reset())
			}
		})
	}
}
