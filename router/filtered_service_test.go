package router_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/router"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestRouterWritesFilteredRecords: the router writes one webhooks.attempts record of class
// filtered per message it drops for a destination of its source, with the reason — a
// duplicate, the tracking plan, a suppressed user, an integrations switch — in both delivery
// modes, each once; a routed message has none; ROUTER_FILTERED_RECORDS=false writes none.
func TestRouterWritesFilteredRecords(t *testing.T) {
	for _, c := range []struct {
		name                     string
		exactlyOnce, filteredOff bool
	}{{"exactly-once", true, false}, {"at-least-once", false, false}, {"off", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testRouterFilteredRecords(t, c.exactlyOnce, c.filteredOff) })
		})
	}
}

func testRouterFilteredRecords(t *testing.T, exactlyOnce, off bool) {
	h := newVirtualHarness(t, baseYAML) // web → orders, growth (plan blocks "Debug Event"); app → orders
	h.produce(&kgo.Record{Topic: schemas.TopicSuppressions, Key: []byte("bad"),
		Value: schemas.Suppression{UserID: "bad", SuppressedAt: "2026-11-27T10:00:00.000Z"}.Record()})
	reg, _ := h.runRouter(func(c *router.Config) { c.ExactlyOnce, c.FilteredRecords = exactlyOnce, !off })
	attempts := h.env.Reader(schemas.TopicAttempts)
	attempts.Settle = settle
	m1 := `{"type":"track","event":"Order Completed","userId":"u1","messageId":"m1"}`
	h.produce(eventRecord(t, "web", m1), eventRecord(t, "web", m1),
		eventRecord(t, "web", `{"type":"track","event":"Debug Event","userId":"u1","messageId":"m2"}`),
		eventRecord(t, "web", `{"type":"identify","userId":"bad","messageId":"m3"}`),
		eventRecord(t, "web", `{"type":"identify","userId":"u2","messageId":"m4","integrations":{"All":false,"Mixpanel":true}}`),
		eventRecord(t, "app", `{"type":"identify","userId":"u2","messageId":"m5"}`))
	out := h.deliveries()
	out.waitFor(3, 15*time.Second) // m1 → orders, growth; m5 → orders
	if off {
		if n := attempts.Poll(); n != 0 {
			t.Fatalf("%d attempt records with ROUTER_FILTERED_RECORDS=false", n)
		}
		return
	}
	want := []string{"m1→growth:duplicate", "m1→orders:duplicate", "m2→growth:tracking_plan", "m2→orders:tracking_plan",
		"m3→growth:suppressed", "m3→orders:suppressed", "m4→growth:integrations_off", "m4→orders:integrations_off"}
	var got []string
	for _, r := range attempts.WaitFor(len(want), 15*time.Second) {
		a, err := schemas.DecodeAttemptRecord(r.Value)
		if err != nil || a.ErrorClass != schemas.ClassFiltered || string(r.Key) != a.DestinationID || a.Status != 0 || a.URL != "" {
			t.Errorf("record %s: %+v, %v", r.Value, a, err)
		}
		if _, err := time.Parse(time.RFC3339Nano, a.At); err != nil {
			t.Errorf("record %s: at: %v", r.Value, err)
		}
		got = append(got, a.MessageID+"→"+a.DestinationID+":"+string(a.Reason))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("filtered records %v, want %v", got, want)
	}
	if n := counter(t, reg, "tributary_router_filtered_records_total"); n != float64(len(want)) {
		t.Errorf("tributary_router_filtered_records_total = %v, want %d", n, len(want))
	}
}
