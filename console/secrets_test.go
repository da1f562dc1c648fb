package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// The secrets of a destination beyond its shared secret — static header values and the
// credentials of webhook URLs — are write-only in the console (docs/console.md#secrets).

const (
	maskedURL  = "https://" + schemas.Mask + ":" + schemas.Mask + "@a.example.com/x?token=" + schemas.Mask + "&team=" + schemas.Mask
	realURL    = "https://svc:pw-0123456789abcdef@a.example.com/x?token=tok-0123456789abcdef&team=growth"
	realAuth   = "Bearer tok-abcdefghijklmnop88"
	maskedAuth = "Bearer " + schemas.Mask + "88"
)

// webhookOf is webhook i of a destination's answer.
func webhookOf(t testing.TB, d map[string]any, i int) map[string]any {
	t.Helper()
	whs, _ := d["settings"].(map[string]any)["webhooks"].([]any)
	if len(whs) <= i {
		t.Fatalf("no webhook %d in %v", i, d)
	}
	return whs[i].(map[string]any)
}

// TestDestinationSecretsMasked: static header values and URL credentials are answered masked;
// a write that sends a masked value back keeps the stored secret; a masked value that matches
// no stored one is a 400 naming the field; the export gives references that apply back with no
// change.
func TestDestinationSecretsMasked(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do(http.MethodPost, "/v1/destinations", map[string]any{"id": "crm", "type": "webhooks", "sources": []string{"web"},
		"settings": map[string]any{"webhooks": []map[string]any{
			{"url": realURL, "headers": map[string]string{"Authorization": realAuth, "X-Team": "growth"}},
			{"url": "https://b.example.com/plain"},
		}}})
	expect(t, r, http.StatusCreated)
	wh := webhookOf(t, r.Data(t), 0)
	hdrs := wh["headers"].(map[string]any)
	if wh["url"] != maskedURL || hdrs["Authorization"] != maskedAuth || hdrs["X-Team"] != schemas.Mask {
		t.Fatalf("the create answer's webhook: %v", wh)
	}
	if u := webhookOf(t, r.Data(t), 1)["url"]; u != "https://b.example.com/plain" {
		t.Errorf("a URL without credentials is answered as it is: got %v", u)
	}
	stored := func() *schemas.Destination {
		d, _ := h.env.Store.Snapshot().DestinationByID("crm")
		return d
	}

	// Sending the answer back (the settings as read) changes nothing that is secret.
	got := h.do(http.MethodGet, "/v1/destinations/crm", nil)
	expect(t, got, http.StatusOK)
	settings := got.Data(t)["settings"].(map[string]any)
	settings["webhooks"].([]any)[0].(map[string]any)["headers"].(map[string]any)["X-Team"] = "growth-2"
	expect(t, h.do(http.MethodPatch, "/v1/destinations/crm", map[string]any{"name": "CRM", "settings": settings}), http.StatusOK)
	if d := stored(); d.Settings.Webhooks[0].URL != realURL || d.Settings.Webhooks[0].Headers["Authorization"] != realAuth ||
		d.Settings.Webhooks[0].Headers["X-Team"] != "growth-2" || d.Name != "CRM" {
		t.Fatalf("after a patch that echoes the masks: %+v", d.Settings.Webhooks[0])
	}
	// The webhooks reordered: a masked value is matched by header name and mask, a URL by mask.
	swapped := []any{map[string]any{"url": "https://b.example.com/plain"},
		map[string]any{"url": maskedURL, "headers": map[string]any{"Authorization": maskedAuth, "X-Team": "growth-3"}}}
	expect(t, h.do(http.MethodPatch, "/v1/destinations/crm", map[string]any{"settings": map[string]any{"webhooks": swapped}}), http.StatusOK)
	if d := stored(); d.Settings.Webhooks[1].URL != realURL || d.Settings.Webhooks[1].Headers["Authorization"] != realAuth {
		t.Fatalf("after reordering: %+v", d.Settings.Webhooks)
	}

	// A masked value that is no stored value's mask is refused, naming the field.
	for _, tt := range []struct {
		name    string
		webhook map[string]any
		field   string
	}{
		{"header", map[string]any{"url": maskedURL, "headers": map[string]any{"Authorization": "Bearer " + schemas.Mask + "zz"}}, `settings.webhooks[0].headers["Authorization"]`},
		{"header of another name", map[string]any{"url": maskedURL, "headers": map[string]any{"X-Other": maskedAuth}}, `settings.webhooks[0].headers["X-Other"]`},
		{"url", map[string]any{"url": "https://" + schemas.Mask + "@other.example.com/"}, "settings.webhooks[0].url"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(http.MethodPatch, "/v1/destinations/crm", map[string]any{"settings": map[string]any{"webhooks": []any{tt.webhook}}})
			expect(t, r, http.StatusBadRequest)
			if m := r.JSON(t); m["field"] != tt.field || !strings.Contains(m["message"].(string), "masked") {
				t.Fatalf("got %s, want field %s and a message about the mask", r.Body, tt.field)
			}
		})
	}
	r = h.do(http.MethodPost, "/v1/destinations", map[string]any{"id": "copy", "type": "webhooks", "sources": []string{"web"},
		"settings": map[string]any{"webhooks": []map[string]any{{"url": maskedURL}}}})
	if expect(t, r, http.StatusBadRequest); r.JSON(t)["field"] != "settings.webhooks[0].url" {
		t.Fatalf("creating with a masked URL: %s", r.Body)
	}

	// The export: references, not secrets; applying it back changes nothing and keeps them.
	exp := h.do(http.MethodGet, "/v1/config", nil)
	expect(t, exp, http.StatusOK)
	for _, s := range []string{"pw-0123456789abcdef", "tok-0123456789abcdef", "tok-abcdefghijklmnop88", "growth-3"} {
		if strings.Contains(string(exp.Body), s) {
			t.Fatalf("the export holds %q:\n%s", s, exp.Body)
		}
	}
	if strings.Count(string(exp.Body), ": hmac-sha256:") != 3 || !strings.Contains(string(exp.Body), "# https://xxxxx:xxxxx@a.example.com/x?") {
		t.Fatalf("want 3 references (the URL, 2 header values) and the redacted URL beside its reference:\n%s", exp.Body)
	}
	put := h.do(http.MethodPut, "/v1/config", string(exp.Body), "Content-Type", "application/yaml")
	expect(t, put, http.StatusOK)
	if changes := put.Data(t)["changes"].([]any); len(changes) != 0 {
		t.Fatalf("applying the export: %v, want no change", changes)
	}
	if d := stored(); d.Settings.Webhooks[1].URL != realURL || d.Settings.Webhooks[1].Headers["Authorization"] != realAuth || d.Settings.Webhooks[1].Headers["X-Team"] != "growth-3" {
		t.Fatalf("after applying the export: %+v", d.Settings.Webhooks)
	}
	// The API's answer pasted into a config file: its masks keep the secrets too (no change);
	// a mask of nothing stored is refused, naming the field in the file.
	crm := h.do(http.MethodGet, "/v1/destinations/crm", nil).Data(t)
	delete(crm, "version")
	delete(crm, "origin")
	delete(crm, "enabled") // (answered true when unset)
	st := crm["settings"].(map[string]any)
	delete(st, "hasSharedSecret")
	delete(st, "hasPreviousSharedSecret")
	web := map[string]any{"id": "web", "name": "Web site", "writeKeyHash": schemas.HashWriteKey("wk_test_web_0123456789")}
	r = h.do(http.MethodPut, "/v1/config?dryRun=true", map[string]any{"sources": []any{web}, "destinations": []any{crm}})
	if expect(t, r, http.StatusOK); len(r.Data(t)["changes"].([]any)) != 0 {
		t.Fatalf("a config file with the answer's masks: %s, want no change", r.Body)
	}
	st["webhooks"].([]any)[1].(map[string]any)["url"] = "https://" + schemas.Mask + "@elsewhere.example.com/"
	r = h.do(http.MethodPut, "/v1/config?dryRun=true", map[string]any{"sources": []any{web}, "destinations": []any{crm}})
	if expect(t, r, http.StatusBadRequest); r.JSON(t)["field"] != "destinations[0].settings.webhooks[1].url" || !strings.Contains(string(r.Body), "is masked") {
		t.Fatalf("a config file with a mask of nothing stored: %s", r.Body)
	}
	// A reference with one digit changed names no secret of the destination.
	i := strings.Index(string(exp.Body), ": hmac-sha256:") + len(": hmac-sha256:")
	c := "0"
	if exp.Body[i] == '0' {
		c = "1"
	}
	tampered := string(exp.Body[:i]) + c + string(exp.Body[i+1:])
	r = h.do(http.MethodPut, "/v1/config?dryRun=true", tampered, "Content-Type", "application/yaml")
	if expect(t, r, http.StatusBadRequest); !strings.Contains(r.JSON(t)["message"].(string), "refers to a secret this destination does not have") {
		t.Fatalf("a reference to another secret: %s", r.Body)
	}
	h.secretsNowhere(t, []string{"pw-0123456789abcdef", "tok-0123456789abcdef", "tok-abcdefghijklmnop88", "svc:"})
}

// TestConfigReencrypt: with CONFIG_ENCRYPTION_KEY set, a destination stored in clear (written
// before the key was set) is a change when the export is applied back (a console object) and
// is re-encrypted by POST /v1/config/reencrypt and the settings page's button whatever manages
// it, keeping its origin; without a key the endpoint is a 409.
func TestConfigReencrypt(t *testing.T) {
	h := newHarnessWith(t, servicetest.Options{ConfigEncryptionKey: testEncryptionKey}, nil)
	// Records written in clear, as a console or tributary-init without the key wrote them.
	plain := func(id, origin string) {
		d := &schemas.Destination{ID: id, Type: schemas.DestinationTypeWebhooks, Sources: []string{"web"}, Origin: origin,
			Settings: schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: "https://h.example.com/?token=tok-" + id, Headers: map[string]string{"X-Key": "key-" + id}}}, SharedSecret: "secret-" + id}}
		rec, err := d.Record()
		if err != nil {
			t.Fatal(err)
		}
		h.env.Produce(&kgo.Record{Topic: schemas.TopicConfig, Key: []byte(rec.Key), Value: rec.Value})
	}
	plain("console-plain", schemas.OriginConsole)
	plain("file-plain", "file:base.yaml")
	snap, err := h.env.Store.WaitFor(h.env.Ctx, func(s *platform.Snapshot) bool {
		_, a := s.DestinationByID("console-plain")
		_, b := s.DestinationByID("file-plain")
		return a && b
	})
	if err != nil || !snap.NeedsSealing(schemas.ConfigKindDestination, "console-plain") {
		t.Fatalf("the plain records: %v", err)
	}

	exp := h.do(http.MethodGet, "/v1/config", nil)
	expect(t, exp, http.StatusOK)
	r := h.do(http.MethodPut, "/v1/config?dryRun=true", string(exp.Body), "Content-Type", "application/yaml")
	expect(t, r, http.StatusOK)
	if got, want := string(mustJSON(t, r.Data(t)["changes"])), `[{"action":"update","fields":["secrets encrypted with key k1"],"key":"destination/console-plain"}]`; got != want {
		t.Fatalf("applying the export back: %s, want %s", got, want)
	}

	b := h.signIn(t)
	b.get("/settings").contains(t, http.StatusOK, "encrypted with key <code>k1</code>", "2 of them still hold secrets in clear", `action="/settings/reencrypt"`)
	p := b.post("/settings/reencrypt", nil)
	if p.Status != http.StatusSeeOther {
		t.Fatalf("the button: %d %s", p.Status, p.Body)
	}
	b.get(p.Location).contains(t, http.StatusOK, "Every secret is encrypted with key k1: 2 destinations written again.", "Every destination's secrets are encrypted with it.")
	snap = h.env.Store.Snapshot()
	for id, origin := range map[string]string{"console-plain": schemas.OriginConsole, "file-plain": "file:base.yaml"} {
		d, _ := snap.DestinationByID(id)
		if snap.NeedsSealing(schemas.ConfigKindDestination, id) || d.Origin != origin || d.Settings.SharedSecret != "secret-"+id || d.Settings.Webhooks[0].Headers["X-Key"] != "key-"+id {
			t.Errorf("%s after re-encryption: %+v", id, d)
		}
	}
	r = h.do(http.MethodPost, "/v1/config/reencrypt", nil)
	if expect(t, r, http.StatusOK); string(mustJSON(t, r.Data(t))) != `{"keyId":"k1","reencrypted":[]}` {
		t.Errorf("again: %s", r.Body)
	}
	if r := h.do(http.MethodPut, "/v1/config?dryRun=true", string(exp.Body), "Content-Type", "application/yaml"); len(r.Data(t)["changes"].([]any)) != 0 {
		t.Errorf("applying the export after re-encryption: %s", r.Body)
	}

	plainConsole := newHarness(t, nil)
	expectError(t, plainConsole.do(http.MethodPost, "/v1/config/reencrypt", nil), http.StatusConflict, "conflict",
		"CONFIG_ENCRYPTION_KEY is not set for the console: set it in every service first (docs/configuration.md#secrets-at-rest)", "")
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The ten secrets of TestSecretsNowhere: five in a destination of a config file, five in one
// created through the API.
const (
	fileHeader   = "fhdr-0001-abcdefghij"
	filePassword = "fpass-0002-klmnop"
	fileQuery    = "fquery-0003-qrstuv"
	fileShared   = "fshared-0004-wxyz"
	filePrevious = "fprev-0005-abcdef"
	apiHeader    = "ahdr-0006-ghijklmnop"
	apiUser      = "auser-0007-qrstuv"
	apiQuery     = "aquery-0008-wxyzab"
	apiShared    = "ashared-0009-cdef"
	apiPrevious  = "aprev-0010-ghijkl"
)

// TestSecretsNowhere plants ten distinct secrets — static header values, URL user info and
// passwords, URL query tokens, shared and previous shared secrets — in a destination of a
// config file and one created through the API, with CONFIG_ENCRYPTION_KEY set, then searches
// every surface: every API answer (lists, reads, the create and update answers, the export and
// its dry-run apply, attempts of a destination and of a message, stats, the DLQ, the event
// tester), every page of the UI (the sign-in page, then signed in), the console's and the
// config store's logs, and every record of tributary.config. None holds any of them, while the
// stored destinations still hold them all (the deliverer sends the real values).
func TestSecretsNowhere(t *testing.T) {
	secrets := []string{fileHeader, filePassword, fileQuery, fileShared, filePrevious, apiHeader, apiUser, apiQuery, apiShared, apiPrevious}
	h := newHarnessWith(t, servicetest.Options{ConfigEncryptionKey: testEncryptionKey, LogLevel: zerolog.InfoLevel},
		func(c *console.Config) { c.TestTimeout = 300 * time.Millisecond })
	fileURL := "https://fuser:" + filePassword + "@file.example.com/in?token=" + fileQuery
	apiURL := "https://" + apiUser + "@api.example.com/in?team=growth&key=" + apiQuery
	path := filepath.Join(t.TempDir(), "secrets.yaml")
	file := fmt.Sprintf(`sources: [{id: shop, writeKey: wk_test_shop_0123456789}]
destinations:
  - id: file-secrets
    type: webhooks
    sources: [shop]
    settings:
      webhooks:
        - url: %q
          headers: {Authorization: "Bearer %s"}
      sharedSecret: %s
      previousSharedSecret: %s
`, fileURL, fileHeader, fileShared, filePrevious)
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := platform.ApplyConfigFile(h.env.Ctx, h.env.Kafka, schemas.TopicConfig, path, platform.ApplyOptions{}, h.env.Logger); err != nil {
		t.Fatal(err)
	}
	expect(t, h.do(http.MethodPost, "/v1/destinations", map[string]any{"id": "api-secrets", "type": "webhooks", "sources": []string{"web"},
		"settings": map[string]any{"webhooks": []map[string]any{{"url": apiURL, "headers": map[string]string{"X-Api-Key": apiHeader}}},
			"sharedSecret": apiShared, "previousSharedSecret": apiPrevious}}), http.StatusCreated)
	if _, err := h.env.Store.WaitFor(h.env.Ctx, func(s *platform.Snapshot) bool { _, ok := s.DestinationByID("file-secrets"); return ok }); err != nil {
		t.Fatal(err)
	}
	expect(t, h.do(http.MethodPatch, "/v1/destinations/api-secrets", map[string]any{"name": "API"}), http.StatusOK)

	// Deliveries, as the deliverer reports them (here with the URLs unredacted: the console
	// must not rely on the deliverer alone), and a dead letter of each.
	now := time.Now().UTC()
	for i, d := range []struct{ id, url string }{{"file-secrets", fileURL}, {"api-secrets", apiURL}} {
		msg := fmt.Sprintf("m-secret-%d", i)
		b, _ := json.Marshal(map[string]any{"destinationId": d.id, "messageId": msg, "url": d.url, "attempt": 1, "status": 500,
			"latencyMs": 3, "errorClass": "status_5xx", "error": "HTTP 500", "at": schemas.FormatTimestamp(now)})
		h.env.Produce(&kgo.Record{Topic: schemas.TopicAttempts, Key: []byte(d.id), Value: b},
			&kgo.Record{Topic: schemas.TopicDLQ, Key: []byte(d.id + ":u1"), Value: []byte(`{"type":"track","event":"E","userId":"u1"}`),
				Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte(d.id)}, {Key: schemas.HeaderMessageID, Value: []byte(msg)},
					{Key: schemas.HeaderReason, Value: []byte("retries exhausted")}, {Key: schemas.HeaderLastStatus, Value: []byte("500")},
					{Key: schemas.HeaderLastError, Value: []byte("HTTP 500")}, {Key: schemas.HeaderAttempt, Value: []byte("8")},
					{Key: schemas.HeaderURL, Value: []byte(d.url)}}})
	}
	seqs := map[string]string{}
	for _, id := range []string{"file-secrets", "api-secrets"} {
		servicetest.Eventually(t, 10*time.Second, "the attempt of "+id, func() bool {
			list, _ := h.do(http.MethodGet, "/v1/destinations/"+id+"/attempts", nil).JSON(t)["data"].([]any)
			if len(list) == 0 {
				return false
			}
			seqs[id] = list[0].(map[string]any)["id"].(string)
			return true
		})
		servicetest.Eventually(t, 10*time.Second, "the dead letter of "+id, func() bool {
			list, _ := h.do(http.MethodGet, "/v1/destinations/"+id+"/dlq", nil).JSON(t)["data"].([]any)
			return len(list) == 1
		})
		h.do(http.MethodGet, "/v1/destinations/"+id, nil)
		h.do(http.MethodGet, "/v1/destinations/"+id+"/stats", nil)
		h.do(http.MethodPost, "/v1/destinations/"+id+"/test", nil)
	}
	h.do(http.MethodGet, "/v1/messages/m-secret-0/attempts", nil)
	h.do(http.MethodGet, "/v1/messages/m-secret-1/attempts", nil)
	h.do(http.MethodGet, "/v1/destinations", nil)
	exp := h.do(http.MethodGet, "/v1/config", nil)
	expect(t, h.do(http.MethodPut, "/v1/config?dryRun=true", string(exp.Body), "Content-Type", "application/yaml"), http.StatusOK)
	if len(h.answers) < 17 {
		t.Fatalf("only %d answers searched", len(h.answers))
	}
	h.secretsNowhere(t, secrets)

	// Every page of the UI: the sign-in page, then signed in.
	if p := h.newBrowser(t, false).get("/signin"); p.Status != http.StatusOK || strings.Contains(p.Body, apiShared) {
		t.Errorf("GET /signin: %d", p.Status)
	}
	b := h.signIn(t)
	pages := []string{"/", "/sources", "/sources/web", "/sources/shop", "/destinations", "/settings", "/settings/export", "/audiences", "/deletions",
		"/destinations/file-secrets", "/destinations/api-secrets",
		"/destinations/file-secrets/attempts/" + seqs["file-secrets"], "/destinations/api-secrets/attempts/" + seqs["api-secrets"]}
	for _, p := range pages {
		page := b.get(p)
		if page.Status != http.StatusOK {
			t.Errorf("GET %s: %d", p, page.Status)
		}
		for _, s := range secrets {
			if strings.Contains(page.Body, s) {
				t.Errorf("the page %s holds the secret %s", p, s)
			}
		}
	}
	page := b.get("/destinations/api-secrets/attempts/" + seqs["api-secrets"])
	page.contains(t, http.StatusOK, "<code>X-Api-Key</code></td><td class=\"url\"><code>"+schemas.Mask+"op</code>")

	// At rest: no record of tributary.config, old or new, holds one.
	r := h.env.Reader(schemas.TopicConfig)
	for _, rec := range r.WaitFor(4, 10*time.Second) {
		for _, s := range secrets {
			if strings.Contains(string(rec.Value), s) {
				t.Errorf("record %s at offset %d holds the secret %s", rec.Key, rec.Offset, s)
			}
		}
	}
	h.secretsNowhere(t, secrets) // the logs again, after the pages

	// The deliverer still gets the real values.
	snap := h.env.Store.Snapshot()
	fd, _ := snap.DestinationByID("file-secrets")
	ad, _ := snap.DestinationByID("api-secrets")
	if fd.Settings.Webhooks[0].URL != fileURL || fd.Settings.Webhooks[0].Headers["Authorization"] != "Bearer "+fileHeader || fd.Settings.PreviousSharedSecret != filePrevious ||
		ad.Settings.Webhooks[0].URL != apiURL || ad.Settings.Webhooks[0].Headers["X-Api-Key"] != apiHeader || ad.Settings.SharedSecret != apiShared {
		t.Errorf("the stored destinations lost a secret: %+v %+v", fd.Settings, ad.Settings)
	}
}
