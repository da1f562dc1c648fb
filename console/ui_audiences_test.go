package console_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/console"
)

// fakeProfileAPI is the audiences service's profile API as the console's pages use it: fixed
// figures, one profile (u1), a preview that records the rules it was asked.
type fakeProfileAPI struct {
	*httptest.Server
	mu    sync.Mutex
	rules []string
	auth  []string
}

const fakeAudiencesToken = "aud-token-0123"

func newFakeProfileAPI(t *testing.T) *fakeProfileAPI {
	f := &fakeProfileAPI{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/audiences/{id}", func(w http.ResponseWriter, r *http.Request) {
		v := map[string]any{"id": r.PathValue("id"), "members": 1234, "lastSyncAt": time.Now().Add(-3 * time.Minute).UTC().Format(time.RFC3339Nano),
			"partitions": 3, "totalPartitions": 3}
		if r.PathValue("id") == "backfilling" {
			v["backfill"] = map[string]any{"state": "running", "partitionsDone": 2, "partitions": 3, "eventsRead": 1234567,
				"from": "2026-10-28T07:40:00.000Z", "to": "2026-11-27T07:40:00.000Z"}
		}
		writeFakeJSON(w, http.StatusOK, v)
	})
	mux.HandleFunc("GET /v1/profiles/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "u1" {
			writeFakeJSON(w, http.StatusNotFound, map[string]string{"code": "not_found", "message": "no profile for this id"})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"userId":"u1","traits":{"email":"ada@example.com","plan":"pro"},"computedTraits":{"orders_30_days":3},`+
			`"audiences":[{"id":"power-users","key":"power_users"}],"firstSeen":"2026-11-21T07:40:00.000Z","lastSeen":"2026-11-24T07:10:02.444Z","mergedIds":["anon-5f0a"],`+
			`"externalIds":[{"type":"ios.idfa","id":"idfa-77","linkedAt":"2026-11-21T07:40:00.000Z"}],`+
			`"identity":[{"at":"2026-11-22T08:00:00.000Z","kind":"refusal","type":"email","id":"null","rule":"blocked","detail":"the value is blocked (AUDIENCES_IDENTITY_BLOCKED)"}]}`)
	})
	mux.HandleFunc("POST /v1/audiences/preview", func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Rule json.RawMessage }
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.rules = append(f.rules, string(body.Rule))
		f.mu.Unlock()
		if strings.Contains(string(body.Rule), "Restoring") {
			writeFakeJSON(w, http.StatusServiceUnavailable, map[string]string{"code": "unavailable", "message": "partition 0 is being restored from audiences.state"})
			return
		}
		writeFakeJSON(w, http.StatusOK, map[string]any{"count": 1234, "profiles": 56789, "partitions": 3, "totalPartitions": 3})
	})
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+fakeAudiencesToken {
			writeFakeJSON(w, http.StatusUnauthorized, map[string]string{"code": "unauthorized", "message": "missing or wrong bearer token (AUDIENCES_TOKEN)"})
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func writeFakeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// lastRule is the rule of the last preview the fake was asked.
func (f *fakeProfileAPI) lastRule() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.rules) == 0 {
		return ""
	}
	return f.rules[len(f.rules)-1]
}

func audiencesHarness(t *testing.T) (*harness, *fakeProfileAPI) {
	fake := newFakeProfileAPI(t)
	h := newHarness(t, func(c *console.Config) { c.AudiencesURL, c.AudiencesToken = fake.URL, fakeAudiencesToken })
	return h, fake
}

// fast fails when a page took more than the UI's budget (generous under the race detector).
func fast(t *testing.T, p uiPage, what string) {
	t.Helper()
	if p.Took > pageBudget {
		t.Errorf("%s took %s", what, p.Took)
	}
}

// TestUIAudiences: the list with member counts from the profile API, an audience created from
// the common-case fields and changed with the rule's JSON, errors next to their fields (the
// form's fields and the JSON textarea), delete; the same for a computed trait.
func TestUIAudiences(t *testing.T) {
	h, fake := audiencesHarness(t)

	// Without a session: the sign-in form, or 401 for a form.
	anon := &browser{t: t, h: h, c: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if p := anon.get("/audiences/new"); p.Status != http.StatusSeeOther || p.Location != "/signin?next=%2Faudiences%2Fnew" {
		t.Fatalf("no session: %d %s", p.Status, p.Location)
	}
	if p := anon.post("/audiences/preview", url.Values{"event": {"x"}}); p.Status != http.StatusUnauthorized {
		t.Fatalf("preview without a session: %d", p.Status)
	}

	b := h.signIn(t)
	p := b.get("/audiences")
	p.contains(t, http.StatusOK, "No audience yet", `href="/audiences/new"`, "No computed trait yet", `href="/traits/new"`, `action="/audiences/profile"`)
	fast(t, p, "the empty list")
	b.get("/audiences/new").contains(t, http.StatusOK, `<option value="web" selected>web</option>`, `data-preview="preview"`, `data-preview-url="/audiences/preview"`,
		`<label for="event">`, `<label for="rule">`)

	// Created from the fields: event, at least, within, trait = value.
	p = b.post("/audiences/new", url.Values{"id": {"power-users"}, "name": {"Power Users"}, "source": {"web"}, "event": {"Order Completed"},
		"atLeast": {"2"}, "within": {"720h"}, "trait": {"plan"}, "traitValue": {"pro"}})
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, "/audiences/power-users?done=") {
		t.Fatalf("create: %d %s %s", p.Status, p.Location, p.Body)
	}
	a, ok := h.env.Store.Snapshot().AudienceByID("power-users")
	if !ok || a.Name != "Power Users" || a.Source != "web" || a.Realtime || len(a.Rule.All) != 2 || a.Rule.All[0].Event != "Order Completed" ||
		a.Rule.All[0].AtLeast != 2 || time.Duration(a.Rule.All[0].Within) != 720*time.Hour || a.Rule.All[1].Trait != "plan" || a.Rule.All[1].Equals != "pro" {
		t.Fatalf("created audience: %+v", a)
	}
	// Its page shows the rule in the fields, and the figures.
	p = b.get("/audiences/power-users")
	p.contains(t, http.StatusOK, `value="Order Completed"`, `name="atLeast" type="number" min="1" step="1" value="2"`, `<option value="720h" selected>`,
		`value="plan"`, `value="pro"`, "1,234 members at the last sync", "3 min ago", `action="/audiences/power-users/delete"`)
	fast(t, p, "an audience's page")
	p = b.get("/audiences")
	p.contains(t, http.StatusOK, `href="/audiences/power-users"`, "<code>power_users</code>", "1,234", "3 min ago")
	fast(t, p, "the list")

	// A computed trait, from its form.
	b.get("/traits/new").contains(t, http.StatusOK, `<option value="count" selected>count</option>`, `<option value="uniqueList" >uniqueList</option>`)
	p = b.post("/traits/new", url.Values{"id": {"orders"}, "name": {"Orders 30 Days"}, "source": {"web"}, "kind": {"count"}, "event": {"Order Completed"}, "within": {"720h"}})
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, "/traits/orders?done=") {
		t.Fatalf("create trait: %d %s %s", p.Status, p.Location, p.Body)
	}
	ct, ok := h.env.Store.Snapshot().ComputedTraitByID("orders")
	if !ok || ct.Count == nil || ct.Count.Event != "Order Completed" || time.Duration(ct.Count.Within) != 720*time.Hour {
		t.Fatalf("created computed trait: %+v", ct)
	}
	b.get("/audiences").contains(t, http.StatusOK, `href="/traits/orders"`, "<code>orders_30_days</code>", "count of Order Completed")

	// Changed with the rule's JSON (which wins over the fields), realtime.
	b.get("/audiences/power-users")
	rule := `{"any":[{"event":"Order Completed","atLeast":3},{"computedTrait":"orders","gte":5}]}`
	p = b.post("/audiences/power-users", url.Values{"name": {"Power Users"}, "source": {"web"}, "realtime": {"true"}, "event": {"ignored"}, "rule": {rule}})
	if p.Status != http.StatusSeeOther {
		t.Fatalf("edit: %d %s", p.Status, p.Body)
	}
	a, _ = h.env.Store.Snapshot().AudienceByID("power-users")
	if !a.Realtime || len(a.Rule.Any) != 2 || a.Rule.Any[1].ComputedTrait != "orders" || len(a.Rule.All) != 0 {
		t.Fatalf("edited audience: %+v", a)
	}
	// A rule the fields cannot say is shown as JSON.
	b.get("/audiences/power-users").contains(t, http.StatusOK, `<details class="aud-json" open>`, "&#34;computedTrait&#34;: &#34;orders&#34;", `value="" placeholder="Order Completed"`)

	// Errors next to their fields: the JSON's path next to the textarea, a field's next to it.
	p = b.post("/audiences/power-users", url.Values{"name": {"Power Users"}, "source": {"web"}, "rule": {`{"all":[{"event":"x","atLeast":-1}]}`}})
	p.contains(t, http.StatusBadRequest, `id="rule-error" class="field-error">all[0].atLeast: `, `aria-invalid="true">{&#34;all&#34;`)
	p = b.post("/audiences/power-users", url.Values{"name": {"Power Users"}, "source": {"web"}, "rule": {`{"event": `}})
	p.contains(t, http.StatusBadRequest, `id="rule-error" class="field-error">This is not JSON`)
	p = b.post("/audiences/new", url.Values{"id": {"Bad Id"}, "name": {"Other"}, "source": {"nope"}, "event": {"Signed Up"}, "atLeast": {"0"}, "within": {"240000h"}})
	p.contains(t, http.StatusBadRequest, `id="id-error" class="field-error">`, `id="source-error" class="field-error">unknown source &#34;nope&#34;`,
		`id="within-error" class="field-error">`, `value="Signed Up"`)
	p = b.post("/audiences/new", url.Values{"id": {"other"}, "name": {"Power Users"}, "source": {"web"}, "event": {"Signed Up"}})
	p.contains(t, http.StatusBadRequest, `id="name-error" class="field-error">`, "power_users")
	p = b.post("/audiences/new", url.Values{"id": {"power-users"}, "name": {"Other"}, "source": {"web"}, "event": {"Signed Up"}})
	p.contains(t, http.StatusConflict, `id="id-error" class="field-error">a audience with id &#34;power-users&#34; exists already`)
	p = b.post("/audiences/new", url.Values{"id": {"empty"}, "name": {"Empty"}, "source": {"web"}})
	p.contains(t, http.StatusBadRequest, `id="rule-error" class="field-error">Say who is in the audience`)
	p = b.post("/traits/orders", url.Values{"name": {"Orders 30 Days"}, "source": {"web"}, "kind": {"first"}, "event": {"Order Completed"}, "property": {"sku"}, "within": {"720h"}})
	p.contains(t, http.StatusBadRequest, `id="within-error" class="field-error">`)
	p = b.post("/traits/orders", url.Values{"name": {"Orders 30 Days"}, "source": {"web"}, "kind": {"sum"}, "event": {"Order Completed"}, "property": {"revenue"}, "where": {`[{"property":""}]`}})
	p.contains(t, http.StatusBadRequest, `id="where-error" class="field-error">where[0]: needs an operator`)
	if n := len(h.env.Store.Snapshot().Audiences()); n != 1 {
		t.Fatalf("%d audiences after refused forms", n)
	}

	// The computed trait changed to another kind, with a where.
	p = b.post("/traits/orders", url.Values{"name": {"Orders 30 Days"}, "source": {"web"}, "kind": {"sum"}, "event": {"Order Completed"}, "property": {"revenue"},
		"within": {"2160h"}, "where": {`[{"property":"currency","equals":"EUR"}]`}})
	if p.Status != http.StatusSeeOther {
		t.Fatalf("edit trait: %d %s", p.Status, p.Body)
	}
	ct, _ = h.env.Store.Snapshot().ComputedTraitByID("orders")
	if ct.Count != nil || ct.Sum == nil || ct.Sum.Property != "revenue" || len(ct.Sum.Where) != 1 || ct.Sum.Where[0].Equals != "EUR" || time.Duration(ct.Sum.Within) != 2160*time.Hour {
		t.Fatalf("edited trait: %+v %+v", ct, ct.Sum)
	}
	b.get("/traits/orders").contains(t, http.StatusOK, `<option value="sum" selected>sum</option>`, `value="revenue"`, "&#34;currency&#34;", `<option value="2160h" selected>`)

	// CSRF: a form with another token changes nothing.
	p = b.post("/audiences/power-users/delete", url.Values{"_csrf": {"forged"}})
	p.contains(t, http.StatusForbidden, "CSRF")
	if _, ok := h.env.Store.Snapshot().AudienceByID("power-users"); !ok {
		t.Fatal("a forged delete deleted")
	}

	// Delete: the computed trait is in use by the audience's rule (409, said), then works.
	b.get("/traits/orders")
	b.post("/traits/orders/delete", nil).contains(t, http.StatusConflict, "in use")
	b.get("/audiences/power-users")
	if p = b.post("/audiences/power-users/delete", nil); p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, "/audiences?done=") {
		t.Fatalf("delete: %d %s", p.Status, p.Location)
	}
	b.get("/audiences")
	if p = b.post("/traits/orders/delete", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("delete trait: %d %s", p.Status, p.Body)
	}
	snap := h.env.Store.Snapshot()
	if len(snap.Audiences()) != 0 || len(snap.ComputedTraits()) != 0 {
		t.Fatalf("after deletes: %v %v", snap.Audiences(), snap.ComputedTraits())
	}
	b.get("/audiences/power-users").contains(t, http.StatusNotFound, "There is no audience")
	for _, auth := range fake.auth {
		if auth != "Bearer "+fakeAudiencesToken {
			t.Fatalf("a call without the token: %q", auth)
		}
	}
}

// TestUIAudiencePreviewAndProfile: the live member count of a form's rule (valid, invalid,
// service restoring, service down), the profile lookup (found, not found, service down), and
// the pages while the audiences service is down.
func TestUIAudiencePreviewAndProfile(t *testing.T) {
	h, fake := audiencesHarness(t)
	b := h.signIn(t)
	b.get("/audiences/new")
	preview := func(form url.Values, want string) {
		t.Helper()
		p := b.post("/audiences/preview", form)
		if p.Status != http.StatusOK || !strings.HasPrefix(p.Header.Get("Content-Type"), "text/plain") || !strings.Contains(p.Body, want) {
			t.Fatalf("preview %v: %d %q, want %q", form, p.Status, p.Body, want)
		}
		fast(t, p, "a preview")
	}
	preview(url.Values{"preview": {"1"}, "event": {"Order Completed"}, "atLeast": {"2"}, "within": {"168h"}}, "≈ 1,234 of 56,789 profiles match now.")
	if got := fake.lastRule(); got != `{"atLeast":2,"event":"Order Completed","within":"168h"}` {
		t.Errorf("the rule previewed: %s", got)
	}
	preview(url.Values{"trait": {"plan"}, "traitValue": {"42"}}, "≈ 1,234")
	if got := fake.lastRule(); got != `{"equals":42,"trait":"plan"}` {
		t.Errorf("the rule previewed: %s", got)
	}
	preview(url.Values{"trait": {"plan"}, "traitValue": {`"42"`}}, "≈ 1,234")
	if got := fake.lastRule(); got != `{"equals":"42","trait":"plan"}` {
		t.Errorf("the rule previewed: %s", got)
	}
	preview(url.Values{"rule": {`{"not":{"event":"Order Completed"}}`}, "event": {"ignored"}}, "≈ 1,234")
	if got := fake.lastRule(); got != `{"not":{"event":"Order Completed"}}` {
		t.Errorf("the rule previewed: %s", got)
	}
	asked := len(fake.rules)
	preview(url.Values{}, "Fill in an event or a trait")
	preview(url.Values{"event": {"x"}, "atLeast": {"-1"}}, "Not a valid rule yet: rule.atLeast: ")
	preview(url.Values{"rule": {`{"all":[{"event":"x","within":"1s"}]}`}}, "Not a valid rule yet: rule.all[0].within: ")
	preview(url.Values{"rule": {`{"computedTrait":"nope","equals":1}`}}, `Not a valid rule yet: rule.computedTrait: unknown computed trait "nope"`)
	preview(url.Values{"rule": {`{"event":`}}, "Not a rule yet: This is not JSON")
	preview(url.Values{"event": {"x"}, "atLeast": {"two"}}, "Not a rule yet: A whole number")
	if len(fake.rules) != asked {
		t.Errorf("an invalid rule was sent to the audiences service")
	}
	preview(url.Values{"event": {"Restoring"}}, "Preview unavailable: partition 0 is being restored from audiences.state.")
	if p := b.post("/audiences/preview", url.Values{"_csrf": {"forged"}, "event": {"x"}}); p.Status != http.StatusForbidden {
		t.Fatalf("a forged preview: %d", p.Status)
	}

	// The profile lookup.
	p := b.get("/audiences/profile?userId=u1")
	p.contains(t, http.StatusOK, "User u1", "ada@example.com", "<code>plan</code>", "<code>orders_30_days</code>", `href="/audiences/power-users"`,
		"2026-11-21 07:40:00 UTC", "anon-5f0a", `value="u1"`,
		"External ids", "<code>ios.idfa</code>", "idfa-77", "Merge history", "refusal", "blocked", "the value is blocked (AUDIENCES_IDENTITY_BLOCKED)")
	fast(t, p, "a profile")
	b.get("/audiences/profile?userId=nobody").contains(t, http.StatusNotFound, "No profile for “nobody”")
	b.get("/audiences/profile").contains(t, http.StatusOK, `<label for="userId">`)

	// An audience to list, then the audiences service goes down: every page still renders,
	// at once, and says so.
	b.get("/audiences/new")
	if p := b.post("/audiences/new", url.Values{"id": {"buyers"}, "name": {"Buyers"}, "source": {"web"}, "event": {"Order Completed"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("create: %d %s", p.Status, p.Body)
	}
	fake.Close()
	p = b.get("/audiences")
	p.contains(t, http.StatusOK, `href="/audiences/buyers"`, "–", "does not answer")
	fast(t, p, "the list, service down")
	p = b.get("/audiences/buyers")
	p.contains(t, http.StatusOK, `value="Order Completed"`, "does not answer")
	fast(t, p, "an audience, service down")
	preview(url.Values{"event": {"Order Completed"}}, "Preview unavailable: the audiences service does not answer.")
	p = b.get("/audiences/profile?userId=u1")
	p.contains(t, http.StatusServiceUnavailable, "does not answer")
	fast(t, p, "a profile, service down")
}

// TestUIAudiencesWrongToken: a refused token is said on the page.
func TestUIAudiencesWrongToken(t *testing.T) {
	fake := newFakeProfileAPI(t)
	h := newHarness(t, func(c *console.Config) { c.AudiencesURL = fake.URL })
	b := h.signIn(t)
	b.get("/audiences/profile?userId=u1").contains(t, http.StatusServiceUnavailable, "refused the console&#39;s token: set AUDIENCES_TOKEN")
}
