package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestSourceViolations (docs/console.md#violations): the console checks the calls of a source
// with a tracking plan as the router does, and its API and the source's page show the
// violations by event, field and type, with the violating messages; a call that keeps the plan
// counts nothing. Saving the source's form keeps its plan and options.
func TestSourceViolations(t *testing.T) {
	h := newHarness(t, nil)
	b := h.signInFollowing(t)
	expect(t, h.do(http.MethodPost, "/v1/tracking-plans", map[string]any{"id": "shop", "rules": map[string]any{"events": []any{
		map[string]any{"name": "Order Completed", "properties": map[string]any{"type": "object", "required": []string{"total"},
			"properties": map[string]any{"total": map[string]any{"type": "number"}}}}}}}), http.StatusCreated)
	expect(t, h.do(http.MethodPost, "/v1/sources", map[string]any{"id": "shop", "trackingPlan": map[string]any{"planId": "shop", "allowUnplannedTrackEvents": false}}), http.StatusCreated)
	rec := func(msg, props string) *kgo.Record {
		now := schemas.FormatTimestamp(time.Now())
		return &kgo.Record{Topic: schemas.TopicEvents, Key: []byte("u1"),
			Value:   []byte(`{"type":"track","messageId":"` + msg + `","userId":"u1","event":"Order Completed","timestamp":"` + now + `","receivedAt":"` + now + `","properties":` + props + `}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("shop")}, {Key: schemas.HeaderMessageID, Value: []byte(msg)}, {Key: schemas.HeaderType, Value: []byte("track")}}}
	}
	h.env.Produce(rec("m-ok", `{"total":1}`), rec("m-bad-1", `{"total":"1"}`), rec("m-bad-2", `{}`))
	var data map[string]any
	servicetest.Eventually(t, 10*time.Second, "two violations", func() bool {
		data = h.do(http.MethodGet, "/v1/sources/shop/violations", nil).JSON(t)["data"].(map[string]any)
		return data["total"] == 2.0
	})
	counts := data["counts"].([]any)
	if len(counts) != 2 {
		t.Fatalf("counts %v", counts)
	}
	var rows []string
	for _, c := range counts {
		m := c.(map[string]any)
		rows = append(rows, m["event"].(string)+"|"+m["field"].(string)+"|"+m["type"].(string))
	}
	if got := strings.Join(rows, ","); got != "Order Completed|properties.total|Invalid Type,Order Completed|properties.total|Required" {
		t.Errorf("rows %s", got)
	}
	if s := data["samples"].([]any); len(s) != 2 {
		t.Errorf("samples %v", s)
	}
	b.get("/sources/shop").contains(t, http.StatusOK, "Tracking plan violations", "2 violations since",
		"<code>properties.total</code>", "properties.total must be number, got string (Invalid Type)", "<code>m-bad-2</code>")
	web := b.get("/sources/web")
	web.contains(t, http.StatusOK, "Live debugger")
	web.lacks(t, "Tracking plan violations") // no plan, no section

	// The form sets the blocked events and keeps the plan.
	b.get("/sources/shop")
	b.post("/sources/shop", url.Values{"name": {"Shop"}, "blocked": {"Debug"}}).contains(t, http.StatusOK, "Source shop saved.")
	src := h.do(http.MethodGet, "/v1/sources/shop", nil).JSON(t)["data"].(map[string]any)
	tp := src["trackingPlan"].(map[string]any)
	if tp["planId"] != "shop" || tp["allowUnplannedTrackEvents"] != false || len(tp["blockedEvents"].([]any)) != 1 {
		t.Errorf("trackingPlan after the form %v", tp)
	}
	b.get("/sources/shop")
	b.post("/sources/shop", url.Values{"name": {"Shop"}, "blocked": {""}}).contains(t, http.StatusOK, "Source shop saved.")
	src = h.do(http.MethodGet, "/v1/sources/shop", nil).JSON(t)["data"].(map[string]any)
	if tp, _ := src["trackingPlan"].(map[string]any); tp["planId"] != "shop" || tp["blockedEvents"] != nil {
		t.Errorf("trackingPlan after the form with no blocked event %v, want the plan kept", src["trackingPlan"])
	}
}

// TestConfigExportKeepsTrackingPlans: a tracking plan made through the API is in the exported
// config file, schemas included (strings that look like numbers stay strings), and the export
// re-applies as it is: nothing changes.
func TestConfigExportKeepsTrackingPlans(t *testing.T) {
	h := newHarness(t, nil)
	expect(t, h.do(http.MethodPost, "/v1/tracking-plans", map[string]any{"id": "shop", "name": "Shop", "rules": map[string]any{
		"common": map[string]any{"type": "object"},
		"events": []any{map[string]any{"name": "Order Completed", "properties": map[string]any{"type": "object",
			"properties": map[string]any{"code": map[string]any{"enum": []any{"123", "true", "2024-01-01", 7, 1.5, nil}}}}}}}}), http.StatusCreated)
	exp := h.do(http.MethodGet, "/v1/config", nil)
	expect(t, exp, http.StatusOK)
	cfg, err := schemas.ParseConfig(exp.Body, schemas.ConfigFormatYAML)
	if err != nil {
		t.Fatalf("the export does not parse: %v\n%s", err, exp.Body)
	}
	if len(cfg.TrackingPlans) != 1 || !strings.Contains(string(cfg.TrackingPlans[0].Rules.Events[0].Properties), `["123","true","2024-01-01",7,1.5,null]`) {
		t.Fatalf("exported plans %+v\n%s", cfg.TrackingPlans, exp.Body)
	}
	same := h.do(http.MethodPut, "/v1/config", string(exp.Body), "Content-Type", "application/yaml")
	expect(t, same, http.StatusOK)
	if ch := same.Data(t)["changes"].([]any); len(ch) != 0 {
		t.Fatalf("re-applying the export changes %v", ch)
	}
}

// TestConfigIdentityRulesImportAndExport: the config's identity section goes in through the
// console's import, comes out of its export as written, and the export imported again changes
// nothing; an import without it removes it (the console managed it).
func TestConfigIdentityRulesImportAndExport(t *testing.T) {
	h := newHarness(t, nil)
	const section = `identity:
  blocked: ['(?i)^bot-', '^[0-]*$']
  limits: {user_id: 1, email: 2, "*": 4, window: 720h}
  priority: [user_id, email, ios.idfa]
  maxMerges: 10
`
	put := h.do(http.MethodPut, "/v1/config", section, "Content-Type", "application/yaml")
	expect(t, put, http.StatusOK)
	want := &schemas.IdentityRules{Blocked: &[]string{`(?i)^bot-`, `^[0-]*$`},
		Limits:   &schemas.IdentityLimits{PerType: map[string]int{"user_id": 1, "email": 2, "*": 4}, Window: schemas.Duration(720 * time.Hour)},
		Priority: []string{"user_id", "email", "ios.idfa"}, MaxMerges: 10}
	exp := h.do(http.MethodGet, "/v1/config", nil)
	expect(t, exp, http.StatusOK)
	cfg, err := schemas.ParseConfig(exp.Body, schemas.ConfigFormatYAML)
	if err != nil {
		t.Fatalf("the export does not parse: %v\n%s", err, exp.Body)
	}
	if !reflect.DeepEqual(cfg.Identity, want) {
		t.Fatalf("exported identity %+v, want %+v\n%s", cfg.Identity, want, exp.Body)
	}
	same := h.do(http.MethodPut, "/v1/config", string(exp.Body), "Content-Type", "application/yaml")
	expect(t, same, http.StatusOK)
	if ch := same.Data(t)["changes"].([]any); len(ch) != 0 {
		t.Fatalf("re-applying the export changes %v", ch)
	}
	gone := h.do(http.MethodPut, "/v1/config", "sources: []\n", "Content-Type", "application/yaml")
	expect(t, gone, http.StatusOK)
	if ch := fmt.Sprint(gone.Data(t)["changes"]); !strings.Contains(ch, "identity/rules") || !strings.Contains(ch, "delete") {
		t.Fatalf("an import without the section: changes %s, want identity/rules deleted", ch)
	}
}
