package devstack_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/devstack"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestEndToEndTrackingPlan runs the whole stack (as make run does) with a source on a tracking
// plan (docs/routing.md#tracking-plans): a Segment call with a violation comes out as a webhook
// with context.violations, its Violation Generated call comes out of the violations source's
// destination, and an unplanned event is blocked.
func TestEndToEndTrackingPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	st, rc := stackWithConfig(t, func(url string) string {
		return `sources:
  - id: web
    writeKey: wk_e2e
    trackingPlan: {planId: shop, allowUnplannedTrackEvents: false, forwardingViolationsTo: violations}
  - {id: violations, writeKey: wk_violations}
trackingPlans:
  - id: shop
    name: Shop
    rules:
      events:
        - name: Order Completed
          properties: {type: object, required: [total], properties: {total: {type: number}}}
destinations:
  - {id: hooks, type: webhooks, sources: [web], settings: {webhooks: [{url: "` + url + `/segment"}]}}
  - {id: violation-hooks, type: webhooks, sources: [violations], settings: {webhooks: [{url: "` + url + `/violations"}]}}
`
	})
	post(t, st, "/v1/track", `{"userId":"u1","event":"Order Completed","properties":{"total":"12"},"messageId":"e2e-bad"}`)
	post(t, st, "/v1/track", `{"userId":"u1","event":"Not Planned","messageId":"e2e-unplanned"}`)
	rc.wait(t, 2)
	time.Sleep(500 * time.Millisecond)
	reqs, bodies := rc.wait(t, 2)
	if len(reqs) != 2 {
		t.Fatalf("%d webhooks, want 2 (the unplanned event is blocked)", len(reqs))
	}
	for i, r := range reqs {
		var m struct {
			Event      string         `json:"event"`
			MessageID  string         `json:"messageId"`
			Properties map[string]any `json:"properties"`
			Context    struct {
				Violations []schemas.Violation `json:"violations"`
			} `json:"context"`
		}
		if err := json.Unmarshal(bodies[i], &m); err != nil {
			t.Fatal(err)
		}
		switch r.URL.Path {
		case "/segment":
			want := []schemas.Violation{{Type: "Invalid Type", Field: "properties.total", Description: "properties.total must be number, got string"}}
			if m.MessageID != "e2e-bad" || !slices.Equal(m.Context.Violations, want) {
				t.Errorf("/segment got %s", bodies[i])
			}
		case "/violations":
			if m.Event != "Violation Generated" || m.Properties["eventMessageID"] != "e2e-bad" || m.Properties["violationType"] != "Invalid Type" || m.Properties["trackingPlanName"] != "Shop" {
				t.Errorf("/violations got %s", bodies[i])
			}
		default:
			t.Errorf("a webhook to %s: %s", r.URL.Path, bodies[i])
		}
	}
}

// stackWithConfig starts the whole stack (as make run does) with the config file config(url),
// url being the test's webhook receiver, and returns the stack and the receiver.
func stackWithConfig(t *testing.T, config func(url string) string) (*devstack.Stack, *hook) {
	t.Helper()
	rc := &hook{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	st := startStack(t, srv.URL, func(c *devstack.Config) {
		if err := os.WriteFile(c.ConfigFile, []byte(config(srv.URL)), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	return st, rc
}
