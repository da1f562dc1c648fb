package devstack_test

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tributary-cdp/tributary/devstack"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

const (
	incomingTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	incomingParent = "00-" + incomingTrace + "-00f067aa0ba902b7-01"
)

// otlpSink is an OTLP/HTTP receiver (protobuf) that keeps every span with its service.name.
type otlpSink struct {
	mu    sync.Mutex
	spans []sinkSpan
}

type sinkSpan struct {
	service string
	span    *tracev1.Span
}

func (o *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				o.spans = append(o.spans, sinkSpan{service, sp})
			}
		}
	}
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// trace returns the spans of the trace id (hex).
func (o *otlpSink) trace(id string) []sinkSpan {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []sinkSpan
	for _, s := range o.spans {
		if hex.EncodeToString(s.span.TraceId) == id {
			out = append(out, s)
		}
	}
	return out
}

func attrOf(sp *tracev1.Span, key string) (string, int64, bool) {
	for _, kv := range sp.Attributes {
		if kv.Key == key {
			return kv.GetValue().GetStringValue(), kv.GetValue().GetIntValue(), true
		}
	}
	return "", 0, false
}

// flakyHook answers 500 to the first POST of each message id, 200 to the next.
type flakyHook struct {
	hook
	seen sync.Map
	n    atomic.Int32
}

func (f *flakyHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.hook.ServeHTTP(w, r)
	if _, again := f.seen.LoadOrStore(r.Header.Get("X-Message-Id"), true); !again {
		f.n.Add(1)
		http.Error(w, "try again", http.StatusInternalServerError)
	}
}

// TestTraceIngestToWebhook: with OTLP export on, one event's spans — ingest's request, the
// router's routing, a failed POST, the retry tier hand-off and the retried POST — reach an
// OTLP/HTTP receiver all with the trace id of the request's traceparent, each from its own
// service.name; each POST carries a traceparent of that trace naming its own span
// (docs/operations.md#tracing). A malformed traceparent starts a new trace.
func TestTraceIngestToWebhook(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	sink := &otlpSink{}
	collector := httptest.NewServer(sink)
	t.Cleanup(collector.Close) // after the stack's cleanup: its last spans are exported
	rc := &flakyHook{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	st := startStack(t, srv.URL+"/segment", func(c *devstack.Config) {
		c.Tracing.Endpoint, c.Tracing.ExportInterval = collector.URL, 50*time.Millisecond
	})

	a := servicetest.Call(t, http.MethodPost, "http://"+st.IngestAddr()+"/v1/batch",
		`{"batch":[{"type":"track","userId":"u1","event":"Traced","messageId":"traced"}]}`,
		"Authorization", servicetest.Basic("wk_e2e"), "Traceparent", incomingParent, "Tracestate", "vendor=abc")
	if a.Status != 200 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	reqs, _ := rc.wait(t, 2) // the failed POST and its retry
	for i, r := range reqs {
		tp := r.Header.Get("Traceparent")
		if !strings.HasPrefix(tp, "00-"+incomingTrace+"-") || tp == incomingParent || r.Header.Get("Tracestate") != "vendor=abc" {
			t.Errorf("POST %d: traceparent %q tracestate %q: want the incoming trace, a span of the deliverer", i, tp, r.Header.Get("Tracestate"))
		}
	}
	if reqs[0].Header.Get("Traceparent") == reqs[1].Header.Get("Traceparent") {
		t.Error("both attempts carry the same parent span: want one span per attempt")
	}

	want := map[string]string{ // span name → service.name
		"POST /v1/batch": "tributary-ingest", "route": "tributary-router", "retry tier hand-off": "tributary-deliverer",
	}
	var spans []sinkSpan
	deadline := time.Now().Add(15 * time.Second)
	for {
		spans = sink.trace(incomingTrace)
		if len(spans) >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	byName := map[string][]*tracev1.Span{}
	for _, s := range spans {
		byName[s.span.Name] = append(byName[s.span.Name], s.span)
		if w, ok := want[s.span.Name]; ok && s.service != w {
			t.Errorf("span %q from %q, want %q", s.span.Name, s.service, w)
		}
		if s.span.Name == "POST webhook" && s.service != "tributary-deliverer" {
			t.Errorf("POST span from %q", s.service)
		}
	}
	for name := range want {
		if len(byName[name]) != 1 {
			t.Errorf("%d spans %q of the trace, want 1 (got %d spans in all)", len(byName[name]), name, len(spans))
		}
	}
	posts := byName["POST webhook"]
	if len(posts) != 2 {
		t.Fatalf("%d POST spans of the trace, want 2", len(posts))
	}
	if ing := byName["POST /v1/batch"]; len(ing) == 1 {
		if hex.EncodeToString(ing[0].ParentSpanId) != "00f067aa0ba902b7" {
			t.Errorf("ingest's span has parent %x, want the request's", ing[0].ParentSpanId)
		}
		if src, _, _ := attrOf(ing[0], "tributary.source.id"); src != "web" {
			t.Errorf("ingest span source %q", src)
		}
		if _, n, _ := attrOf(ing[0], "tributary.event.count"); n != 1 {
			t.Errorf("ingest span event count %d", n)
		}
	}
	if rt := byName["route"]; len(rt) == 1 {
		if _, n, _ := attrOf(rt[0], "tributary.destination.count"); n != 1 {
			t.Errorf("route span destination count %d", n)
		}
	}
	statuses := map[int64]int64{} // attempt → status
	for _, p := range posts {
		host, _, _ := attrOf(p, "url.host")
		_, attempt, _ := attrOf(p, "tributary.attempt")
		_, status, _ := attrOf(p, "http.response.status_code")
		if dest, _, _ := attrOf(p, "tributary.destination.id"); dest != "hooks" || host != strings.TrimPrefix(srv.URL, "http://") {
			t.Errorf("POST span destination %q host %q", dest, host)
		}
		for _, kv := range p.Attributes {
			if strings.Contains(kv.GetValue().GetStringValue(), "/segment") {
				t.Errorf("POST span attribute %s carries the URL's path", kv.Key)
			}
		}
		statuses[attempt] = status
		// The POST of this attempt named this span as its parent.
		parent := "00-" + incomingTrace + "-" + hex.EncodeToString(p.SpanId) + "-01"
		if reqs[0].Header.Get("Traceparent") != parent && reqs[1].Header.Get("Traceparent") != parent {
			t.Errorf("no POST carried traceparent %s", parent)
		}
	}
	if statuses[1] != 500 || statuses[2] != 200 {
		t.Errorf("attempt statuses %v, want 1: 500, 2: 200", statuses)
	}
	if cls, _, _ := attrOf(posts[0], "error.type"); cls == "" {
		if cls, _, _ = attrOf(posts[1], "error.type"); cls == "" {
			t.Error("the failed POST's span has no error.type")
		}
	}

	// A malformed traceparent is ignored: the event starts a trace of its own.
	a = servicetest.Call(t, http.MethodPost, "http://"+st.IngestAddr()+"/v1/track",
		`{"userId":"u2","event":"Fresh","messageId":"fresh"}`, "Authorization", servicetest.Basic("wk_e2e"), "Traceparent", "00-nonsense-01")
	if a.Status != 200 {
		t.Fatalf("a malformed traceparent: %d %s", a.Status, a.Body)
	}
	reqs, _ = rc.wait(t, 3)
	tp := reqs[2].Header.Get("Traceparent")
	if len(tp) != 55 || strings.Contains(tp, incomingTrace) || tp == "00-nonsense-01" {
		t.Errorf("after a malformed traceparent the webhook carries %q, want a new trace", tp)
	}
}

// TestTraceparentWithExportOff: with span export off (the default), a traceparent that comes
// in goes out unchanged on the webhook, from HTTP and from a record produced straight to
// tracking.inbound; a malformed one is dropped, and the request still succeeds.
func TestTraceparentWithExportOff(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	rc := &hook{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	st := startStack(t, srv.URL+"/segment")

	const kafkaParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	servicetest.Call(t, http.MethodPost, "http://"+st.IngestAddr()+"/v1/batch",
		`{"batch":[{"type":"track","userId":"u1","event":"A","messageId":"http-a"},{"type":"track","userId":"u2","event":"B","messageId":"http-b"}]}`,
		"Authorization", servicetest.Basic("wk_e2e"), "Traceparent", incomingParent, "Tracestate", "vendor=abc")
	post(t, st, "/v1/track", `{"userId":"u3","event":"C","messageId":"untraced"}`)
	a := servicetest.Call(t, http.MethodPost, "http://"+st.IngestAddr()+"/v1/track", `{"userId":"u4","event":"D","messageId":"malformed"}`,
		"Authorization", servicetest.Basic("wk_e2e"), "Traceparent", "00-"+incomingTrace+"-zz-01")
	if a.Status != 200 {
		t.Fatalf("a malformed traceparent: %d %s", a.Status, a.Body)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec := &kgo.Record{Topic: schemas.TopicInbound, Value: []byte(`{"type":"track","userId":"k1","event":"K","messageId":"kafka-direct"}`),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderWriteKey, Value: []byte("wk_e2e")}, {Key: schemas.HeaderTraceparent, Value: []byte(kafkaParent)}}}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}

	reqs, _ := rc.wait(t, 5)
	want := map[string][2]string{
		"http-a": {incomingParent, "vendor=abc"}, "http-b": {incomingParent, "vendor=abc"}, // a batch's events share its trace
		"untraced": {}, "malformed": {}, "kafka-direct": {kafkaParent, ""},
	}
	for _, r := range reqs {
		id := r.Header.Get("X-Message-Id")
		w, ok := want[id]
		if !ok {
			t.Errorf("unexpected webhook %s", id)
			continue
		}
		if got := [2]string{r.Header.Get("Traceparent"), r.Header.Get("Tracestate")}; got != w {
			t.Errorf("%s: traceparent, tracestate %q, want %q", id, got, w)
		}
		delete(want, id)
	}
	if len(want) > 0 {
		t.Errorf("no webhook for %v", want)
	}
}
