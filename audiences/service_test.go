package audiences_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/audiences"
)

const sources = `
sources:
  - id: web
    name: Web
    writeKey: wk_web
  - id: engage
    name: Engage
    writeKey: wk_engage
`

const orders = `
computedTraits:
  - id: orders
    name: Orders Total
    source: engage
    sum:
      event: Order Completed
      property: revenue
`

const buyers = `
audiences:
  - id: buyers
    name: Repeat Buyers
    source: engage
    rule:
      event: Order Completed
      atLeast: 2
      within: 1h
`

// TestSyncSendsMembersThenChanges: a new audience over existing profiles sends one identify
// per member; later syncs send only joins and leaves; a window that expires makes a member
// leave without any new event.
func TestSyncSendsMembersThenChanges(t *testing.T) {
	h := newHarness(t, sources+orders)
	svc, _, _ := h.run("aud-0", nil)
	for i := range 5 {
		u := fmt.Sprintf("u%d", i)
		h.track(u, "Order Completed", `{"revenue":10}`)
		if i < 3 {
			h.track(u, "Order Completed", `{"revenue":5}`)
		}
	}
	// The computed trait's first values.
	got := h.identifies(5, 10*time.Second)
	users := byUser(got)
	for i := range 5 {
		u := fmt.Sprintf("u%d", i)
		want := map[string]any{"orders_total": 10.0}
		if i < 3 {
			want = map[string]any{"orders_total": 15.0}
		}
		if fmt.Sprint(users[u]) != fmt.Sprint(want) {
			t.Errorf("computed trait, %s: got %v, want %v", u, users[u], want)
		}
	}
	h.quiet(1500 * time.Millisecond) // nothing changed: nothing sent

	// A new audience over the existing profiles: one identify per member, true.
	h.Apply(sources + orders + buyers)
	got = h.identifies(3, 10*time.Second)
	users = byUser(got)
	for i := range 5 {
		u := fmt.Sprintf("u%d", i)
		var want map[string]any
		if i < 3 {
			want = map[string]any{"repeat_buyers": true}
		}
		if fmt.Sprint(users[u]) != fmt.Sprint(want) {
			t.Errorf("first sync, %s: got %v, want %v", u, users[u], want)
		}
	}
	for _, id := range got {
		if id.source != "engage" || id.key != id.UserID {
			t.Errorf("identify %v: source %q key %q", id, id.source, id.key)
		}
		if p := id.Context.Personas; p["audience_id"] != "buyers" || p["audience_key"] != "repeat_buyers" || p["computation_class"] != "audience" {
			t.Errorf("audience identify personas: %v", p)
		}
	}

	// A later sync: only the user who joined.
	h.track("u3", "Order Completed", `{"revenue":1}`)
	got = h.identifies(2, 10*time.Second)
	if u := byUser(got); len(got) != 2 || fmt.Sprint(u["u3"]) != fmt.Sprint(map[string]any{"repeat_buyers": true, "orders_total": 11.0}) {
		t.Fatalf("second sync: %v", got)
	}
	h.quiet(2500 * time.Millisecond)

	// The window (1h) passes: every member leaves at the next sync, no event needed. The
	// all-time sum does not change.
	h.clock.Advance(61 * time.Minute)
	got = h.identifies(4, 10*time.Second)
	for _, id := range got {
		if len(id.Traits) != 1 || id.Traits["repeat_buyers"] != false {
			t.Errorf("after the window: %v, want repeat_buyers false", id)
		}
	}
	var a audiences.AudienceView
	eventually(t, 5*time.Second, func() string {
		get(t, svc, "/v1/audiences/buyers", "", &a)
		if a.Members != 0 || a.LastSync.Leaves+a.LastSync.Joins != 0 && a.LastSync.Leaves != 4 {
			return fmt.Sprintf("audience view after the window: %+v", a)
		}
		return ""
	})
	h.quiet(2500 * time.Millisecond)
}

// TestRealtimeAudience: a realtime audience sends the join within a second of the event.
func TestRealtimeAudience(t *testing.T) {
	h := newHarness(t, sources+`
audiences:
  - id: vip
    name: VIP
    source: engage
    realtime: true
    rule:
      trait: plan
      equals: pro
`)
	cfgSlow := func(c *audiences.Config) { c.SyncInterval = time.Hour }
	h.run("aud-rt", cfgSlow)
	h.send(`{"type":"identify","userId":"u1","traits":{"plan":"free"}}`)
	h.quiet(time.Second)
	start := time.Now()
	h.send(`{"type":"identify","userId":"u1","traits":{"plan":"pro"}}`)
	got := h.identifies(1, 5*time.Second)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the realtime join took %v", took)
	}
	if len(got) != 1 || got[0].UserID != "u1" || got[0].Traits["vip"] != true {
		t.Fatalf("realtime join: %v", got)
	}
	h.send(`{"type":"identify","userId":"u1","traits":{"plan":null}}`)
	got = h.identifies(1, 5*time.Second)
	if len(got) != 1 || got[0].Traits["vip"] != false {
		t.Fatalf("realtime leave (trait removed by null): %v", got)
	}
}
