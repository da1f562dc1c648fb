package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestUIDestinationDeliveryControl: the setup flow's and the edit form's delivery-control
// inputs (docs/delivery.md#ordering, docs/delivery.md#auto-disable): a destination created with
// both has them; a bad duration is the field's error, with the other fields' errors at once,
// and nothing is written; the destination page says both; an edit that clears both removes
// them and keeps the other settings.
func TestUIDestinationDeliveryControl(t *testing.T) {
	h := destHarness(t)
	b := newDestBrowser(t, h)

	first := b.get("/destinations/new/webhooks")
	p := b.step(first, url.Values{"step": {"1"}, "id": {"ordered"}, "sources": {"web"}})
	step3 := b.step(p, url.Values{"step": {"2"}, "url0": {"http://127.0.0.1:9/o"}})
	expectDestPage(t, step3, http.StatusOK, `aria-current="step">3. Shared secret`, "Deliver each user's messages in order", `<label for="autoDisableAfter">Auto-disable after`,
		"docs/delivery.md#ordering", "docs/delivery.md#auto-disable")

	// Bad durations: the field's error, with Standard Webhooks' (no secret) at once.
	for _, bad := range []struct{ in, msg string }{
		{"500ms", `must be a duration of at least 1s (e.g. 72h), got "500ms"`},
		{"abc", "Write a duration such as 72h or 30m (empty: never), got “abc”."},
	} {
		p = b.step(step3, url.Values{"step": {"3"}, "ordered": {"true"}, "autoDisableAfter": {bad.in}, "standardWebhooks": {"true"}})
		expectDestPage(t, p, http.StatusBadRequest, destFieldErr("autoDisableAfter", bad.msg), destFieldErr("standardWebhooks", "requires sharedSecret"),
			`name="ordered" value="true" checked`, `value="`+bad.in+`"`, "<details class=\"advanced\" open>")
		// The last step with the bad duration: refused, nothing written.
		p = b.step(step3, url.Values{"step": {"4"}, "ordered": {"true"}, "autoDisableAfter": {bad.in}, "enable": {"true"}})
		expectDestPage(t, p, http.StatusBadRequest, destFieldErr("autoDisableAfter", bad.msg))
		if _, ok := h.env.Store.Snapshot().DestinationByID("ordered"); ok {
			t.Fatalf("a destination with autoDisable.after %q was created", bad.in)
		}
	}

	review := b.step(step3, url.Values{"step": {"3"}, "ordered": {"true"}, "autoDisableAfter": {"72h"}})
	expectDestPage(t, review, http.StatusOK, `aria-current="step">4. Review and enable`,
		`<input type="hidden" name="ordered" value="true">`, `<input type="hidden" name="autoDisableAfter" value="72h">`)
	done := b.step(review, url.Values{"step": {"4"}, "enable": {"true"}})
	expectDestPage(t, done, http.StatusOK, "Destination ordered created and enabled",
		`<span id="delivery-control">each user's messages in order · auto-disabled after 72h of failures</span>`)
	d, ok := h.env.Store.Snapshot().DestinationByID("ordered")
	if !ok || d.Settings.Ordering != schemas.OrderingPerUser || d.Settings.AutoDisable == nil || time.Duration(d.Settings.AutoDisable.After) != 72*time.Hour {
		t.Fatalf("created: %+v", d)
	}

	// The edit form shows both; a bad duration (with a bad URL) is refused, nothing written.
	expect(t, h.do(http.MethodPatch, "/v1/destinations/ordered", map[string]any{"settings": map[string]any{"maxConcurrency": 3}}), http.StatusOK)
	servicetest.Eventually(t, 5*time.Second, "maxConcurrency 3", func() bool {
		d, _ := h.env.Store.Snapshot().DestinationByID("ordered")
		return d != nil && d.Settings.MaxConcurrency == 3
	})
	edit := b.get("/destinations/ordered?tab=settings")
	expectDestPage(t, edit, http.StatusOK, `id="edit-ordered" name="ordered" value="true" checked`, `id="edit-autoDisableAfter" name="autoDisableAfter" type="text" autocomplete="off" spellcheck="false" value="72h"`)
	version := regexp.MustCompile(`name="version" value="(\d+)"`).FindStringSubmatch(edit.Body)[1]
	p = b.post("/destinations/ordered/edit", url.Values{"version": {version}, "sources": {"web"}, "url0": {"http://127.0.0.1:9/o"}, "url1": {"nope"}, "autoDisableAfter": {"500ms"}})
	expectDestPage(t, p, http.StatusBadRequest, "The destination was not saved",
		destFieldErr("edit-autoDisableAfter", `must be a duration of at least 1s (e.g. 72h), got "500ms"`),
		destFieldErr("edit-url1", `must be an absolute http or https URL with a host, got "nope"`))
	p = b.post("/destinations/ordered/edit", url.Values{"version": {version}, "sources": {"web"}, "url0": {"http://127.0.0.1:9/o"}, "autoDisableAfter": {"abc"}})
	expectDestPage(t, p, http.StatusBadRequest, destFieldErr("edit-autoDisableAfter", "Write a duration such as 72h or 30m (empty: never), got “abc”."))
	if d, _ := h.env.Store.Snapshot().DestinationByID("ordered"); d.Settings.Ordering != schemas.OrderingPerUser || d.Settings.AutoDisable == nil {
		t.Fatalf("a refused edit changed the destination: %+v", d.Settings)
	}

	// Cleared: both removed, the other settings kept.
	saved := b.post("/destinations/ordered/edit", url.Values{"version": {version}, "sources": {"web"}, "url0": {"http://127.0.0.1:9/o"}, "autoDisableAfter": {""}})
	expectDestPage(t, saved, http.StatusOK, "Destination ordered saved.")
	servicetest.Eventually(t, 5*time.Second, "ordering and autoDisable removed", func() bool {
		d, _ := h.env.Store.Snapshot().DestinationByID("ordered")
		return d != nil && d.Settings.Ordering == "" && d.Settings.AutoDisable == nil
	})
	if d, _ := h.env.Store.Snapshot().DestinationByID("ordered"); d.Settings.MaxConcurrency != 3 || len(d.Settings.Webhooks) != 1 {
		t.Fatalf("the edit lost other settings: %+v", d.Settings)
	}
	expectDestPage(t, b.get("/destinations/ordered"), http.StatusOK, `<span id="delivery-control">not ordered per user · never auto-disabled</span>`)
}
