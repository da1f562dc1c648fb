package platform_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

const (
	sampledParent   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	unsampledParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	traceID         = "4bf92f3577b34da6a3ce929d0e0e4736"
)

func TestValidTraceparent(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{sampledParent, true},
		{unsampledParent, true},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future", true}, // a later version may add fields
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"", false},
		{"garbage", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false}, // version 00 is exactly 55
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false}, // upper case
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false}, // zero trace id
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false}, // zero parent id
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", false},
		{"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false},
	} {
		if got := platform.ValidTraceparent(tc.v); got != tc.want {
			t.Errorf("ValidTraceparent(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestTraceFromHTTP(t *testing.T) {
	h := http.Header{}
	h.Set("Traceparent", sampledParent)
	h.Set("Tracestate", "vendor=abc")
	tc := platform.TraceFromHTTP(h)
	if string(tc.Parent) != sampledParent || string(tc.State) != "vendor=abc" {
		t.Fatalf("got %q %q", tc.Parent, tc.State)
	}
	for name, h := range map[string]http.Header{
		"malformed": {"Traceparent": {"00-xyz-01"}, "Tracestate": {"vendor=abc"}},
		"two":       {"Traceparent": {sampledParent, unsampledParent}},
		"none":      {"Tracestate": {"vendor=abc"}},
	} {
		if tc := platform.TraceFromHTTP(h); !tc.IsZero() || tc.State != nil {
			t.Errorf("%s: got %q %q, want no trace context", name, tc.Parent, tc.State)
		}
	}
	h = http.Header{"Traceparent": {sampledParent}, "Tracestate": {strings.Repeat("a", 600)}}
	if tc := platform.TraceFromHTTP(h); string(tc.Parent) != sampledParent || tc.State != nil {
		t.Errorf("an oversized tracestate: got %q %q, want the traceparent alone", tc.Parent, tc.State)
	}
}

func TestTraceFromRecordRoundTrip(t *testing.T) {
	tc := platform.TraceContext{Parent: []byte(sampledParent), State: []byte("vendor=abc")}
	r := &kgo.Record{Headers: tc.AppendHeaders([]kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("src")}})}
	if len(r.Headers) != 3 {
		t.Fatalf("headers %v", r.Headers)
	}
	got := platform.TraceFromRecord(r)
	if string(got.Parent) != sampledParent || string(got.State) != "vendor=abc" {
		t.Fatalf("got %q %q", got.Parent, got.State)
	}
	if hs := (platform.TraceContext{}).AppendHeaders(nil); len(hs) != 0 {
		t.Errorf("the zero trace context appended %v", hs)
	}
	bad := &kgo.Record{Headers: []kgo.RecordHeader{{Key: schemas.HeaderTraceparent, Value: []byte("nope")}, {Key: schemas.HeaderTracestate, Value: []byte("a=b")}}}
	if got := platform.TraceFromRecord(bad); !got.IsZero() || got.State != nil {
		t.Errorf("a malformed traceparent on a record: got %q %q, want none", got.Parent, got.State)
	}
}

// With export off the tracer is nil: Start passes the parent on unchanged and allocates nothing.
func TestTracerOffPassesParentOn(t *testing.T) {
	tr, err := platform.NewTracer(platform.DefaultTracingSettings(), "tributary-test")
	if err != nil || tr != nil {
		t.Fatalf("NewTracer without an endpoint = %v, %v; want nil, nil", tr, err)
	}
	parent := platform.TraceContext{Parent: []byte(sampledParent)}
	span, tc := tr.Start(parent, "x", platform.SpanInternal)
	span.SetAttributes(attribute.Int("n", 1))
	span.Fail("timeout", "boom")
	span.End()
	if string(tc.Parent) != sampledParent {
		t.Fatalf("got %q", tc.Parent)
	}
	off := platform.DefaultTracingSettings()
	off.Endpoint, off.Disabled = "http://127.0.0.1:4318", true
	if tr, _ := platform.NewTracer(off, "x"); tr != nil {
		t.Error("OTEL_SDK_DISABLED=true built a tracer")
	}
	if n := testing.AllocsPerRun(100, func() {
		r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: schemas.HeaderTraceparent, Value: parent.Parent}}}
		_, _ = tr.Start(platform.TraceFromRecord(r), "x", platform.SpanInternal)
	}); n > 1 { // the record itself
		t.Errorf("%v allocations with export off", n)
	}
}

func TestTracerContinuesTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	s := platform.DefaultTracingSettings()
	s.Exporter = exp
	tr, err := platform.NewTracer(s, "tributary-test")
	if err != nil {
		t.Fatal(err)
	}
	span, child := tr.Start(platform.TraceContext{Parent: []byte(sampledParent), State: []byte("vendor=abc")}, "POST /v1/batch", platform.SpanServer,
		attribute.Int("tributary.event_count", 2))
	span.End()
	span, grandchild := tr.Start(child, "route", platform.SpanConsumer)
	span.End()
	span, fresh := tr.Start(platform.TraceContext{}, "new", platform.SpanServer)
	span.End()
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !platform.ValidTraceparent(string(child.Parent)) || !strings.HasPrefix(string(child.Parent), "00-"+traceID+"-") || string(child.Parent) == sampledParent {
		t.Errorf("child traceparent %q: want the same trace, a new span id", child.Parent)
	}
	if !strings.HasSuffix(string(child.Parent), "-01") || string(child.State) != "vendor=abc" {
		t.Errorf("child %q %q: want sampled, the tracestate kept", child.Parent, child.State)
	}
	if !strings.HasPrefix(string(grandchild.Parent), "00-"+traceID+"-") {
		t.Errorf("grandchild %q", grandchild.Parent)
	}
	if strings.Contains(string(fresh.Parent), traceID) || !platform.ValidTraceparent(string(fresh.Parent)) {
		t.Errorf("a span without a parent: %q, want a new trace", fresh.Parent)
	}
	spans := exp.GetSpans()
	_ = tr.Shutdown(context.Background())
	if len(spans) != 3 {
		t.Fatalf("%d spans exported, want 3", len(spans))
	}
	if spans[0].Parent.TraceID().String() != traceID || spans[0].Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("span parent %v", spans[0].Parent)
	}
	if name := spans[0].Resource.Set(); !strings.Contains(name.Encoded(attribute.DefaultEncoder()), "service.name=tributary-test") {
		t.Errorf("resource %v", name.Encoded(attribute.DefaultEncoder()))
	}
}

// A parent-based sampler keeps the incoming decision: an unsampled traceparent records no span.
func TestTracerFollowsParentDecision(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	s := platform.DefaultTracingSettings()
	s.Exporter, s.Sampler, s.SamplerArg = exp, "parentbased_traceidratio", "1"
	tr, err := platform.NewTracer(s, "x")
	if err != nil {
		t.Fatal(err)
	}
	span, child := tr.Start(platform.TraceContext{Parent: []byte(unsampledParent)}, "x", platform.SpanServer)
	span.End()
	_ = tr.Flush(context.Background())
	defer func() { _ = tr.Shutdown(context.Background()) }()
	if len(exp.GetSpans()) != 0 || !strings.HasSuffix(string(child.Parent), "-00") || !strings.Contains(string(child.Parent), traceID) {
		t.Errorf("spans %d, child %q: want none recorded, the same trace passed on unsampled", len(exp.GetSpans()), child.Parent)
	}
	// Nine events in ten at a 10% ratio: no span is started under an unsampled parent, which
	// travels on as it came, at no cost.
	parent := platform.TraceContext{Parent: []byte(unsampledParent)}
	if string(child.Parent) != unsampledParent {
		t.Errorf("child %q, want the unsampled parent passed on as it came", child.Parent)
	}
	if n := testing.AllocsPerRun(100, func() {
		span, _ := tr.Start(parent, "x", platform.SpanServer)
		span.End()
	}); n != 0 {
		t.Errorf("a span under an unsampled parent allocates %v times, want 0", n)
	}
	// Under a sampled parent a span is recorded, with a span id of its own.
	span, child = tr.Start(platform.TraceContext{Parent: []byte(strings.TrimSuffix(unsampledParent, "00") + "01")}, "x", platform.SpanServer)
	span.End()
	_ = tr.Flush(context.Background())
	if len(exp.GetSpans()) != 1 || !strings.HasSuffix(string(child.Parent), "-01") || strings.Contains(string(child.Parent), "00f067aa0ba902b7") {
		t.Errorf("spans %d, child %q: want one recorded, with its own span id", len(exp.GetSpans()), child.Parent)
	}
}

func TestTracingSettings(t *testing.T) {
	s, err := platform.TracingSettingsFromEnviron(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1",
	})
	if err != nil || !s.Enabled() || s.Protocol != platform.ProtocolHTTPProtobuf {
		t.Fatalf("%+v, %v", s, err)
	}
	if s, err := platform.TracingSettingsFromEnviron(map[string]string{}); err != nil || s.Enabled() {
		t.Fatalf("defaults: %+v, %v; want export off", s, err)
	}
	for variable, env := range map[string]map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":        {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://x/"},
		"OTEL_EXPORTER_OTLP_PROTOCOL":        {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
		"OTEL_TRACES_SAMPLER":                {"OTEL_TRACES_SAMPLER": "sometimes"},
		"OTEL_TRACES_SAMPLER_ARG":            {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
		"OTEL_SDK_DISABLED":                  {"OTEL_SDK_DISABLED": "maybe"},
	} {
		if _, err := platform.TracingSettingsFromEnviron(env); err == nil || !strings.Contains(err.Error(), variable) {
			t.Errorf("%v: error %v, want one naming %s", env, err, variable)
		}
	}
	for _, proto := range []string{platform.ProtocolHTTPProtobuf, platform.ProtocolGRPC} {
		s := platform.DefaultTracingSettings()
		s.Endpoint, s.Protocol = "http://127.0.0.1:1", proto
		tr, err := platform.NewTracer(s, "x")
		if err != nil || tr == nil {
			t.Fatalf("%s: %v", proto, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := tr.Shutdown(ctx); err != nil {
			t.Errorf("%s: shutdown: %v", proto, err)
		}
		cancel()
	}
}

// The propagation path with export off: read a record's trace context, write it on the next
// record.
func BenchmarkTracePropagationOff(b *testing.B) {
	in := &kgo.Record{Headers: []kgo.RecordHeader{
		{Key: schemas.HeaderSourceID, Value: []byte("src")}, {Key: schemas.HeaderMessageID, Value: []byte("m")},
		{Key: schemas.HeaderTraceparent, Value: []byte(sampledParent)},
	}}
	var tr *platform.Tracer
	hs := make([]kgo.RecordHeader, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		span, tc := tr.Start(platform.TraceFromRecord(in), "route", platform.SpanConsumer)
		hs = tc.AppendHeaders(hs[:0])
		span.End()
	}
}

func BenchmarkTraceFromRecordAbsent(b *testing.B) {
	in := &kgo.Record{Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("src")}, {Key: schemas.HeaderMessageID, Value: []byte("m")}}}
	b.ReportAllocs()
	for b.Loop() {
		_ = platform.TraceFromRecord(in)
	}
}

// The SDK's export errors reach the service's logger, not the standard library's log.
func TestLogTracingErrors(t *testing.T) {
	var buf bytes.Buffer
	platform.LogTracingErrors(zerolog.New(&buf))
	defer platform.LogTracingErrors(zerolog.Nop())
	otel.Handle(errors.New("collector unreachable"))
	if !strings.Contains(buf.String(), `"message":"exporting spans"`) || !strings.Contains(buf.String(), "collector unreachable") {
		t.Errorf("logged %q", buf.String())
	}
}
