package platform

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tributary-cdp/tributary/schemas"
)

// One trace per event (docs/operations.md#tracing). Two parts:
//
//   - W3C trace-context propagation, always on and nearly free: TraceContext holds an event's
//     traceparent and tracestate, read from the HTTP request (TraceFromHTTP) or a record's
//     headers (TraceFromRecord) and written to every record derived from it (AppendHeaders)
//     and to every webhook POST. It is two byte slices that point into what they were read
//     from: nothing is allocated unless a header is copied.
//   - Spans, when OTLP export is configured (TracingSettings): a *Tracer per service. A nil
//     *Tracer (export off, the default) starts nothing and costs nothing; its Start returns the
//     parent's context unchanged, so that an incoming traceparent goes out as it came.

// TraceContext is the W3C trace context (https://www.w3.org/TR/trace-context/) of one event:
// the values of its traceparent and tracestate headers. The zero value is "no trace". Parent,
// when not empty, is a valid traceparent (the constructors check it); State is only kept with a
// Parent.
type TraceContext struct {
	Parent []byte
	State  []byte
}

// maxTraceState bounds the tracestate kept: the W3C limit of 32 list members of at most 256
// characters each is far more than a header needs, and vendors keep 512 bytes at least.
const maxTraceState = 512

// IsZero reports whether there is no trace context.
func (tc TraceContext) IsZero() bool { return len(tc.Parent) == 0 }

// TraceFromHTTP returns the trace context of an HTTP request: its traceparent when valid (a
// malformed one is ignored: the event starts a new trace), with its tracestate.
func TraceFromHTTP(h http.Header) TraceContext {
	parent := h.Values("Traceparent")
	if len(parent) != 1 || !ValidTraceparent(parent[0]) {
		return TraceContext{} // none, or several: ignored, as the W3C recommendation says
	}
	tc := TraceContext{Parent: []byte(parent[0])}
	if state := strings.Join(h.Values("Tracestate"), ","); validTraceState(state) {
		tc.State = []byte(state)
	}
	return tc
}

// TraceFromRecord returns the trace context on a record's headers (schemas.HeaderTraceparent,
// schemas.HeaderTracestate): the values themselves, not copies. A malformed traceparent (a
// user producing to the Kafka front door) is ignored; a nil record has none.
func TraceFromRecord(r *kgo.Record) TraceContext {
	var tc TraceContext
	if r == nil {
		return tc
	}
	for _, h := range r.Headers {
		switch h.Key {
		case schemas.HeaderTraceparent:
			tc.Parent = h.Value
		case schemas.HeaderTracestate:
			tc.State = h.Value
		}
	}
	if len(tc.Parent) == 0 || !ValidTraceparent(unsafeString(tc.Parent)) {
		return TraceContext{}
	}
	if !validTraceState(unsafeString(tc.State)) {
		tc.State = nil
	}
	return tc
}

// AppendHeaders appends the trace context's record headers to hs: none for the zero value.
func (tc TraceContext) AppendHeaders(hs []kgo.RecordHeader) []kgo.RecordHeader {
	if len(tc.Parent) == 0 {
		return hs
	}
	hs = append(hs, kgo.RecordHeader{Key: schemas.HeaderTraceparent, Value: tc.Parent})
	if len(tc.State) > 0 {
		hs = append(hs, kgo.RecordHeader{Key: schemas.HeaderTracestate, Value: tc.State})
	}
	return hs
}

// ValidTraceparent reports whether v is a traceparent a receiver may continue: version 00 and
// exactly 55 characters, or a later version (not ff) whose first 55 characters parse the same
// way; lower-case hex, a trace id and a parent id that are not all zeros.
func ValidTraceparent(v string) bool {
	if len(v) < 55 || (len(v) > 55 && v[55] != '-') || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	if !lowerHex(v[0:2]) || v[0:2] == "ff" || (v[0:2] == "00" && len(v) != 55) {
		return false
	}
	return lowerHex(v[3:35]) && !allZeros(v[3:35]) && lowerHex(v[36:52]) && !allZeros(v[36:52]) && lowerHex(v[53:55])
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allZeros(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// validTraceState reports whether a tracestate may travel on: printable ASCII, at most
// maxTraceState bytes. Its members are not parsed on the propagation path: the SDK parses them
// when a span is started.
func validTraceState(s string) bool {
	if len(s) == 0 || len(s) > maxTraceState {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// TracingSettings are the standard OpenTelemetry variables of OTLP trace export
// (docs/operations.md#tracing). Export is off unless an endpoint is set; OTEL_SDK_DISABLED
// turns it off whatever else is set.
type TracingSettings struct {
	// Endpoint is the OTLP base URL (OTEL_EXPORTER_OTLP_ENDPOINT); traces go to its
	// /v1/traces with http/protobuf.
	Endpoint string `env:"OTEL_EXPORTER_OTLP_ENDPOINT" services:"ingest, router, deliverer, audiences, tributary" doc:"OTLP collector base URL ('http://collector:4318'; with 'grpc' 'http://collector:4317'); traces go to '/v1/traces' under it. Unset (and 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' unset): no span is exported, only the 'traceparent' of each event is passed on ([operations.md](operations.md#tracing))"`
	// TracesEndpoint is the full URL traces are sent to (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
	// it wins over Endpoint.
	TracesEndpoint string `env:"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" services:"ingest, router, deliverer, audiences, tributary" doc:"the full URL of the traces ('http://collector:4318/v1/traces'); wins over 'OTEL_EXPORTER_OTLP_ENDPOINT'"`
	// Protocol is http/protobuf or grpc (OTEL_EXPORTER_OTLP_PROTOCOL).
	Protocol string `env:"OTEL_EXPORTER_OTLP_PROTOCOL" services:"ingest, router, deliverer, audiences, tributary" doc:"'http/protobuf' or 'grpc'"`
	// ServiceName is the service.name of the spans (OTEL_SERVICE_NAME); empty: each service's
	// own (DefaultServiceName).
	ServiceName string `env:"OTEL_SERVICE_NAME" services:"ingest, router, deliverer, audiences, tributary" docDefault:"'tributary-<service>' ('tributary-ingest'...)" doc:"service.name of the spans; 'make run' ('tributary') runs the services in one process and gives each '<name>-<service>'"`
	// Sampler is the OTEL_TRACES_SAMPLER: always_on, always_off, traceidratio or their
	// parentbased_ forms.
	Sampler string `env:"OTEL_TRACES_SAMPLER" services:"ingest, router, deliverer, audiences, tributary" doc:"'always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off' or 'parentbased_traceidratio': parent-based samplers follow the sampled flag of the incoming 'traceparent', so a trace is kept or dropped whole"`
	// SamplerArg is the ratio of the traceidratio samplers (OTEL_TRACES_SAMPLER_ARG), 0 to 1.
	SamplerArg string `env:"OTEL_TRACES_SAMPLER_ARG" services:"ingest, router, deliverer, audiences, tributary" docDefault:"'1'" doc:"the ratio of the 'traceidratio' samplers, 0 to 1 ('0.1': one trace in ten)"`
	// Disabled turns export off (OTEL_SDK_DISABLED); propagation stays on.
	Disabled bool `env:"OTEL_SDK_DISABLED" services:"ingest, router, deliverer, audiences, tributary" doc:"'true': no span is exported whatever else is set; the 'traceparent' of each event is still passed on"`

	// ExportInterval is how long spans wait before a batch is exported; 0: the SDK's (5 s, or
	// OTEL_BSP_SCHEDULE_DELAY). Tests shorten it.
	ExportInterval time.Duration `env:"-"`
	// Exporter, when set, receives the spans instead of an OTLP exporter (tests), export on
	// whatever the endpoints say.
	Exporter sdktrace.SpanExporter `env:"-"`
}

// Protocols of OTEL_EXPORTER_OTLP_PROTOCOL.
const (
	ProtocolHTTPProtobuf = "http/protobuf"
	ProtocolGRPC         = "grpc"
)

// DefaultTracingSettings returns the defaults: no endpoint (export off), http/protobuf,
// parent-based always-on sampling, as the OpenTelemetry specification says.
func DefaultTracingSettings() TracingSettings {
	return TracingSettings{Protocol: ProtocolHTTPProtobuf, Sampler: "parentbased_always_on"}
}

// TracingSettingsFromEnviron reads TracingSettings from environ (nil: the process environment)
// on top of DefaultTracingSettings and validates them.
func TracingSettingsFromEnviron(environ map[string]string) (TracingSettings, error) {
	return LoadSettings(DefaultTracingSettings(), environ)
}

// Enabled reports whether spans are exported.
func (s TracingSettings) Enabled() bool {
	return !s.Disabled && (s.Exporter != nil || s.Endpoint != "" || s.TracesEndpoint != "")
}

// DefaultServiceName is the service.name of a service's spans unless OTEL_SERVICE_NAME is set.
func DefaultServiceName(service string) string { return "tributary-" + service }

// Validate returns every unusable setting, each naming its variable.
func (s TracingSettings) Validate() error {
	var errs []error
	for _, e := range []struct{ name, value string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", s.Endpoint}, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", s.TracesEndpoint},
	} {
		if e.value == "" {
			continue
		}
		if u, err := url.Parse(e.value); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s: %q is not an http:// or https:// URL", e.name, e.value))
		}
	}
	if s.Protocol != ProtocolHTTPProtobuf && s.Protocol != ProtocolGRPC {
		errs = append(errs, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not %s or %s", s.Protocol, ProtocolHTTPProtobuf, ProtocolGRPC))
	}
	if _, err := s.sampler(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// sampler returns the sampler OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG name.
func (s TracingSettings) sampler() (sdktrace.Sampler, error) {
	ratio := 1.0
	if s.SamplerArg != "" && strings.HasSuffix(s.Sampler, "traceidratio") {
		r, err := strconv.ParseFloat(s.SamplerArg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG: %q is not a ratio from 0 to 1", s.SamplerArg)
		}
		ratio = r
	}
	switch s.Sampler {
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER: %q is not always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", s.Sampler)
}

// Tracer starts one service's spans and exports them over OTLP. A nil *Tracer (export off)
// is valid: it starts nothing. Safe for concurrent use.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	// parentBased: the sampler follows a parent's decision (parentbased_*), so a span under
	// an unsampled parent would not be recorded: Start then starts none (unsampledParent).
	parentBased bool
}

// NewTracer builds the tracer of the service named serviceName (its service.name), or returns
// nil when s does not enable export. Shutdown flushes and stops it.
func NewTracer(s TracingSettings, serviceName string) (*Tracer, error) {
	if !s.Enabled() {
		return nil, nil
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	sampler, _ := s.sampler()
	exp := s.Exporter
	if exp == nil {
		var err error
		if exp, err = s.exporter(); err != nil {
			return nil, err
		}
	}
	var batch []sdktrace.BatchSpanProcessorOption
	if s.ExportInterval > 0 {
		batch = append(batch, sdktrace.WithBatchTimeout(s.ExportInterval))
	}
	res := resource.NewSchemaless(semconv.ServiceName(serviceName), semconv.ServiceVersion(Version))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithResource(res),
		sdktrace.WithBatcher(exp, batch...))
	return &Tracer{provider: tp, tracer: tp.Tracer("github.com/tributary-cdp/tributary"),
		parentBased: strings.HasPrefix(s.Sampler, "parentbased_")}, nil
}

// exporter builds the OTLP exporter of the settings. The exporters read the other standard
// variables themselves (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE).
func (s TracingSettings) exporter() (sdktrace.SpanExporter, error) {
	endpoint := s.TracesEndpoint
	if s.Protocol == ProtocolGRPC {
		if endpoint == "" {
			endpoint = s.Endpoint
		}
		return otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpointURL(endpoint))
	}
	if endpoint == "" {
		endpoint = strings.TrimSuffix(s.Endpoint, "/") + "/v1/traces"
	}
	return otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint))
}

// LogTracingErrors sends the OpenTelemetry SDK's errors (an export the collector refused or did
// not answer) to logger instead of the standard library's log. The SDK's error handler is one per
// process: only mains (Command.Trace, `make run`) call it.
func LogTracingErrors(logger zerolog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn().Err(err).Msg("exporting spans")
	}))
}

// Enabled reports whether t exports spans (false for nil).
func (t *Tracer) Enabled() bool { return t != nil }

// Shutdown exports the spans still buffered and stops t; a nil t does nothing.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Flush exports the spans buffered so far; a nil t does nothing.
func (t *Tracer) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}

// Run waits for ctx to end, then shuts t down within a few seconds: a Runner for a service's
// list, so that the spans still buffered are exported as the process stops.
func (t *Tracer) Run(ctx context.Context) error {
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return t.Shutdown(sctx)
}

// Span is a span started by Tracer.Start; the zero Span (export off) does nothing.
type Span struct{ s trace.Span }

// Recording reports whether the span is sampled: attributes are only worth building then.
func (s Span) Recording() bool { return s.s != nil && s.s.IsRecording() }

// SetAttributes sets attributes of the span.
func (s Span) SetAttributes(kv ...attribute.KeyValue) {
	if s.s != nil {
		s.s.SetAttributes(kv...)
	}
}

// Fail marks the span failed, with the error class (error.type) and message.
func (s Span) Fail(class, msg string) {
	if s.s != nil {
		s.s.SetAttributes(attribute.String("error.type", class))
		s.s.SetStatus(codes.Error, msg)
	}
}

// End ends the span.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// SpanKinds of Tracer.Start.
const (
	SpanInternal = trace.SpanKindInternal
	SpanServer   = trace.SpanKindServer
	SpanClient   = trace.SpanKindClient
	SpanConsumer = trace.SpanKindConsumer
	SpanProducer = trace.SpanKindProducer
)

// Start starts a span named name, a child of parent (a new trace when parent is zero), and
// returns it with its own trace context, to pass on to what follows it (records, a webhook's
// traceparent). A nil t returns a zero Span and parent unchanged: the event's incoming
// traceparent travels on as it came.
func (t *Tracer) Start(parent TraceContext, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (Span, TraceContext) {
	if t == nil || t.parentBased && unsampledParent(parent.Parent) {
		// Export off, or a span the sampler would not record: nothing is started (no ids
		// drawn, no allocation), and the parent's traceparent travels on as it came, its
		// sampled flag unset, so every later hop skips the event the same way. At a 10%
		// sampling ratio that is nine events in ten (docs/operations.md#tracing).
		return Span{}, parent
	}
	ctx := context.Background()
	if sc, ok := parent.spanContext(); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	_, span := t.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return Span{span}, contextOf(span.SpanContext())
}

// unsampledParent reports whether p is a valid traceparent whose sampled flag is unset.
func unsampledParent(p []byte) bool {
	if len(p) != 55 || !ValidTraceparent(unsafeString(p)) {
		return false
	}
	flags, err := strconv.ParseUint(unsafeString(p[53:55]), 16, 8)
	return err == nil && flags&uint64(trace.FlagsSampled) == 0
}

// spanContext parses the trace context (valid, as the constructors checked).
func (tc TraceContext) spanContext() (trace.SpanContext, bool) {
	p := unsafeString(tc.Parent)
	if !ValidTraceparent(p) {
		return trace.SpanContext{}, false
	}
	tid, err1 := trace.TraceIDFromHex(p[3:35])
	sid, err2 := trace.SpanIDFromHex(p[36:52])
	flags, err3 := strconv.ParseUint(p[53:55], 16, 8)
	if err1 != nil || err2 != nil || err3 != nil {
		return trace.SpanContext{}, false
	}
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags) & trace.FlagsSampled, Remote: true}
	if len(tc.State) > 0 {
		if ts, err := trace.ParseTraceState(string(tc.State)); err == nil {
			cfg.TraceState = ts
		}
	}
	return trace.NewSpanContext(cfg), true
}

// contextOf formats a span's context as the trace context to pass on.
func contextOf(sc trace.SpanContext) TraceContext {
	if !sc.IsValid() {
		return TraceContext{}
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	b = appendHex(b, tid[:])
	b = append(b, '-')
	b = appendHex(b, sid[:])
	b = append(b, '-')
	b = appendHex(b, []byte{byte(sc.TraceFlags() & trace.FlagsSampled)})
	tc := TraceContext{Parent: b}
	if ts := sc.TraceState(); ts.Len() > 0 {
		tc.State = []byte(ts.String())
	}
	return tc
}

func appendHex(b, v []byte) []byte {
	const digits = "0123456789abcdef"
	for _, c := range v {
		b = append(b, digits[c>>4], digits[c&0xf])
	}
	return b
}

// unsafeString views b as a string without copying it: only for reading it at once.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
