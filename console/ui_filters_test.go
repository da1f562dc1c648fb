package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// The filters editor of a destination page's Filters tab (docs/console.md#destination-filters).

var filtersVersion = regexp.MustCompile(`name="version" value="(\d+)"`)

// filtersOf waits until the store's destination id has the filters want describes (name:action
// each, in list order) and returns them.
func filtersOf(t *testing.T, h *harness, id, want string) []schemas.DestinationFilter {
	t.Helper()
	var got []schemas.DestinationFilter
	describe := func() string {
		var out []string
		for _, f := range got {
			out = append(out, f.Name+":"+f.Action)
		}
		return strings.Join(out, " ")
	}
	servicetest.Eventually(t, 5*time.Second, "filters "+want, func() bool {
		d, ok := h.env.Store.Snapshot().DestinationByID(id)
		if ok {
			got = d.Filters
		}
		return ok && describe() == want
	})
	return got
}

// TestUIDestinationFiltersEditor: the Filters tab lists the destination's filters in the order
// they run and edits them through the config write path: a filter added (with its sources), an
// FQL error shown next to the condition with its column (nothing written), a filter edited into
// a sample, a percent that is no number refused by the form, a filter removed; a stale version
// is a 409; the CSRF token is required.
func TestUIDestinationFiltersEditor(t *testing.T) {
	h := destHarness(t)
	expect(t, h.do(http.MethodPost, "/v1/destinations", map[string]any{"id": "shop", "type": "webhooks", "sources": []string{"web"},
		"settings": map[string]any{"webhooks": []any{map[string]any{"url": "https://hooks.example.com/a"}}},
		"filters":  []any{map[string]any{"name": "no ip", "action": "dropProperties", "properties": []any{"context.ip", "traits.email"}}}}), http.StatusCreated)
	filtersOf(t, h, "shop", "no ip:dropProperties")
	b := newDestBrowser(t, h)
	p := b.get("/destinations/shop?tab=filters")
	expectDestPage(t, p, http.StatusOK, `aria-current="page">Filters</a>`, "<strong>no ip</strong>", "context.ip\ntraits.email</textarea>",
		`<option value="dropProperties" selected>`, "Add a filter", "Test the filters")
	version := filtersVersion.FindStringSubmatch(p.Body)[1]

	// Added, limited to a source.
	add := url.Values{"version": {version}, "name": {"small orders"}, "action": {"drop"}, "if": {"properties.total < 100"}, "sources": {"web"},
		"percent": {"50"}, "properties": {"ignored.for.drop"}}
	expectDestPage(t, b.post("/destinations/shop/filters", add), http.StatusOK, "Filter small orders added.", `aria-current="page">Filters</a>`)
	fs := filtersOf(t, h, "shop", "no ip:dropProperties small orders:drop")
	if f := fs[1]; f.If != "properties.total < 100" || !slices.Equal(f.Sources, []string{"web"}) || f.Percent != nil || f.Properties != nil {
		t.Fatalf("the filter added: %+v", f)
	}
	// Listed in the order they run: the drop before the drop-properties filter.
	p = b.get("/destinations/shop?tab=filters")
	if i, j := strings.Index(p.Body, "<strong>small orders</strong>"), strings.Index(p.Body, "<strong>no ip</strong>"); i < 0 || j < i {
		t.Fatalf("the filters are not listed in the order they run:\n%s", p.Body)
	}
	version = filtersVersion.FindStringSubmatch(p.Body)[1]

	// An FQL error: next to the condition, with its column; nothing is written.
	bad := url.Values{"version": {version}, "name": {"broken"}, "action": {"drop"}, "if": {"properties.total <"}}
	p = b.post("/destinations/shop/filters", bad)
	expectDestPage(t, p, http.StatusBadRequest, "The filter was not saved",
		destFieldErr("filter-new-if", `filter "broken" of destination "shop": column 19: expected a field, a value, '(' or '!', got the end`), `>properties.total &lt;</textarea>`)
	filtersOf(t, h, "shop", "no ip:dropProperties small orders:drop")

	// Edited into a sample of pages; a percent that is no number is the form's own error.
	edit := url.Values{"version": {version}, "filter": {"small orders"}, "name": {"pages"}, "action": {"sample"}, "if": {"type = 'page'"}, "percent": {"lots"}}
	// The form as sent, under the stored filter's summary.
	expectDestPage(t, b.post("/destinations/shop/filters", edit), http.StatusBadRequest, destFieldErr("filter-0-percent",
		"Write a number from 0 to 100 (the share of the matching messages kept), got “lots”."), `value="pages"`,
		`<strong>small orders</strong> <span class="badge">drop</span> <code>properties.total &lt; 100</code> <span class="muted">(web only)</span>`)
	edit.Set("percent", "25")
	expectDestPage(t, b.post("/destinations/shop/filters", edit), http.StatusOK, "Filter pages saved.")
	fs = filtersOf(t, h, "shop", "no ip:dropProperties pages:sample")
	if f := fs[1]; f.If != "type = 'page'" || f.Percent == nil || *f.Percent != 25 || f.Sources != nil {
		t.Fatalf("the filter edited: %+v", f)
	}

	// The version the form was read at is stale now: 409, nothing written.
	p = b.post("/destinations/shop/filters", url.Values{"version": {version}, "filter": {"no ip"}, "remove": {"1"}})
	expectDestPage(t, p, http.StatusConflict, "read it again")
	filtersOf(t, h, "shop", "no ip:dropProperties pages:sample")

	// Removed.
	version = filtersVersion.FindStringSubmatch(b.get("/destinations/shop?tab=filters").Body)[1]
	expectDestPage(t, b.post("/destinations/shop/filters", url.Values{"version": {version}, "filter": {"no ip"}, "remove": {"1"}}), http.StatusOK, "Filter no ip removed.")
	filtersOf(t, h, "shop", "pages:sample")

	// Signed in and with the session's CSRF token only, as every form.
	version = filtersVersion.FindStringSubmatch(b.get("/destinations/shop?tab=filters").Body)[1]
	expectDestPage(t, b.send(http.MethodPost, "/destinations/shop/filters", url.Values{"_csrf": {"forged"}, "version": {version}, "filter": {"pages"}, "remove": {"1"}}),
		http.StatusForbidden)
	resp, err := http.PostForm(h.srv.URL+"/destinations/shop/filters", url.Values{"version": {version}, "filter": {"pages"}, "remove": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a session: %d", resp.StatusCode)
	}
	filtersOf(t, h, "shop", "pages:sample")
}

// TestUIDestinationFiltersManagedByFile: a destination a config file manages shows its filters
// with the take-over choice, as its other settings; a save without it is refused (409, the
// file named), with it the destination becomes the console's.
func TestUIDestinationFiltersManagedByFile(t *testing.T) {
	h := destHarness(t)
	b := newDestBrowser(t, h)
	p := b.get("/destinations/file-hooks?tab=filters")
	expectDestPage(t, p, http.StatusOK, "No filters", `name="takeOver"`)
	version := filtersVersion.FindStringSubmatch(p.Body)[1]
	add := url.Values{"version": {version}, "name": {"no ip"}, "action": {"dropProperties"}, "properties": {"context.ip\r\n\r\n traits.email "}}
	expectDestPage(t, b.post("/destinations/file-hooks/filters", add), http.StatusConflict, "managed by file:base.yaml")
	filtersOf(t, h, "file-hooks", "")
	add.Set("takeOver", "true")
	expectDestPage(t, b.post("/destinations/file-hooks/filters", add), http.StatusOK, "Filter no ip added.")
	fs := filtersOf(t, h, "file-hooks", "no ip:dropProperties")
	if !slices.Equal(fs[0].Properties, []string{"context.ip", "traits.email"}) {
		t.Fatalf("properties %q", fs[0].Properties)
	}
	if d, _ := h.env.Store.Snapshot().DestinationByID("file-hooks"); d.Origin != schemas.OriginConsole {
		t.Fatalf("origin %q after a take-over", d.Origin)
	}
}
