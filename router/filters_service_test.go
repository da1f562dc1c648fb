package router_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/router"
	"github.com/tributary-cdp/tributary/schemas"
)

const filtersServiceYAML = `
sources:
  - {id: web, writeKey: wk_web}
destinations:
  - id: orders
    type: webhooks
    sources: [web]
    settings: {webhooks: [{url: "https://orders.example.com/hook"}]}
    filters:
      - {name: big orders only, if: "!(event = 'Order Completed' and properties.total > 100)", action: drop}
      - {name: no pii, action: dropProperties, properties: [traits.email, context.ip]}
  - id: all
    type: webhooks
    sources: [web]
    settings: {webhooks: [{url: "https://all.example.com/hook"}]}
`

// TestRouterDestinationFilters: through the router service on the embedded broker, with
// sealed messages: a destination's drop filter keeps what it should (a filtered record and
// tributary_router_filtered_total for the rest), its drop-properties filter gives it a body
// of its own without the listed fields, sealed with the message's key like the shared body
// the destination without filters gets whole.
func TestRouterDestinationFilters(t *testing.T) {
	h := newHarness(t, filtersServiceYAML)
	keys := h.env.Keyring()
	reg, _ := h.runRouter(func(c *router.Config) { c.FilteredRecords = true })
	out := h.deliveries()
	attempts := h.env.Reader(schemas.TopicAttempts)
	const email = "planted.jane@example.com"
	big := eventRecord(t, "web", `{"type":"track","event":"Order Completed","userId":"jane","messageId":"m1","properties":{"total":150},"traits":{"email":"`+email+`"},"context":{"ip":"203.0.113.9"}}`)
	small := eventRecord(t, "web", `{"type":"track","event":"Order Completed","userId":"jane","messageId":"m2","properties":{"total":50}}`)
	h.env.Seal(keys, big, small)
	h.produce(big, small)
	got := out.waitFor(3, 15*time.Second) // m1 → orders, all; m2 → all
	if len(got) != 3 {
		t.Fatalf("%d deliveries, want 3", len(got))
	}
	seen := map[string]bool{}
	for _, r := range got {
		d, m := hdr(r, schemas.HeaderDestinationID), hdr(r, schemas.HeaderMessageID)
		seen[d+"/"+m] = true
		if !bytes.Equal(shred.KeyOf(r), shred.KeyOf(big)) || bytes.Contains(r.Value, []byte(email)) {
			t.Fatalf("%s/%s: not sealed with the message's key", d, m)
		}
		body, err := keys.Open(r)
		if err != nil {
			t.Fatal(err)
		}
		pii := bytes.Contains(body, []byte(email)) || bytes.Contains(body, []byte("203.0.113.9"))
		if d == "orders" && (pii || !bytes.Contains(body, []byte(`"total":150`)) || !bytes.Contains(body, []byte(`"version":1`))) {
			t.Fatalf("orders got %s", body)
		}
		if d == "all" && m == "m1" && !pii {
			t.Fatalf("the destination without filters lost fields: %s", body)
		}
	}
	if !seen["orders/m1"] || !seen["all/m1"] || !seen["all/m2"] {
		t.Fatalf("deliveries %v", seen)
	}
	recs := attempts.WaitFor(1, 15*time.Second)
	a, err := schemas.DecodeAttemptRecord(recs[0].Value)
	if err != nil || a.MessageID != "m2" || a.DestinationID != "orders" || a.Reason != schemas.FilterDestinationFilter {
		t.Fatalf("filtered record %s: %+v %v", recs[0].Value, a, err)
	}
	if n := counter(t, reg, "tributary_router_filtered_total", "destination", "orders", "filter", "big orders only"); n != 1 {
		t.Fatalf("tributary_router_filtered_total = %v, want 1", n)
	}
}
