package deliverer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

const tracedParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestPostCarriesTraceparent: each POST carries the delivery's traceparent and tracestate
// (docs/receivers.md#headers), through the lean client and net/http alike: unchanged with span
// export off; with it on, naming the POST's own span, which says the URL's host (never the
// URL), the status, the attempt, the destination and the error class.
func TestPostCarriesTraceparent(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		w.WriteHeader(status)
		mu.Unlock()
	}))
	defer srv.Close()
	client := testHTTPClient(t, nil)
	dest := &schemas.Destination{ID: "d1", Settings: schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: srv.URL + "/hook?token=secret"}}}}
	trace := platform.TraceContext{Parent: []byte(tracedParent), State: []byte("vendor=abc")}
	last := func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		return got[len(got)-1]
	}

	for name, p := range map[string]poster{"lean": client, "net/http": client.std} {
		res := post(context.Background(), p, 5*time.Second, &request{dest: dest, entries: dest.Settings.Webhooks, messageID: "m", body: []byte(`{}`), trace: trace, attempt: 1}, time.Now())
		if res[0].Class != Success {
			t.Fatalf("%s: %s (%v)", name, res[0].Class, res[0].Err)
		}
		if h := last(); h.Get("Traceparent") != tracedParent || h.Get("Tracestate") != "vendor=abc" {
			t.Errorf("%s, export off: traceparent %q tracestate %q, want them as they came", name, h.Get("Traceparent"), h.Get("Tracestate"))
		}
		post(context.Background(), p, 5*time.Second, &request{dest: dest, entries: dest.Settings.Webhooks, messageID: "m", body: []byte(`{}`)}, time.Now())
		if h := last(); h.Get("Traceparent") != "" || h.Get("Tracestate") != "" {
			t.Errorf("%s: an untraced delivery sent %v", name, h)
		}
	}

	exp := tracetest.NewInMemoryExporter()
	s := platform.DefaultTracingSettings()
	s.Exporter = exp
	tr, err := platform.NewTracer(s, "tributary-deliverer")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()
	status = http.StatusServiceUnavailable
	res := post(context.Background(), client, 5*time.Second, &request{dest: dest, entries: dest.Settings.Webhooks, messageID: "m", body: []byte(`{}`), trace: trace, tracer: tr, attempt: 3}, time.Now())
	if res[0].Status != http.StatusServiceUnavailable {
		t.Fatalf("status %d", res[0].Status)
	}
	_ = tr.Flush(context.Background())
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sp := spans[0]
	if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + sp.SpanContext.SpanID().String() + "-01"; last().Get("Traceparent") != want || last().Get("Tracestate") != "vendor=abc" {
		t.Errorf("export on: traceparent %q, want %q (the POST's span)", last().Get("Traceparent"), want)
	}
	if sp.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("the POST span's parent is %s, want the delivery's", sp.Parent.SpanID())
	}
	attrs := map[string]string{}
	for _, a := range sp.Attributes {
		attrs[string(a.Key)] = a.Value.String()
		if strings.Contains(a.Value.String(), "token=secret") || strings.Contains(a.Value.String(), "/hook") {
			t.Errorf("attribute %s carries the URL: %s", a.Key, a.Value.String())
		}
	}
	want := map[string]string{"url.host": strings.TrimPrefix(srv.URL, "http://"), "http.response.status_code": "503",
		"tributary.attempt": "3", "tributary.destination.id": "d1", "error.type": string(schemas.ClassStatus5xx)}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
		}
	}
}

// BenchmarkPostTraced: a POST of a delivery without and with a traceparent, span export off:
// the header copied onto the POST is all the trace adds.
func BenchmarkPostTraced(b *testing.B) {
	url := fasthttpEndpoint(b)
	dest := &schemas.Destination{ID: "d", Settings: schemas.DestinationSettings{SharedSecret: "s3cret",
		Webhooks: []schemas.Webhook{{URL: url + "/hook", Headers: map[string]string{"X-Team": "growth", "X-Env": "prod"}}}}}
	body := []byte(`{"version":1,"type":"track","messageId":"m-1","userId":"u-1","event":"Order Completed"}`)
	client := testHTTPClient(b, nil)
	for name, trace := range map[string]platform.TraceContext{"untraced": {}, "traced": {Parent: []byte(tracedParent)}} {
		b.Run(name, func(b *testing.B) {
			rq := &request{dest: dest, entries: dest.Settings.Webhooks, messageID: "m-1", body: body, trace: trace}
			b.ReportAllocs()
			for b.Loop() {
				if res := post(context.Background(), client, 5*time.Second, rq, time.Now()); res[0].Class != Success {
					b.Fatal(res[0].Err)
				}
			}
		})
	}
}
