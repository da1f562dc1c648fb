package router

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// planConfig is testConfig with the config's tracking plans (a PlanSnapshot).
type planConfig struct{ testConfig }

func (c planConfig) TrackingPlanByID(id string) (*schemas.Plan, bool) {
	for i := range c.cfg.TrackingPlans {
		if c.cfg.TrackingPlans[i].ID == id {
			return &c.cfg.TrackingPlans[i], true
		}
	}
	return nil, false
}

const planRouteYAML = `
sources:
  - id: web
    name: Web
    writeKey: wk_web
    trackingPlan:
      blockedEvents: [Debug Event]
      planId: shop
      allowUnplannedTrackEvents: false
      allowUnplannedTrackEventProperties: false
      forwardingViolationsTo: violations
      forwardingBlockedEventsTo: quarantine
  - id: strict
    writeKey: wk_strict
    trackingPlan: {planId: shop, allowTrackEventOnViolations: false, forwardingBlockedEventsTo: quarantine}
  - {id: violations, writeKey: wk_v}
  - {id: quarantine, writeKey: wk_q}
trackingPlans:
  - id: shop
    name: Shop
    rules:
      events:
        - name: Order Completed
          properties:
            type: object
            required: [total]
            properties:
              total: {type: number}
              currency: {type: string}
      identify:
        type: object
        properties:
          email: {type: string}
destinations:
  - id: hooks
    type: webhooks
    sources: [web, strict]
    settings: {webhooks: [{url: "https://a.example.com/hook"}]}
`

func planStep(t testing.TB) *Step {
	t.Helper()
	return &Step{DeliveriesTopic: "out", EventsTopic: "events", AttemptsTopic: "attempts",
		Config: planConfig{testConfig{mustConfig(t, planRouteYAML)}}, FirstAttemptAt: []byte("2026-01-01T00:00:00.000Z")}
}

func bodyOf(t *testing.T, r *kgo.Record) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.Value, &m); err != nil {
		t.Fatalf("body %s: %v", r.Value, err)
	}
	return m
}

// TestRoutePlanViolationsPassed: a call with violations is delivered with context.violations in
// Segment's shape (its other context keys kept), its unplanned properties omitted, and one
// Violation Generated call per violation forwarded to the violations source.
func TestRoutePlanViolationsPassed(t *testing.T) {
	step := planStep(t)
	out, o, err := step.Route(eventRecord(t, "web", `{"type":"track","event":"Order Completed","userId":"u1","messageId":"m1","properties":{"total":"12","currency":5,"extra":true},"context":{"ip":"203.0.113.9"}}`), Deliveries{})
	if err != nil || o != Routed || out.Len() != 1 {
		t.Fatalf("outcome %s err %v, %d deliveries", o, err, out.Len())
	}
	body := bodyOf(t, out.Records[0])
	var props map[string]any
	_ = json.Unmarshal(body["properties"], &props)
	if _, ok := props["extra"]; ok || len(props) != 2 {
		t.Errorf("properties %s: the unplanned extra must be omitted, the others kept", body["properties"])
	}
	var ctx struct {
		IP         string              `json:"ip"`
		Violations []schemas.Violation `json:"violations"`
	}
	if err := json.Unmarshal(body["context"], &ctx); err != nil {
		t.Fatal(err)
	}
	want := []schemas.Violation{
		{Type: "Invalid Type", Field: "properties.currency", Description: "properties.currency must be string, got number"},
		{Type: "Invalid Type", Field: "properties.total", Description: "properties.total must be number, got string"},
	}
	if ctx.IP != "203.0.113.9" || !sameViolations(ctx.Violations, want) {
		t.Errorf("context %s, want the ip and violations %+v", body["context"], want)
	}
	if len(out.Forwarded) != 2 {
		t.Fatalf("%d forwarded records, want 2 Violation Generated calls", len(out.Forwarded))
	}
	for i, f := range out.Forwarded {
		if f.Topic != "events" || string(headerValue(f, schemas.HeaderSourceID)) != "violations" || string(headerValue(f, schemas.HeaderForwardedFrom)) != "web" ||
			string(headerValue(f, schemas.HeaderMessageID)) != "violation-m1-"+strconv.Itoa(i) || string(headerValue(f, schemas.HeaderType)) != "track" {
			t.Errorf("forwarded record %d: topic %s headers %v", i, f.Topic, f.Headers)
		}
		m, err := schemas.DecodeMessage(f.Value)
		if err != nil || m.Validate() != nil {
			t.Fatalf("forwarded %s is not a valid message: %v", f.Value, err)
		}
		var p map[string]string
		_ = json.Unmarshal(m.Properties, &p)
		if m.Event != "Violation Generated" || m.UserID != "schema-violations" || p["eventMessageID"] != "m1" || p["eventName"] != "Order Completed" ||
			p["eventType"] != "track" || p["sourceID"] != "web" || p["sourceName"] != "Web" || p["trackingPlanID"] != "shop" || p["trackingPlanName"] != "Shop" ||
			p["violationType"] != "Invalid Type" || p["violationField"] == "" || p["violationDescription"] == "" {
			t.Errorf("forwarded %s", f.Value)
		}
	}
}

func sameViolations(got, want []schemas.Violation) bool {
	sortByField := func(vs []schemas.Violation) map[string]schemas.Violation {
		m := map[string]schemas.Violation{}
		for _, v := range vs {
			m[v.Field] = v
		}
		return m
	}
	return len(got) == len(want) && reflect.DeepEqual(sortByField(got), sortByField(want))
}

// TestRoutePlanBlocks: an unplanned track (allowUnplannedTrackEvents false) and a call with
// violations (allowTrackEventOnViolations false) are blocked: no delivery, a filtered record
// with reason tracking_plan, and the original record forwarded to the quarantine source.
// blockedEvents still blocks by name, and is not forwarded (it is not the plan's decision).
func TestRoutePlanBlocks(t *testing.T) {
	step := planStep(t)
	for _, c := range []struct {
		name, source, msg string
		forwarded         []string // source-id of each forwarded record
	}{
		{"unplanned event", "web", `{"type":"track","event":"Nope","userId":"u","messageId":"m2"}`, []string{"quarantine"}},
		{"violations", "strict", `{"type":"track","event":"Order Completed","userId":"u","messageId":"m3","properties":{}}`, []string{"quarantine"}},
		{"blockedEvents", "web", `{"type":"track","event":"Debug Event","userId":"u","messageId":"m4"}`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := eventRecord(t, c.source, c.msg)
			out, o, err := step.Route(rec, Deliveries{})
			if err != nil || o != BlockedByPlan || out.Len() != 0 {
				t.Fatalf("outcome %s err %v, %d deliveries", o, err, out.Len())
			}
			if len(out.Filtered) != 1 || !json.Valid(out.Filtered[0].Value) || !strings.Contains(string(out.Filtered[0].Value), `"reason":"tracking_plan"`) {
				t.Errorf("filtered %v", out.Filtered)
			}
			var got []string
			for _, f := range out.Forwarded {
				got = append(got, string(headerValue(f, schemas.HeaderSourceID)))
				if string(f.Value) != string(rec.Value) || string(f.Key) != string(rec.Key) || string(headerValue(f, schemas.HeaderForwardedFrom)) != c.source {
					t.Errorf("forwarded %s key %s headers %v, want the original record", f.Value, f.Key, f.Headers)
				}
			}
			if !reflect.DeepEqual(got, c.forwarded) {
				t.Errorf("forwarded to %v, want %v", got, c.forwarded)
			}
		})
	}
}

// TestRoutePlanForwardedNotForwardedAgain: a record the router forwarded (header
// forwarded-from) is checked and blocked like any other, but never forwarded again.
func TestRoutePlanForwardedNotForwardedAgain(t *testing.T) {
	step := planStep(t)
	rec := eventRecord(t, "web", `{"type":"track","event":"Nope","userId":"u","messageId":"m5"}`)
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: schemas.HeaderForwardedFrom, Value: []byte("strict")})
	out, o, _ := step.Route(rec, Deliveries{})
	if o != BlockedByPlan || len(out.Forwarded) != 0 {
		t.Fatalf("outcome %s, %d forwarded", o, len(out.Forwarded))
	}
}

// TestRoutePlanValidCallUnchanged: a call that keeps its plan is delivered byte for byte as
// without a plan.
func TestRoutePlanValidCallUnchanged(t *testing.T) {
	step := planStep(t)
	msg := `{"type":"track","event":"Order Completed","userId":"u","messageId":"m6","properties":{"total":1,"currency":"EUR"},"context":{"ip":"1.2.3.4"}}`
	out, o, _ := step.Route(eventRecord(t, "web", msg), Deliveries{})
	m, _ := schemas.DecodeMessage([]byte(msg))
	if o != Routed || string(out.Records[0].Value) != string(schemas.AppendWebhookBody(nil, m)) || len(out.Forwarded) != 0 {
		t.Fatalf("outcome %s body %s forwarded %d", o, out.Records[0].Value, len(out.Forwarded))
	}
	// An identify without a context gets one, with the violations.
	out, _, _ = step.Route(eventRecord(t, "web", `{"type":"identify","userId":"u","messageId":"m7","traits":{"email":1}}`), Deliveries{})
	if c := string(bodyOf(t, out.Records[0])["context"]); c != `{"violations":[{"type":"Invalid Type","field":"traits.email","description":"traits.email must be string, got number"}]}` {
		t.Errorf("context %s", c)
	}
}

// BenchmarkRoutePlan is BenchmarkRoute's message on a source whose plan has 20 events: the
// cost of checking it, against BenchmarkRoute/1dest without a plan.
func BenchmarkRoutePlan(b *testing.B) {
	y := "sources: [{id: web, writeKey: wk, trackingPlan: {planId: shop}}]\n" +
		"destinations: [{id: d0, type: webhooks, sources: [web], settings: {webhooks: [{url: \"https://x.example.com\"}]}}]\n" +
		"trackingPlans:\n  - id: shop\n    rules:\n      events:\n"
	for i := range 19 {
		y += "        - {name: Event " + strconv.Itoa(i) + ", properties: {type: object, required: [a], properties: {a: {type: string}}}}\n"
	}
	y += `        - name: Order Completed
          properties:
            type: object
            required: [orderId, total, currency]
            properties:
              orderId: {type: string}
              total: {type: number, minimum: 0}
              currency: {type: string, enum: [USD, EUR]}
              products: {type: array, items: {type: object, required: [sku], properties: {sku: {type: string}, price: {type: number}, quantity: {type: integer}}}}
`
	step, rec := benchStep(b, 1)
	step.Config = planConfig{testConfig{mustConfig(b, y)}}
	out := Deliveries{Records: make([]*kgo.Record, 0, 1), DestinationIDs: make([]string, 0, 1)}
	if _, o, err := step.Route(rec, out); o != Routed || err != nil {
		b.Fatal(o, err)
	}
	b.SetBytes(int64(len(rec.Value)))
	b.ReportAllocs()
	for b.Loop() {
		out, _, _ = step.Route(rec, out.Reset())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// TestRoutePlanCommonChecksTheCall: the common schema checks the call as sent, not the
// delivered body (which adds "version"); a call that violates it is blocked with
// commonTrackEventOnViolations BLOCK.
func TestRoutePlanCommonChecksTheCall(t *testing.T) {
	cfg := mustConfig(t, `
sources:
  - {id: web, writeKey: wk, trackingPlan: {planId: p, commonTrackEventOnViolations: BLOCK}}
trackingPlans:
  - id: p
    rules:
      common: {not: {required: [version]}, required: [userId]}
      events: [{name: E}]
destinations:
  - {id: hooks, type: webhooks, sources: [web], settings: {webhooks: [{url: "https://a.example.com/hook"}]}}
`)
	step := &Step{DeliveriesTopic: "out", Config: planConfig{testConfig{cfg}}, FirstAttemptAt: []byte("x")}
	if _, o, err := step.Route(eventRecord(t, "web", `{"type":"track","event":"E","userId":"u","messageId":"c1"}`), Deliveries{}); o != Routed {
		t.Fatalf("a call that keeps the common schema: %s %v", o, err)
	}
	if _, o, err := step.Route(eventRecord(t, "web", `{"type":"track","event":"E","anonymousId":"a","messageId":"c2"}`), Deliveries{}); o != BlockedByPlan {
		t.Fatalf("a call without userId: %s %v, want blocked", o, err)
	}
}
