package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestUIAudienceOutputAndAudienceCondition: the audience form's output select and audience
// condition round-trip (created from the fields, shown in them, changed back to the default
// output, which removes the field); a between window is shown as JSON and kept; a cycle made
// from the form is refused next to the audience select; an audience another one is built on
// cannot be deleted.
func TestUIAudienceOutputAndAudienceCondition(t *testing.T) {
	h, fake := audiencesHarness(t)
	b := h.signIn(t)
	b.get("/audiences/new").contains(t, http.StatusOK, `<option value="identify" selected>identify`, `<option value="track" >track`,
		`<select id="inAudience" name="inAudience"`, `<option value="" selected>(any)</option>`)
	if p := b.post("/audiences/new", url.Values{"id": {"pro"}, "name": {"Pro"}, "source": {"web"}, "trait": {"plan"}, "traitValue": {"pro"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("create pro: %d %s", p.Status, p.Body)
	}
	b.get("/audiences/new").contains(t, http.StatusOK, `<option value="pro" >pro</option>`)
	p := b.post("/audiences/new", url.Values{"id": {"pro-buyers"}, "name": {"Pro Buyers"}, "source": {"web"}, "output": {"track"},
		"event": {"Order Completed"}, "within": {"720h"}, "inAudience": {"pro"}})
	if p.Status != http.StatusSeeOther {
		t.Fatalf("create pro-buyers: %d %s", p.Status, p.Body)
	}
	a, ok := h.env.Store.Snapshot().AudienceByID("pro-buyers")
	if !ok || a.Output != schemas.OutputTrack || len(a.Rule.All) != 2 || a.Rule.All[0].Event != "Order Completed" || a.Rule.All[1].Audience != "pro" {
		t.Fatalf("created audience: %+v", a)
	}
	p = b.get("/audiences/pro-buyers")
	p.contains(t, http.StatusOK, `<option value="track" selected>track`, `<option value="pro" selected>pro</option>`, `value="Order Completed"`,
		`<option value="720h" selected>`, `<details class="aud-json" >`)
	p.lacks(t, `<option value="pro-buyers"`) // not itself

	// Back to the default output: the field goes.
	if p = b.post("/audiences/pro-buyers", url.Values{"name": {"Pro Buyers"}, "source": {"web"}, "output": {"identify"},
		"event": {"Order Completed"}, "within": {"720h"}, "inAudience": {"pro"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("edit: %d %s", p.Status, p.Body)
	}
	if a, _ = h.env.Store.Snapshot().AudienceByID("pro-buyers"); a.Output != "" || a.Rule.All[1].Audience != "pro" {
		t.Fatalf("after output identify: output %q, rule %+v", a.Output, a.Rule)
	}

	// between: JSON only, kept as written and shown as JSON.
	rule := `{"all":[{"event":"Order Completed","between":["2160h","720h"]},{"not":{"audience":"pro"}}]}`
	if p = b.post("/audiences/pro-buyers", url.Values{"name": {"Pro Buyers"}, "source": {"web"}, "output": {"both"}, "rule": {rule}}); p.Status != http.StatusSeeOther {
		t.Fatalf("edit with JSON: %d %s", p.Status, p.Body)
	}
	a, _ = h.env.Store.Snapshot().AudienceByID("pro-buyers")
	if a.Output != schemas.OutputBoth || len(a.Rule.All[0].Between) != 2 || time.Duration(a.Rule.All[0].Between[0]) != 2160*time.Hour || a.Rule.All[1].Not.Audience != "pro" {
		t.Fatalf("after JSON: %+v", a)
	}
	b.get("/audiences/pro-buyers").contains(t, http.StatusOK, `<details class="aud-json" open>`, "&#34;between&#34;", `<option value="both" selected>both`)
	p = b.post("/audiences/pro-buyers", url.Values{"name": {"Pro Buyers"}, "source": {"web"}, "rule": {`{"event":"Order Completed","between":["720h","2160h"]}`}})
	p.contains(t, http.StatusBadRequest, `id="rule-error" class="field-error">between: must give the older bound first`)

	// The live preview of the fields with an audience condition; an unknown audience is
	// refused before the audiences service is asked.
	p = b.post("/audiences/preview", url.Values{"trait": {"plan"}, "inAudience": {"pro"}})
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "≈ 1,234") || fake.lastRule() != `{"all":[{"exists":true,"trait":"plan"},{"audience":"pro"}]}` {
		t.Errorf("preview with an audience: %d %q, rule %s", p.Status, p.Body, fake.lastRule())
	}
	p = b.post("/audiences/preview", url.Values{"inAudience": {"nope"}})
	if !strings.Contains(p.Body, `Not a valid rule yet: rule.audience: unknown audience "nope"`) {
		t.Errorf("preview of an unknown audience: %q", p.Body)
	}

	// A cycle from the form: next to the audience select.
	b.get("/audiences/pro")
	p = b.post("/audiences/pro", url.Values{"name": {"Pro"}, "source": {"web"}, "trait": {"plan"}, "traitValue": {"pro"}, "inAudience": {"pro-buyers"}})
	p.contains(t, http.StatusBadRequest, `id="inAudience-error" class="field-error">&#34;pro-buyers&#34; makes a cycle of audiences: pro-buyers → pro → pro-buyers`)
	// In use by pro-buyers: not deleted.
	b.get("/audiences/pro")
	b.post("/audiences/pro/delete", nil).contains(t, http.StatusConflict, "in use", "unknown audience")
	if _, ok := h.env.Store.Snapshot().AudienceByID("pro"); !ok {
		t.Fatal("an audience in use was deleted")
	}
}
