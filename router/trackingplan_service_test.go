package router_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/router"
	"github.com/tributary-cdp/tributary/schemas"
)

const planServiceYAML = `
sources:
  - id: web
    writeKey: wk_web
    trackingPlan:
      planId: shop
      allowUnplannedTrackEvents: false
      forwardingViolationsTo: violations
      forwardingBlockedEventsTo: quarantine
  - {id: violations, writeKey: wk_v}
  - {id: quarantine, writeKey: wk_q}
trackingPlans:
  - id: shop
    rules:
      events:
        - name: Order Completed
          properties: {type: object, required: [total], properties: {total: {type: number}}}
destinations:
  - {id: shop-hooks, type: webhooks, sources: [web], settings: {webhooks: [{url: "https://a.example.com/hook"}]}}
  - {id: violation-hooks, type: webhooks, sources: [violations], settings: {webhooks: [{url: "https://v.example.com/hook"}]}}
  - {id: quarantine-hooks, type: webhooks, sources: [quarantine], settings: {webhooks: [{url: "https://q.example.com/hook"}]}}
`

// TestRouterForwardsByTrackingPlan runs the router on the embedded broker, in both delivery
// modes: a call with a violation is delivered with context.violations and its Violation
// Generated call is written to tracking.events for the violations source, then routed to that
// source's destination; an unplanned call is blocked and forwarded to the quarantine source,
// then delivered there. Each forwarded record is written once, in the routing transaction
// (exactly once), and routed once.
func TestRouterForwardsByTrackingPlan(t *testing.T) {
	for _, eos := range []bool{true, false} {
		name := "at-least-once"
		if eos {
			name = "exactly-once"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testRouterForwardsByTrackingPlan(t, eos) })
		})
	}
}

func testRouterForwardsByTrackingPlan(t *testing.T, exactlyOnce bool) {
	h := newVirtualHarness(t, planServiceYAML)
	reg, _ := h.runRouter(func(c *router.Config) { c.ExactlyOnce = exactlyOnce })
	h.produce(eventRecord(t, "web", `{"type":"track","event":"Order Completed","userId":"u1","messageId":"m1","properties":{"total":"12"}}`),
		eventRecord(t, "web", `{"type":"track","event":"Nope","userId":"u2","messageId":"m2"}`))
	got := map[string]string{} // destination → body
	var dests []string
	for _, r := range h.deliveries().waitFor(3, 15*time.Second) {
		d := hdr(r, schemas.HeaderDestinationID)
		dests = append(dests, d)
		got[d] = string(r.Value)
	}
	slices.Sort(dests)
	if want := []string{"quarantine-hooks", "shop-hooks", "violation-hooks"}; !slices.Equal(dests, want) {
		t.Fatalf("deliveries to %v, want %v", dests, want)
	}
	var shop struct {
		Context struct {
			Violations []schemas.Violation `json:"violations"`
		} `json:"context"`
	}
	if err := json.Unmarshal([]byte(got["shop-hooks"]), &shop); err != nil {
		t.Fatal(err)
	}
	if want := []schemas.Violation{{Type: "Invalid Type", Field: "properties.total", Description: "properties.total must be number, got string"}}; !slices.Equal(shop.Context.Violations, want) {
		t.Errorf("shop-hooks body %s: want violations %+v", got["shop-hooks"], want)
	}
	var vio struct {
		Event      string            `json:"event"`
		MessageID  string            `json:"messageId"`
		Properties map[string]string `json:"properties"`
	}
	if err := json.Unmarshal([]byte(got["violation-hooks"]), &vio); err != nil {
		t.Fatal(err)
	}
	if vio.Event != "Violation Generated" || vio.MessageID != "violation-m1-0" || vio.Properties["eventMessageID"] != "m1" ||
		vio.Properties["violationField"] != "properties.total" || vio.Properties["trackingPlanID"] != "shop" {
		t.Errorf("violation-hooks body %s", got["violation-hooks"])
	}
	var q struct {
		Event     string `json:"event"`
		MessageID string `json:"messageId"`
	}
	if err := json.Unmarshal([]byte(got["quarantine-hooks"]), &q); err != nil || q.Event != "Nope" || q.MessageID != "m2" {
		t.Errorf("quarantine-hooks body %s", got["quarantine-hooks"])
	}
	events := h.env.Reader(schemas.TopicEvents)
	events.Settle = settle
	forwarded := 0
	for _, r := range events.WaitFor(4, 15*time.Second) {
		if from := hdr(r, schemas.HeaderForwardedFrom); from != "" {
			forwarded++
			if from != "web" {
				t.Errorf("forwarded-from %q", from)
			}
		}
	}
	if forwarded != 2 {
		t.Errorf("%d forwarded records on tracking.events, want 2", forwarded)
	}
	if n := counter(t, reg, "tributary_router_forwarded_records_total"); n != 2 {
		t.Errorf("tributary_router_forwarded_records_total = %v, want 2", n)
	}
}

// TestRouterTrackingPlanSealed: a sealed call (docs/security.md#crypto-shredding) is checked
// opened; its edited body (context.violations) is delivered sealed with the call's key, and a
// blocked sealed call is forwarded sealed, with its key, and delivered so to the quarantine
// source's destination: nothing of the user in clear anywhere.
func TestRouterTrackingPlanSealed(t *testing.T) {
	h := newHarness(t, planServiceYAML)
	keys := h.env.Keyring()
	h.runRouter(nil)
	const email = "planted.jane@example.com"
	bad := eventRecord(t, "web", `{"type":"track","event":"Order Completed","userId":"jane","messageId":"s1","properties":{"total":"12","email":"`+email+`"}}`)
	blocked := eventRecord(t, "web", `{"type":"track","event":"Nope","userId":"jane","messageId":"s2","properties":{"email":"`+email+`"}}`)
	h.env.Seal(keys, bad)
	h.env.Seal(keys, blocked)
	h.produce(bad, blocked)
	got := map[string]*kgo.Record{}
	for _, r := range h.deliveries().waitFor(3, 15*time.Second) {
		got[hdr(r, schemas.HeaderDestinationID)] = r
	}
	for _, d := range []string{"shop-hooks", "quarantine-hooks"} {
		r := got[d]
		if r == nil {
			t.Fatalf("no delivery to %s: %v", d, got)
		}
		if bytes.Contains(r.Value, []byte(email)) || !bytes.Equal(shred.KeyOf(r), shred.KeyOf(bad)) {
			t.Fatalf("%s: delivery not sealed with the call's key", d)
		}
		body, err := keys.Open(r)
		if err != nil || !bytes.Contains(body, []byte(email)) {
			t.Fatalf("%s: opens to %q, %v", d, body, err)
		}
		if d == "shop-hooks" && !bytes.Contains(body, []byte(`"violations":[{"type":"Invalid Type","field":"properties.total"`)) {
			t.Errorf("shop-hooks body %s: no context.violations", body)
		}
	}
	if r := got["violation-hooks"]; r == nil || bytes.Contains(r.Value, []byte(email)) {
		t.Errorf("violation-hooks: %v", r)
	}
}
