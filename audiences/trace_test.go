package audiences_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

const tracedParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestRealtimeJoinTrace: the identify call of a realtime join continues the trace of the
// message that caused it: with span export off its traceparent is the message's; with it on,
// a join span's, and every sync batch is a span (docs/operations.md#tracing).
func TestRealtimeJoinTrace(t *testing.T) {
	for _, export := range []bool{false, true} {
		t.Run(map[bool]string{false: "export off", true: "export on"}[export], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testRealtimeJoinTrace(t, export) })
		})
	}
}

func testRealtimeJoinTrace(t *testing.T, export bool) {
	h := newHarness(t, sources+`
audiences:
  - id: vip
    name: VIP
    source: engage
    realtime: true
    rule:
      trait: plan
      equals: pro
`)
	exp := tracetest.NewInMemoryExporter()
	if export {
		s := platform.DefaultTracingSettings()
		s.Exporter = exp
		tr, err := platform.NewTracer(s, "tributary-audiences")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tr.Shutdown(context.Background()) }()
		h.tracer = tr
	}
	_, _, stop := h.run("aud-trace", nil)
	defer stop()
	rec := servicetest.EventRecord(t, "web", `{"type":"identify","userId":"u1","traits":{"plan":"pro"}}`)
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: schemas.HeaderTraceparent, Value: []byte(tracedParent)})
	h.Produce(rec)
	if got := h.identifies(1, 5*time.Second); len(got) != 1 || got[0].Traits["vip"] != true {
		t.Fatalf("realtime join: %v", got)
	}
	var tp string
	for _, r := range h.events.Got {
		if servicetest.Header(r, audiences.HeaderOrigin) == audiences.OriginAudiences {
			tp = servicetest.Header(r, schemas.HeaderTraceparent)
		}
	}
	if !export {
		if tp != tracedParent {
			t.Errorf("the join's traceparent %q, want the message's %q", tp, tracedParent)
		}
		return
	}
	h.advance(2 * time.Second) // a sync
	_ = h.tracer.Flush(context.Background())
	var join, syncs int
	for _, sp := range exp.GetSpans() {
		switch sp.Name {
		case "audiences realtime join":
			join++
			if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + sp.SpanContext.SpanID().String() + "-01"; tp != want {
				t.Errorf("the join's traceparent %q, want its span's %q", tp, want)
			}
		case "audiences sync":
			syncs++
			if strings.Contains(sp.SpanContext.TraceID().String(), "4bf92f35") {
				t.Error("a sync span joined the message's trace")
			}
		}
	}
	if join != 1 || syncs == 0 {
		t.Errorf("%d join spans, %d sync spans: want 1 and some", join, syncs)
	}
}
