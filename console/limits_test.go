package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestOversizedInput: a body or a field over its limit answers 400 or 413 with a message, never
// 500 (docs/console.md#request-limits): the API's body limit, a regulation's subject id (at
// most 1,024 bytes, no control characters), a webhook header value (schemas.MaxHeaderValueBytes),
// and an object whose record would be larger than Kafka takes.
func TestOversizedInput(t *testing.T) {
	h := newHarness(t, nil)
	reg := func(ids ...string) response {
		return h.do(http.MethodPost, "/v1/regulations", map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": ids})
	}
	for _, tt := range []struct {
		name  string
		ids   []string
		field string
	}{
		{"3 MB subject id", []string{strings.Repeat("u", 3<<20)}, ""}, // over the body limit: 413
		{"1,025-byte subject id", []string{"ok", strings.Repeat("u", 1025)}, "subjectIds[1]"},
		{"newline", []string{"ok", "u1\nu2"}, "subjectIds[1]"},
		{"NUL", []string{"u\x00"}, "subjectIds[0]"},
		{"DEL", []string{"u\x7f"}, "subjectIds[0]"},
		{"C1 control", []string{"u\u0085"}, "subjectIds[0]"},
		{"empty", []string{""}, "subjectIds[0]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := reg(tt.ids...)
			if tt.field == "" {
				expect(t, r, http.StatusRequestEntityTooLarge)
				if m := r.JSON(t); m["code"] != "too_large" || !strings.Contains(fmt.Sprint(m["message"]), "1048576") {
					t.Errorf("answer %s", r.Body)
				}
				return
			}
			expect(t, r, http.StatusBadRequest)
			if m := r.JSON(t); m["code"] != "invalid" || m["field"] != tt.field {
				t.Errorf("answer %s, want field %s", r.Body, tt.field)
			}
		})
	}
	expect(t, reg(strings.Repeat("u", 1024), "ü-ok\tno"), http.StatusBadRequest) // a tab is a control character too
	expect(t, reg(strings.Repeat("u", 1024), "ü-ok"), http.StatusOK)

	dest := func(id string, headers map[string]string, hooks int) map[string]any {
		wh := make([]map[string]any, hooks)
		for i := range wh {
			wh[i] = map[string]any{"url": fmt.Sprintf("http://127.0.0.1:9/%d", i), "headers": headers}
		}
		return map[string]any{"id": id, "type": "webhooks", "sources": []string{"web"}, "settings": map[string]any{"webhooks": wh}}
	}
	// A 3 MB header value is over the body limit; a 9 KB one over the header value limit.
	r := h.do(http.MethodPost, "/v1/destinations", dest("big", map[string]string{"X-Big": strings.Repeat("v", 3<<20)}, 1))
	expect(t, r, http.StatusRequestEntityTooLarge)
	r = h.do(http.MethodPost, "/v1/destinations", dest("big", map[string]string{"X-Big": strings.Repeat("v", 9<<10)}, 1))
	expect(t, r, http.StatusBadRequest)
	if m := r.JSON(t); m["field"] != `settings.webhooks[0].headers["X-Big"]` {
		t.Errorf("a 9 KB header value: %s", r.Body)
	}
	// Every field within its limit (schemas.MaxWebhookHeaders values of 8,000 bytes on each of
	// 5 webhooks: about 800 KB), the body under 1 MiB, yet the object's record is larger than
	// Kafka takes once CONFIG_ENCRYPTION_KEY seals each value (base64 of the ciphertext): 413.
	many := map[string]string{}
	for i := range schemas.MaxWebhookHeaders {
		many[fmt.Sprintf("X-H%d", i)] = strings.Repeat("v", 8000)
	}
	sealed := newHarnessWith(t, servicetest.Options{ConfigEncryptionKey: testEncryptionKey}, nil)
	r = sealed.do(http.MethodPost, "/v1/destinations", dest("wide", many, 5))
	if m := r.JSON(t); r.Status != http.StatusRequestEntityTooLarge || m["code"] != "too_large" || !strings.Contains(fmt.Sprint(m["message"]), "destination wide is 1") {
		t.Errorf("a destination larger than a Kafka record: %d %.300s", r.Status, r.Body)
	}
	// In clear, the same destination fits.
	expect(t, h.do(http.MethodPost, "/v1/destinations", dest("wide", many, 5)), http.StatusCreated)
}
