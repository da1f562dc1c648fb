package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestSourceLifecycle: create (the write key once), read (never the key), rename, tracking
// plan, rotate with an overlap (both keys resolve to the source until the overlap ends), delete.
func TestSourceLifecycle(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do(http.MethodPost, "/v1/sources", map[string]any{"id": "app", "name": "App"})
	expect(t, r, http.StatusCreated)
	created := r.Data(t)
	key, _ := created["writeKey"].(string)
	if !strings.HasPrefix(key, "wk_") || len(key) < 30 {
		t.Fatalf("write key %q", key)
	}
	if created["origin"] != "console" || r.Header.Get("ETag") == "" {
		t.Fatalf("created %v, ETag %q", created, r.Header.Get("ETag"))
	}
	snap := h.env.Store.Snapshot()
	if src, ok := snap.SourceByKeyHash(schemas.HashWriteKey(key)); !ok || src.ID != "app" {
		t.Fatal("the new write key does not resolve to the source in the config store")
	}
	get := h.do(http.MethodGet, "/v1/sources/app", nil)
	expect(t, get, http.StatusOK)
	if strings.Contains(string(get.Body), key) || strings.Contains(string(get.Body), "writeKey") {
		t.Fatalf("a read shows the write key: %s", get.Body)
	}
	if get.Header.Get("ETag") != r.Header.Get("ETag") {
		t.Fatalf("ETag %s after create, %s on read", r.Header.Get("ETag"), get.Header.Get("ETag"))
	}

	upd := h.do(http.MethodPatch, "/v1/sources/app", map[string]any{"name": "Mobile app", "trackingPlan": map[string]any{"blockedEvents": []string{"Debug"}}}, "If-Match", get.Header.Get("ETag"))
	expect(t, upd, http.StatusOK)
	d := upd.Data(t)
	if d["name"] != "Mobile app" || d["trackingPlan"] == nil {
		t.Fatalf("updated: %s", upd.Body)
	}
	if src, _ := h.env.Store.Snapshot().SourceByID("app"); src.TrackingPlan == nil || src.TrackingPlan.BlockedEvents[0] != "Debug" || src.KeyHash() != schemas.HashWriteKey(key) {
		t.Fatalf("store has %+v", src)
	}
	expectError(t, h.do(http.MethodPatch, "/v1/sources/app", map[string]any{"writeKey": "mine"}), http.StatusBadRequest,
		"invalid", "writeKey: change the write key with POST /v1/sources/app/rotate-key", "writeKey")

	rot := h.do(http.MethodPost, "/v1/sources/app/rotate-key", map[string]any{"overlap": "1h"})
	expect(t, rot, http.StatusOK)
	newKey, _ := rot.Data(t)["writeKey"].(string)
	if newKey == "" || newKey == key || rot.Data(t)["previousWriteKeyExpiresAt"] == nil {
		t.Fatalf("rotation: %s", rot.Body)
	}
	snap = h.env.Store.Snapshot()
	for _, k := range []string{key, newKey} {
		if src, ok := snap.SourceByKeyHash(schemas.HashWriteKey(k)); !ok || src.ID != "app" {
			t.Fatalf("during the overlap, key %d does not resolve", len(k))
		}
	}
	expect(t, h.do(http.MethodPost, "/v1/sources/app/rotate-key", map[string]any{"overlap": "0s"}), http.StatusOK)
	snap = h.env.Store.Snapshot()
	for _, k := range []string{key, newKey} {
		if _, ok := snap.SourceByKeyHash(schemas.HashWriteKey(k)); ok {
			t.Fatal("a rotation without overlap left an old key working")
		}
	}
	expectError(t, h.do(http.MethodPost, "/v1/sources/app/rotate-key", map[string]any{"overlap": "soon"}), http.StatusBadRequest,
		"invalid", `overlap: "soon" is not a duration such as "24h"`, "overlap")
	expectError(t, h.do(http.MethodPost, "/v1/sources/app/rotate-key", map[string]any{"overlap": "9000h"}), http.StatusBadRequest,
		"invalid", "overlap: must be between 0s and 720h, got 9000h", "overlap")

	// Every list, read and export after the fact: no key anywhere but in the answers that
	// hand it out; none in the log.
	h.do(http.MethodGet, "/v1/sources", nil)
	h.do(http.MethodGet, "/v1/config", nil)
	h.secretsNowhere(t, []string{key, newKey}, "POST /v1/sources", "POST /v1/sources/app/rotate-key")
	expect(t, h.do(http.MethodDelete, "/v1/sources/app", nil), http.StatusNoContent)
	expectError(t, h.do(http.MethodGet, "/v1/sources/app", nil), http.StatusNotFound, "not_found", `no source "app"`, "")
	if _, ok := h.env.Store.Snapshot().SourceByID("app"); ok {
		t.Fatal("deleted source still in the store")
	}
}

// TestValidationErrorsNameTheField: the config parser's own messages, relative to the object.
func TestValidationErrorsNameTheField(t *testing.T) {
	h := newHarness(t, nil)
	hooks := func(n int) []map[string]any {
		var out []map[string]any
		for i := range n {
			out = append(out, map[string]any{"url": "https://hooks.example.com/" + strconv.Itoa(i)})
		}
		return out
	}
	for _, tt := range []struct {
		name           string
		path           string
		body           any
		message, field string
	}{
		{"six webhooks", "/v1/destinations", map[string]any{"id": "d", "type": "webhooks", "sources": []string{"web"}, "settings": map[string]any{"webhooks": hooks(6)}},
			"settings.webhooks[5]: at most 5 webhooks are allowed, got 6", "settings.webhooks[5]"},
		{"no webhook", "/v1/destinations", map[string]any{"id": "d", "type": "webhooks", "sources": []string{"web"}, "settings": map[string]any{"webhooks": hooks(0)}},
			"settings.webhooks: at least 1 webhook is required", "settings.webhooks"},
		{"unknown source", "/v1/destinations", map[string]any{"id": "d", "type": "webhooks", "sources": []string{"nope"}, "settings": map[string]any{"webhooks": hooks(1)}},
			`sources[0]: unknown source "nope"`, "sources[0]"},
		{"unknown field", "/v1/destinations", map[string]any{"id": "d", "type": "webhooks", "colour": "red", "sources": []string{"web"}, "settings": map[string]any{"webhooks": hooks(1)}},
			`colour: unknown field "colour"`, "colour"},
		{"bad id", "/v1/sources", map[string]any{"id": "Not OK"}, `id: "Not OK" must contain only a-z, 0-9, '-' and '_'`, "id"},
		{"write key given", "/v1/sources", map[string]any{"id": "x", "writeKey": "wk_mine_0123456789"}, "writeKey: the console generates the write key: leave it out", "writeKey"},
		{"not an object", "/v1/sources", "[1]", "the body must be one JSON object", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(http.MethodPost, tt.path, tt.body)
			expect(t, r, http.StatusBadRequest)
			m := r.JSON(t)
			if m["code"] != "invalid" || !strings.HasSuffix(m["message"].(string), tt.message) || (tt.field != "" && m["field"] != tt.field) {
				t.Fatalf("got %s, want message ending %q, field %q", r.Body, tt.message, tt.field)
			}
		})
	}
	expect(t, h.do(http.MethodPost, "/v1/sources", map[string]any{"id": "web"}), http.StatusConflict)
}

// TestDestinationUpdates: merge-patch updates, versions and If-Match, connect and disconnect,
// a secret that is written but never read, file-managed objects, dependent objects.
func TestDestinationUpdates(t *testing.T) {
	h := newHarness(t, nil)
	const secret = "s3cret-never-shown-0123"
	r := h.do(http.MethodPost, "/v1/destinations", map[string]any{"id": "hooks", "type": "webhooks", "name": "Hooks", "sources": []string{"web"},
		"settings": map[string]any{"webhooks": []map[string]any{{"url": "https://a.example.com/x", "headers": map[string]string{"X-Team": "growth"}}}, "sharedSecret": secret}})
	expect(t, r, http.StatusCreated)
	v1 := r.Header.Get("ETag")
	if st := r.Data(t)["settings"].(map[string]any); st["hasSharedSecret"] != true || st["sharedSecret"] != nil {
		t.Fatalf("settings answered: %v", st)
	}
	// A stale version is refused; the current one is taken.
	up := h.do(http.MethodPatch, "/v1/destinations/hooks", map[string]any{"enabled": false}, "If-Match", v1)
	expect(t, up, http.StatusOK)
	if d, _ := h.env.Store.Snapshot().DestinationByID("hooks"); d.IsEnabled() || d.Settings.SharedSecret != secret || d.Settings.Webhooks[0].Headers["X-Team"] != "growth" {
		t.Fatalf("after disabling: %+v", d)
	}
	v2 := up.Header.Get("ETag")
	stale := h.do(http.MethodPatch, "/v1/destinations/hooks", map[string]any{"enabled": true}, "If-Match", v1)
	expectError(t, stale, http.StatusConflict, "version_mismatch",
		"destination hooks is at version "+strings.Trim(v2, `"`)+", not "+v1+": read it again and re-apply your change", "")
	expect(t, h.do(http.MethodDelete, "/v1/destinations/hooks", nil, "If-Match", v1), http.StatusConflict)

	// Connect a second source, then disconnect the first.
	expect(t, h.do(http.MethodPost, "/v1/sources", map[string]any{"id": "app"}), http.StatusCreated)
	expect(t, h.do(http.MethodPut, "/v1/destinations/hooks/sources/app", nil), http.StatusOK)
	dis := h.do(http.MethodDelete, "/v1/destinations/hooks/sources/web", nil)
	expect(t, dis, http.StatusOK)
	if src := dis.Data(t)["sources"].([]any); len(src) != 1 || src[0] != "app" {
		t.Fatalf("sources %v", src)
	}
	expectError(t, h.do(http.MethodPut, "/v1/destinations/hooks/sources/ghost", nil), http.StatusBadRequest, "invalid", `sources[1]: unknown source "ghost"`, "sources[1]")
	// A source in use cannot go.
	r = h.do(http.MethodDelete, "/v1/sources/app", nil)
	expectError(t, r, http.StatusConflict, "in_use", `source app is in use: destination hooks: sources[0]: unknown source "app"`, "")
	// Removing the secret takes an explicit null.
	r = h.do(http.MethodPatch, "/v1/destinations/hooks", map[string]any{"settings": map[string]any{"sharedSecret": nil}})
	expect(t, r, http.StatusOK)
	if d, _ := h.env.Store.Snapshot().DestinationByID("hooks"); d.Settings.SharedSecret != "" {
		t.Fatal("secret not removed")
	}
	// The file's destination is the file's, unless taken over.
	r = h.do(http.MethodPatch, "/v1/destinations/file-hooks", map[string]any{"name": "Mine"})
	m := r.JSON(t)
	if r.Status != http.StatusConflict || m["code"] != "managed_by_file" {
		t.Fatalf("editing a file's object: %s", r.Body)
	}
	expect(t, h.do(http.MethodPatch, "/v1/destinations/file-hooks?takeOver=true", map[string]any{"name": "Mine"}), http.StatusOK)
	if d, _ := h.env.Store.Snapshot().DestinationByID("file-hooks"); d.Origin != schemas.OriginConsole || d.Name != "Mine" {
		t.Fatalf("after take-over: %+v", d)
	}
	expectError(t, h.do(http.MethodPatch, "/v1/destinations/hooks", map[string]any{"id": "other"}), http.StatusBadRequest, "invalid", "the id cannot change (create a new destination instead)", "id")
	expectError(t, h.do(http.MethodPatch, "/v1/destinations/nope", map[string]any{}), http.StatusNotFound, "not_found", `no destination "nope"`, "")
	// No secret in any answer (the create's included) or log line.
	h.do(http.MethodGet, "/v1/destinations", nil)
	h.do(http.MethodGet, "/v1/config", nil)
	h.secretsNowhere(t, []string{secret})
}

// TestAudiencesAndComputedTraits: create, update the rule, delete; the parser's errors.
func TestAudiencesAndComputedTraits(t *testing.T) {
	h := newHarness(t, nil)
	aud := map[string]any{"id": "buyers", "name": "Buyers", "source": "web", "rule": map[string]any{"event": "Order Completed", "atLeast": 2, "within": "720h"}}
	expect(t, h.do(http.MethodPost, "/v1/audiences", aud), http.StatusCreated)
	r := h.do(http.MethodPatch, "/v1/audiences/buyers", map[string]any{"rule": map[string]any{"all": []any{map[string]any{"event": "Order Completed", "atLeast": 3}, map[string]any{"trait": "plan", "equals": "pro"}}}})
	expect(t, r, http.StatusOK)
	if a, _ := h.env.Store.Snapshot().AudienceByID("buyers"); a == nil || len(a.Rule.All) != 2 {
		t.Fatalf("audience in the store: %+v", a)
	}
	expect(t, h.do(http.MethodPost, "/v1/audiences", map[string]any{"id": "bad", "name": "Bad", "source": "ghost", "rule": map[string]any{"event": "X"}}), http.StatusBadRequest)
	// A trait key another audience has: the new audience's name is wrong, the other is named.
	expectError(t, h.do(http.MethodPost, "/v1/audiences", map[string]any{"id": "b2", "name": "buyers", "source": "web", "rule": map[string]any{"event": "X"}}),
		http.StatusBadRequest, "invalid", `name: "buyers" has the trait key "buyers", as has audience buyers.name "Buyers"`, "name")
	tr := map[string]any{"id": "orders-30d", "name": "Orders 30d", "source": "web", "count": map[string]any{"event": "Order Completed", "within": "720h"}}
	expect(t, h.do(http.MethodPost, "/v1/computed-traits", tr), http.StatusCreated)
	expect(t, h.do(http.MethodGet, "/v1/computed-traits/orders-30d", nil), http.StatusOK)
	list := h.do(http.MethodGet, "/v1/audiences", nil)
	if !strings.Contains(string(list.Body), `"buyers"`) {
		t.Fatalf("list: %s", list.Body)
	}
	expect(t, h.do(http.MethodDelete, "/v1/computed-traits/orders-30d", nil), http.StatusNoContent)
	expect(t, h.do(http.MethodDelete, "/v1/audiences/buyers", nil), http.StatusNoContent)
	if len(h.env.Store.Snapshot().Audiences()) != 0 || len(h.env.Store.Snapshot().ComputedTraits()) != 0 {
		t.Fatal("deleted objects still in the store")
	}
}

// TestConfigExportAndImport: the export re-applies as it is (nothing changes), a changed file
// updates, creates and deletes what the console manages, a dry run writes nothing.
func TestConfigExportAndImport(t *testing.T) { synctest.Test(t, testConfigExportAndImport) }

func testConfigExportAndImport(t *testing.T) {
	h := newVirtualHarness(t, nil)
	const secret = "export-secret-0123456789"
	expect(t, h.do(http.MethodPost, "/v1/destinations", map[string]any{"id": "hooks", "type": "webhooks", "sources": []string{"web"},
		"settings": map[string]any{"webhooks": []map[string]any{{"url": "https://a.example.com/x"}}, "sharedSecret": secret}}), http.StatusCreated)
	exp := h.do(http.MethodGet, "/v1/config", nil)
	expect(t, exp, http.StatusOK)
	yaml := string(exp.Body)
	if strings.Contains(yaml, secret) || strings.Contains(yaml, schemas.HashWriteKey(secret)) || !strings.Contains(yaml, "sharedSecret: hmac-sha256:") || !strings.Contains(yaml, "writeKeyHash: sha256:") {
		t.Fatalf("export:\n%s", yaml)
	}
	if _, err := schemas.ParseConfig(exp.Body, schemas.ConfigFormatYAML); err != nil {
		t.Fatalf("the export does not parse: %v", err)
	}
	same := h.do(http.MethodPut, "/v1/config", yaml, "Content-Type", "application/yaml")
	expect(t, same, http.StatusOK)
	if ch := same.Data(t)["changes"].([]any); len(ch) != 0 {
		t.Fatalf("re-applying the export changes %v", ch)
	}
	changed := strings.Replace(yaml, "https://a.example.com/x", "https://b.example.com/y", 1) + `
audiences:
  - id: buyers
    name: Buyers
    source: web
    rule:
      event: Order Completed
`
	before := h.env.Store.Snapshot().Version()
	dry := h.do(http.MethodPut, "/v1/config?dryRun=true", changed, "Content-Type", "application/yaml")
	expect(t, dry, http.StatusOK)
	if ch := dry.Data(t)["changes"].([]any); len(ch) != 2 || !strings.Contains(string(dry.Body), `"fields":["settings.webhooks[0].url"]`) {
		t.Fatalf("dry run: %s", dry.Body)
	}
	servicetest.Consistently(t, 300*time.Millisecond, "no write of a dry run to the config topic", func() bool {
		return h.env.Store.Snapshot().Version() == before
	})
	expect(t, h.do(http.MethodPut, "/v1/config", changed, "Content-Type", "application/yaml"), http.StatusOK)
	d, _ := h.env.Store.Snapshot().DestinationByID("hooks")
	if d.Settings.Webhooks[0].URL != "https://b.example.com/y" || d.Settings.SharedSecret != secret {
		t.Fatalf("after PUT: %+v (the secret's hash must keep the secret)", d.Settings)
	}
	if _, ok := h.env.Store.Snapshot().AudienceByID("buyers"); !ok {
		t.Fatal("audience not created")
	}
	// Without the destination, the console's destination is deleted; the file's stay.
	without := h.do(http.MethodPut, "/v1/config", `sources:
  - id: web
    name: Web site
    writeKey: wk_test_web_0123456789
destinations:
  - id: file-hooks
    type: webhooks
    name: File hooks
    sources: [web]
    settings:
      webhooks:
        - url: http://127.0.0.1:9/file
`, "Content-Type", "application/yaml")
	expect(t, without, http.StatusOK)
	snap := h.env.Store.Snapshot()
	if _, ok := snap.DestinationByID("hooks"); ok {
		t.Fatalf("console destination not deleted: %s", without.Body)
	}
	if _, ok := snap.DestinationByID("file-hooks"); !ok {
		t.Fatal("the file's destination was deleted")
	}
	// Errors carry the line.
	bad := h.do(http.MethodPut, "/v1/config", "sources:\n  - id: web\n    writeKey: wk_x_0123456789\n    colour: red\n", "Content-Type", "application/yaml")
	expect(t, bad, http.StatusBadRequest)
	if m := bad.JSON(t); !strings.HasPrefix(m["message"].(string), "line 4: sources[0]") {
		t.Fatalf("error: %s", bad.Body)
	}
	ref := regexp.MustCompile(`hmac-sha256:[0-9a-f]{64}`).FindString(yaml)
	foreign := strings.Replace(yaml, ref, "hmac-sha256:"+strings.Repeat("0", 64), 1)
	expectError(t, h.do(http.MethodPut, "/v1/config", foreign, "Content-Type", "application/yaml"), http.StatusBadRequest, "invalid",
		"destinations[1].settings.sharedSecret: refers to a secret this destination does not have (an export from another install, or from before CONSOLE_TOKEN changed?): give the secret itself",
		"destinations[1].settings.sharedSecret")
}

// TestRevisionsAndRotationInTheStore: platform.Snapshot.Revision grows with every write.
func TestRevisionsAndRotationInTheStore(t *testing.T) {
	h := newHarness(t, nil)
	snap := h.env.Store.Snapshot()
	v := snap.Revision(schemas.ConfigKindSource, "web")
	if v == 0 || snap.Revision(schemas.ConfigKindSource, "nope") != 0 {
		t.Fatalf("revision %d", v)
	}
	expect(t, h.do(http.MethodPatch, "/v1/sources/web?takeOver=true", map[string]any{"name": "Renamed"}), http.StatusOK)
	// Bounded: a write that is never applied fails the test instead of hanging the package.
	ctx, cancel := context.WithTimeout(h.env.Ctx, 10*time.Second)
	defer cancel()
	if _, err := h.env.Store.WaitFor(ctx, func(s *platform.Snapshot) bool { return s.Revision(schemas.ConfigKindSource, "web") > v }); err != nil {
		t.Fatalf("revision %d after an update, was %d", h.env.Store.Snapshot().Revision(schemas.ConfigKindSource, "web"), v)
	}
}
