package router_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/router"
	"github.com/tributary-cdp/tributary/schemas"
)

const baseYAML = `
sources:
  - id: web
    writeKey: wk_web
    trackingPlan: {blockedEvents: [Debug Event]}
  - id: app
    writeKey: wk_app
destinations:
  - id: orders
    type: webhooks
    sources: [web, app]
    settings: {webhooks: [{url: "https://orders.example.com/hook"}]}
  - id: growth
    type: webhooks
    sources: [web]
    settings: {webhooks: [{url: "https://growth.example.com/hook"}]}
`

func TestRouterFansOutOnePerEligibleDestination(t *testing.T) {
	for _, mode := range []struct {
		name        string
		exactlyOnce bool
	}{{"exactly-once", true}, {"at-least-once", false}} {
		t.Run(mode.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testRouterFansOut(t, mode.exactlyOnce) })
		})
	}
}

// testRouterFansOut runs inside a synctest bubble: the half second waitFor reads on to catch
// extra deliveries is virtual time.
func testRouterFansOut(t *testing.T, exactlyOnce bool) {
	h := newVirtualHarness(t, baseYAML)
	reg, _ := h.runRouter(func(c *router.Config) { c.ExactlyOnce = exactlyOnce })
	out := h.deliveries()
	h.event("web", `{"type":"track","event":"Order Completed","userId":"u1","messageId":"m1","properties":{"n":12345678901234567890}}`)
	h.event("web", `{"type":"track","event":"Debug Event","userId":"u1","messageId":"m2"}`)
	h.event("web", `{"type":"identify","userId":"u2","messageId":"m3","integrations":{"All":false}}`)
	h.event("web", `{"type":"identify","userId":"u3","messageId":"m4","integrations":{"all":false,"Webhooks":true}}`)
	h.event("app", `{"type":"page","anonymousId":"a1","messageId":"m5","name":"Home"}`)
	h.event("gone", `{"type":"page","anonymousId":"a1","messageId":"m6"}`)
	got := out.waitFor(5, 15*time.Second)
	count := map[string]int{}
	for _, r := range got {
		count[hdr(r, "message-id")+"→"+hdr(r, "destination-id")]++
		if want := hdr(r, "destination-id") + ":"; !strings.HasPrefix(string(r.Key), want) {
			t.Errorf("key %q does not start with %q", r.Key, want)
		}
		if hdr(r, "attempt") != "1" || hdr(r, "first-attempt-at") == "" {
			t.Errorf("headers %v", r.Headers)
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(r.Value, &body); err != nil || string(body["version"]) != "1" {
			t.Errorf("body %s (%v)", r.Value, err)
		}
	}
	want := map[string]int{"m1→orders": 1, "m1→growth": 1, "m4→orders": 1, "m4→growth": 1, "m5→orders": 1}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Fatalf("deliveries %v, want %v", count, want)
	}
	for outcome, n := range map[string]float64{"routed": 3, "blocked_tracking_plan": 1, "no_destination": 1, "unknown_source": 1} {
		if got := counter(t, reg, "tributary_router_messages_total", "outcome", outcome); got != n {
			t.Errorf("messages{outcome=%s} = %v, want %v", outcome, got, n)
		}
	}
	if got := counter(t, reg, "tributary_router_deliveries_total", "destination", "orders"); got != 3 {
		t.Errorf("deliveries{orders} = %v, want 3", got)
	}
}

// TestRouterLiveConfig changes the config mid-stream: each change applies within a second,
// without a restart. It runs inside a synctest bubble, so the second is virtual time: the
// store's fetch waits, not the machine's load, decide whether a change is in time.
func TestRouterLiveConfig(t *testing.T) { synctest.Test(t, testRouterLiveConfig) }

func testRouterLiveConfig(t *testing.T) {
	h := newVirtualHarness(t, baseYAML)
	h.runRouter(nil)
	out := h.deliveries()
	seen := 0
	send := func(id string) map[string]bool {
		t.Helper()
		h.event("web", `{"type":"track","event":"E","userId":"u","messageId":"`+id+`"}`)
		dests := map[string]bool{}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			got := out.waitFor(seen+1, 10*time.Second)
			for _, r := range got[seen:] {
				if hdr(r, "message-id") == id {
					dests[hdr(r, "destination-id")] = true
				}
			}
			seen = len(got)
			if len(dests) > 0 {
				break
			}
		}
		return dests
	}
	expect := func(id string, want ...string) {
		t.Helper()
		got := send(id)
		if len(got) != len(want) {
			t.Fatalf("%s went to %v, want %v", id, got, want)
		}
		for _, w := range want {
			if !got[w] {
				t.Fatalf("%s went to %v, want %v", id, got, want)
			}
		}
	}
	// waitConfig waits for the store to have applied a change, then at most a second more.
	change := func(yaml string, cond func() bool) {
		t.Helper()
		start := time.Now()
		h.apply(yaml)
		for !cond() {
			if time.Since(start) > time.Second {
				t.Fatalf("config change not visible after 1s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	expect("before", "orders", "growth")

	change(strings.Replace(baseYAML, "  - id: growth\n    type: webhooks\n", "  - id: growth\n    type: webhooks\n    enabled: false\n", 1), func() bool {
		d, _ := h.store.Snapshot().DestinationByID("growth")
		return !d.IsEnabled()
	})
	expect("disabled", "orders")

	change(baseYAML+`  - id: audit
    type: webhooks
    sources: [web]
    settings: {webhooks: [{url: "https://audit.example.com/hook"}]}
`, func() bool { _, ok := h.store.Snapshot().DestinationByID("audit"); return ok })
	expect("added", "orders", "growth", "audit")

	change(strings.Replace(baseYAML, "sources: [web, app]", "sources: [app]", 1), func() bool {
		d, _ := h.store.Snapshot().DestinationByID("orders")
		return len(d.Sources) == 1
	})
	expect("reconnected", "growth", "audit")
}

// TestRouterDeletionNoticesAndSuppression runs inside a synctest bubble: the waits for
// deliveries that must not come are virtual time.
func TestRouterDeletionNoticesAndSuppression(t *testing.T) {
	synctest.Test(t, testRouterDeletionNoticesAndSuppression)
}

func testRouterDeletionNoticesAndSuppression(t *testing.T) {
	h := newVirtualHarness(t, baseYAML+`  - id: off
    type: webhooks
    enabled: false
    sources: [web, app]
    settings: {webhooks: [{url: "https://off.example.com/hook"}]}
`)
	reg, stop := h.runRouter(func(c *router.Config) { c.TransactionalID = "deletion-test" })
	out := h.deliveries()
	del := func(v string) {
		h.produce(&kgo.Record{Topic: schemas.TopicDeletions, Key: []byte("u1"), Value: []byte(v)})
	}

	// Every source: web has orders and growth, app has orders; off is disabled.
	del(`{"userId":"u1","requestId":"r1","requestedAt":"2026-03-04T05:06:07.891Z"}`)
	got := out.waitFor(3, 15*time.Second)
	pairs := map[string]int{}
	for _, r := range got {
		pairs[hdr(r, "source-id")+"/"+hdr(r, "destination-id")]++
		if string(r.Value) != `{"type":"delete","userId":"u1","timestamp":"2026-03-04T05:06:07.891Z"}` {
			t.Errorf("delete body %s", r.Value)
		}
		if hdr(r, "type") != "delete" || !strings.HasPrefix(hdr(r, "message-id"), "delete-r1-") {
			t.Errorf("headers %v", r.Headers)
		}
	}
	if want := map[string]int{"web/orders": 1, "web/growth": 1, "app/orders": 1}; fmt.Sprint(pairs) != fmt.Sprint(want) {
		t.Fatalf("notices %v, want %v", pairs, want)
	}

	// Named source only, and suppression.
	del(`{"userId":"u1","requestId":"r2","kind":"SUPPRESS_WITH_DELETE","sourceIds":["app"]}`)
	got = out.waitFor(4, 15*time.Second)
	if r := got[3]; hdr(r, "source-id") != "app" || hdr(r, "destination-id") != "orders" {
		t.Fatalf("named-source notice went to %s/%s", hdr(r, "source-id"), hdr(r, "destination-id"))
	}
	h.event("web", `{"type":"track","event":"E","userId":"u1","messageId":"after-suppress"}`)
	h.event("web", `{"type":"track","event":"E","userId":"u2","messageId":"other-user"}`)
	got = out.waitFor(6, 15*time.Second)
	for _, r := range got[4:] {
		if hdr(r, "message-id") != "other-user" {
			t.Fatalf("suppressed user's event was routed: %s", hdr(r, "message-id"))
		}
	}
	if n := counter(t, reg, "tributary_router_messages_total", "outcome", "suppressed"); n != 1 {
		t.Fatalf("suppressed count %v, want 1", n)
	}
	if n := counter(t, reg, "tributary_router_suppressed_users"); n != 1 {
		t.Fatalf("suppressed users gauge %v, want 1", n)
	}

	// A restarted router reads the suppression back from the compacted topic.
	stop()
	reg, _ = h.runRouter(func(c *router.Config) { c.TransactionalID = "deletion-test" })
	deadline := time.Now().Add(10 * time.Second)
	for counter(t, reg, "tributary_router_suppressed_users") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("a new router did not load the suppression list")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Unsuppress restores delivery (and sends no notice).
	del(`{"userId":"u1","requestId":"r3","kind":"UNSUPPRESS"}`)
	deadline = time.Now().Add(10 * time.Second)
	for counter(t, reg, "tributary_router_suppressed_users") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("unsuppress not applied")
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.event("web", `{"type":"track","event":"E","userId":"u1","messageId":"after-unsuppress"}`)
	got = out.waitFor(6+2, 15*time.Second) // to orders and growth
	for _, r := range got[6:] {
		if hdr(r, "message-id") != "after-unsuppress" {
			t.Fatalf("unexpected delivery %s (%s)", hdr(r, "message-id"), r.Value)
		}
	}

	// An invalid request is counted and skipped; the next one still works. A user id with a
	// control character, or longer than schemas.MaxSubjectIDBytes, is invalid.
	del(`{"userId":"u9","kind":"FORGET"}`)
	del(`{"userId":"u9\n"}`)
	del(`{"userId":"` + strings.Repeat("u", schemas.MaxSubjectIDBytes+1) + `"}`)
	del(`{"userId":"u9","requestId":"r4","sourceIds":["app"]}`)
	got = out.waitFor(9, 15*time.Second)
	if n := counter(t, reg, "tributary_router_deletion_requests_total", "kind", "invalid"); n != 3 {
		t.Fatalf("invalid deletion requests %v, want 3", n)
	}
	if len(got) != 9 {
		t.Fatalf("%d deliveries in all, want 9 (nothing routed twice across the restart)", len(got))
	}
	for _, r := range got[8:] {
		if !strings.HasPrefix(hdr(r, "message-id"), "delete-r4-") {
			t.Fatalf("unexpected %s", hdr(r, "message-id"))
		}
	}
}

// Every deletion request processed gives one tracking.deletions.status record, keyed by its
// request id (the derived one when it has none), counting the delete notices written with it
// and saying whether the suppression list was written;
// a request that does not decode gives none. Exactly once and at least once alike.
func TestRouterDeletionStatus(t *testing.T) {
	for _, exactlyOnce := range []bool{true, false} {
		t.Run(fmt.Sprintf("exactly once %v", exactlyOnce), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testRouterDeletionStatus(t, exactlyOnce) })
		})
	}
}

func testRouterDeletionStatus(t *testing.T, exactlyOnce bool) {
	h := newVirtualHarness(t, `
sources: [{id: web, writeKey: wk_web}, {id: app, writeKey: wk_app}]
destinations:
  - {id: a, type: webhooks, sources: [web], settings: {webhooks: [{url: "https://a.example.com/hook"}]}}
  - {id: b, type: webhooks, sources: [app], settings: {webhooks: [{url: "https://b.example.com/hook"}]}}
  - {id: off, type: webhooks, enabled: false, sources: [web, app], settings: {webhooks: [{url: "https://off.example.com/hook"}]}}
`)
	h.runRouter(func(c *router.Config) { c.ExactlyOnce = exactlyOnce })
	out := h.deliveries()
	status := h.env.Reader(schemas.TopicDeletionsStatus)
	status.Settle = settle
	for _, v := range []string{
		`{"userId":"u1","requestId":"r1"}`,
		`{"userId":"u1","kind":"FORGET","requestId":"r-bad"}`,
		`{"userId":"u2","requestId":"r2","kind":"SUPPRESS_ONLY"}`,
		`{"userId":"u3","kind":"SUPPRESS_WITH_DELETE","sourceIds":["app"]}`,
	} {
		h.produce(&kgo.Record{Topic: schemas.TopicDeletions, Key: []byte("u"), Value: []byte(v)})
	}
	notices := out.waitFor(3, 15*time.Second)
	got := status.WaitFor(3, 15*time.Second)
	if len(got) != 3 || len(notices) != 3 {
		t.Fatalf("%d status records and %d notices, want 3 and 3 (none for the invalid request)", len(got), len(notices))
	}
	want := []struct {
		key, user, kind string
		notices         int
		suppressed      bool
	}{
		{"r1", "u1", schemas.KindDeleteOnly, 2, false},
		{"r2", "u2", schemas.KindSuppressOnly, 0, true},
		{schemas.TopicDeletions + "-", "u3", schemas.KindSuppressWithDelete, 1, true}, // derived: tracking.deletions-<partition>-<offset>
	}
	byUser := map[string]*kgo.Record{} // partitions keyed by request id: read in any order
	for _, r := range got {
		s, err := schemas.DecodeDeletionStatus(r.Value)
		if err != nil {
			t.Fatalf("status %s: %v", r.Value, err)
		}
		byUser[s.UserID] = r
	}
	for _, w := range want {
		r := byUser[w.user]
		if r == nil {
			t.Fatalf("no status for %s", w.user)
		}
		s, _ := schemas.DecodeDeletionStatus(r.Value)
		at, perr := schemas.ParseTimestamp(s.ProcessedAt)
		if !strings.HasPrefix(string(r.Key), w.key) || s.RequestID != string(r.Key) || s.Kind != w.kind ||
			s.Notices != w.notices || s.SuppressionWritten != w.suppressed || perr != nil || at.IsZero() {
			t.Errorf("status of %s: key %s value %s, want key %s…, kind %s, %d notices, suppressionWritten %v", w.user, r.Key, r.Value, w.key, w.kind, w.notices, w.suppressed)
		}
	}
	derived := string(byUser["u3"].Key)
	var appNotice string
	for _, r := range notices {
		if hdr(r, "source-id") == "app" && strings.Contains(hdr(r, "message-id"), "-"+schemas.TopicDeletions+"-") {
			appNotice = hdr(r, "message-id")
		}
	}
	if appNotice != "delete-"+derived+"-app" {
		t.Errorf("notice of the request without an id: message id %q, want delete-%s-app", appNotice, derived)
	}
}
