package console_test

import (
	"net/http"
	"net/url"
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

// TestUIFiltersTester: the destination's Filters tab has the filters' tester; a message is
// answered with which filter decided what, as a table, and the body; malformed JSON is a 400
// with the error next to the box.
func TestUIFiltersTester(t *testing.T) {
	h := destHarness(t)
	c := newOASClient(t, h)
	c.ok(201, "POST", "/v1/destinations", map[string]any{"id": "shop", "type": "webhooks", "sources": []string{"web"},
		"settings": map[string]any{"webhooks": []any{map[string]any{"url": "https://hooks.example.com/a"}}},
		"filters": []any{map[string]any{"name": "small orders", "if": "properties.total < 100", "action": "drop"},
			map[string]any{"name": "no ip", "action": "dropProperties", "properties": []any{"context.ip"}}}})
	b := newDestBrowser(t, h)
	expectDestPage(t, b.get("/destinations/shop?tab=filters"), http.StatusOK, "Test the filters", "destination's 2 filters", `name="message"`)
	expectDestPage(t, b.post("/destinations/shop/filters/test", url.Values{"message": {`{"type":"track","event":"A","properties":{"total":5}}`}}),
		http.StatusOK, `<span class="badge bad">dropped</span> by <strong>small orders</strong>`, "<td>small orders</td><td>drop</td><td>matched</td><td>dropped</td>",
		"<td>no ip</td><td>dropProperties</td><td>matched</td><td>skipped</td>")
	expectDestPage(t, b.post("/destinations/shop/filters/test", url.Values{"message": {`{"type":"track","event":"A","properties":{"total":500},"context":{"ip":"203.0.113.9","locale":"fr"}}`}}),
		http.StatusOK, `<span class="badge ok">delivered</span>`, "<td>propertiesDropped</td>", "&#34;locale&#34;: &#34;fr&#34;")
	p := b.post("/destinations/shop/filters/test", url.Values{"message": {`{"type":`}})
	expectDestPage(t, p, http.StatusBadRequest, `<p id="filters-error" class="field-error" role="alert">The message is not valid JSON`)
	if strings.Contains(p.Body, "203.0.113.9") {
		t.Fatal("the previous answer is shown with an error")
	}
	// Signed in and with the session's CSRF token only, as every form.
	expectDestPage(t, b.send(http.MethodPost, "/destinations/shop/filters/test", url.Values{"_csrf": {"forged"}, "message": {"{}"}}), http.StatusForbidden)
	resp, err := http.PostForm(h.srv.URL+"/destinations/shop/filters/test", url.Values{"message": {"{}"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a session: %d", resp.StatusCode)
	}
}
