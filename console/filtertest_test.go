package console_test

import (
	"reflect"
	"strings"
	"testing"
)

// TestDestinationFiltersAPI: a destination's filters round-trip through the API (create, read,
// patch), a filter whose FQL does not compile is refused with its column, and the filters'
// tester says which filter decided what and the body the destination would get; a malformed
// message is a 400.
func TestDestinationFiltersAPI(t *testing.T) {
	h := newHarness(t, nil)
	c := newOASClient(t, h)
	filters := []any{
		map[string]any{"name": "big orders only", "if": "!(event = 'Order Completed' and properties.total > 100)", "action": "drop"},
		map[string]any{"name": "no pii", "action": "dropProperties", "properties": []any{"context.ip", "traits.email"}},
		map[string]any{"name": "some", "if": "type = 'page'", "action": "sample", "percent": 0.0, "sources": []any{"web"}},
	}
	c.ok(201, "POST", "/v1/destinations", map[string]any{"id": "shop", "type": "webhooks", "sources": []string{"web"},
		"settings": map[string]any{"webhooks": []any{map[string]any{"url": "https://hooks.example.com/a"}}}, "filters": filters})
	got := c.ok(200, "GET", "/v1/destinations/shop", nil).Data(t)["filters"]
	if !reflect.DeepEqual(got, filters) {
		t.Fatalf("filters read back %v, want %v", got, filters)
	}
	r := c.ok(400, "PATCH", "/v1/destinations/shop", map[string]any{"filters": []any{map[string]any{"name": "x", "if": "event = ", "action": "drop"}}})
	if msg := string(r.Body); !strings.Contains(msg, "column 9") || !strings.Contains(msg, `filter \"x\" of destination \"shop\"`) {
		t.Fatalf("bad FQL: %s", r.Body)
	}

	test := func(msg map[string]any) map[string]any {
		t.Helper()
		return c.ok(200, "POST", "/v1/destinations/shop/filters/test", map[string]any{"message": msg}).Data(t)
	}
	// A big order goes, without the PII fields.
	out := test(map[string]any{"type": "track", "event": "Order Completed", "messageId": "m1", "properties": map[string]any{"total": 150},
		"context": map[string]any{"ip": "203.0.113.9", "locale": "fr"}})
	body, _ := out["body"].(map[string]any)
	if out["delivered"] != true || out["decidedBy"] != "" || body == nil || body["version"] != 1.0 ||
		!reflect.DeepEqual(body["context"], map[string]any{"locale": "fr"}) {
		t.Fatalf("big order: %v", out)
	}
	steps := out["steps"].([]any)
	if len(steps) != 3 || steps[0].(map[string]any)["filter"] != "some" || steps[1].(map[string]any)["result"] != "skipped" ||
		steps[2].(map[string]any)["result"] != "propertiesDropped" {
		t.Fatalf("steps %v", steps)
	}
	// A small one is dropped by the drop filter; a page sampled out first.
	if out = test(map[string]any{"type": "track", "event": "Order Completed", "properties": map[string]any{"total": 5}}); out["delivered"] != false || out["decidedBy"] != "big orders only" || out["body"] != nil {
		t.Fatalf("small order: %v", out)
	}
	if out = test(map[string]any{"type": "page", "name": "Home"}); out["decidedBy"] != "some" || out["steps"].([]any)[0].(map[string]any)["result"] != "sampledOut" {
		t.Fatalf("page: %v", out)
	}
	// Bad requests.
	c.bad(400, "POST", "/v1/destinations/shop/filters/test", `{"message": {"type": "track"`) // malformed JSON
	c.bad(400, "POST", "/v1/destinations/shop/filters/test", map[string]any{"message": "not an object"})
	c.ok(400, "POST", "/v1/destinations/shop/filters/test", map[string]any{"message": map[string]any{"type": "track"}, "sourceId": "nope"})
}
