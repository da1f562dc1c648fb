package audiences_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tributary-cdp/tributary/audiences"
)

// backfilled are definitions of every kind that read an aggregate, added to a config after
// the events they count (docs/audiences.md#backfill).
const backfilled = `
computedTraits:
  - {id: big-orders, name: Big Orders, source: engage, count: {event: Order Completed, where: [{property: revenue, gte: 10}]}}
  - {id: revenue, name: Revenue, source: engage, sum: {event: Order Completed, property: revenue, within: 720h}}
  - {id: avg-order, name: Avg Order, source: engage, avg: {event: Order Completed, property: revenue}}
  - {id: first-sku, name: First Sku, source: engage, first: {event: Order Completed, property: sku}}
  - {id: last-sku, name: Last Sku, source: engage, last: {event: Order Completed, property: sku}}
  - {id: top-sku, name: Top Sku, source: engage, mostFrequent: {event: Order Completed, property: sku}}
  - {id: skus, name: Skus, source: engage, uniqueList: {event: Order Completed, property: sku}}
audiences:
  - id: big-spenders
    name: Big Spenders
    source: engage
    rule: {event: Order Completed, atLeast: 2, within: 720h, where: [{property: revenue, gte: 10}]}
`

// order is an Order Completed of user u, d ago.
func (h *harness) order(u, id string, revenue float64, sku string, d time.Duration) {
	h.t.Helper()
	h.send(fmt.Sprintf(`{"type":"track","messageId":%q,"userId":%q,"event":"Order Completed","properties":{"revenue":%v,"sku":%q},"timestamp":%q}`,
		id, u, revenue, sku, at(-d)))
}

// wantBackfilled is what the first sync of backfilled sends for the orders of backfillOrders.
var wantBackfilled = map[string]map[string]any{
	"u1": {"big_orders": 2.0, "revenue": 35.0, "avg_order": 35.0 / 3, "first_sku": "a", "last_sku": "a", "top_sku": "a", "skus": []any{"a", "b"}, "big_spenders": true},
	"u2": {"big_orders": 1.0, "revenue": 12.0, "avg_order": 9.5, "first_sku": "x", "last_sku": "x", "top_sku": "x", "skus": []any{"x"}},
}

// backfillOrders sends the orders of wantBackfilled but u2's last: u1's at 3 days, 2 days,
// 1 hour ago (and a retry); u2's one 40 days ago (outside revenue's 720h, counted by the
// others). u2's last (m5, 12, now) is sent by the test.
func (h *harness) backfillOrders() {
	h.order("u1", "m1", 20, "a", 72*time.Hour)
	h.order("u1", "m2", 5, "b", 48*time.Hour)
	h.order("u1", "m1", 20, "a", 72*time.Hour) // a client's retry: counted once
	h.identify0("u3")
	h.order("u1", "m3", 10, "a", time.Hour)
	h.order("u2", "m4", 7, "x", 40*24*time.Hour)
}

// identify0 is an identify of u without traits (a profile that counts no order).
func (h *harness) identify0(u string) {
	h.t.Helper()
	h.send(fmt.Sprintf(`{"type":"identify","userId":%q,"traits":{}}`, u))
}

// checkBackfilled asserts that ids are the first sync of backfilled: every definition's value
// as if it had existed before the orders, sent once.
func checkBackfilled(t *testing.T, ids []identify, want map[string]map[string]any) {
	t.Helper()
	got := byUser(ids)
	b, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(b) != string(w) {
		t.Fatalf("first sync after the backfill:\n got %s\nwant %s", b, w)
	}
}

// TestBackfillEveryKind: definitions of every kind added after their events send, at their
// first sync, what they would have sent had they been configured before the events; an
// order sent after the config change (the boundary) counts once.
func TestBackfillEveryKind(t *testing.T) { synctest.Test(t, testBackfillEveryKind) }

func testBackfillEveryKind(t *testing.T) {
	h := newHarness(t, sources)
	h.backfillOrders()
	svc, reg, _ := h.run("aud-backfill", nil)
	h.advance(3 * time.Second) // every order applied, no definition
	h.quiet(time.Second)

	h.Apply(sources + backfilled)
	h.order("u2", "m5", 12, "x", 0) // after the change: the live path's
	got := h.identifies(15, 20*time.Second)
	checkBackfilled(t, got, wantBackfilled)
	h.quiet(3 * time.Second)

	var v audiences.AudienceView
	getJSON(t, h, api(svc)+"/v1/audiences/big-spenders", &v)
	if v.Backfill == nil || v.Backfill.State != "done" || v.Backfill.PartitionsDone != v.Backfill.Partitions || v.Backfill.Partitions == 0 {
		t.Fatalf("backfill progress: %+v", v.Backfill)
	}
	if n := counterValue(t, reg, "tributary_audiences_backfill_events_total"); n < 5 {
		t.Fatalf("backfill events: %v, want at least 5", n)
	}
}

// TestBackfillRestart: a service stopped while a backfill runs (or right after it) reads it
// again at its next start, and merges it once: the values are those of a backfill that was
// not interrupted.
func TestBackfillRestart(t *testing.T) {
	for _, stopAfter := range []time.Duration{0, 50 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second} {
		t.Run(stopAfter.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, sources)
				h.backfillOrders()
				h.order("u2", "m5", 12, "x", 0)
				_, _, stop := h.run("aud-backfill-restart", nil)
				h.advance(3 * time.Second)
				h.Apply(sources + backfilled)
				h.advance(stopAfter)
				stop()
				h.run("aud-backfill-restart", nil)
				// What both runs sent: each value once.
				checkBackfilled(t, h.identifies(15, 30*time.Second), wantBackfilled)
				h.quiet(3 * time.Second)
			})
		})
	}
}

func getJSON(t *testing.T, h *harness, url string, into any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := h.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatal(err)
	}
}

// counterValue is the value of the metric name (without labels) of reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestBackfillBoundary: orders sent one by one while the config change is seen, the backfill
// read and merged, each count once: the backfill's range and the live path's meet at the
// partition's position, whichever side of it each order falls.
func TestBackfillBoundary(t *testing.T) { synctest.Test(t, testBackfillBoundary) }

func testBackfillBoundary(t *testing.T) {
	h := newHarness(t, sources)
	for i := range 10 {
		h.order("u5", fmt.Sprintf("before-%d", i), 20, "a", time.Duration(i)*time.Hour)
	}
	svc, _, _ := h.run("aud-backfill-boundary", nil)
	h.advance(2 * time.Second)
	h.Apply(sources + backfilled)
	for i := range 20 {
		h.order("u5", fmt.Sprintf("during-%d", i), 20, "a", 0)
		h.advance(100 * time.Millisecond)
	}
	h.advance(3 * time.Second)
	var p audiences.ProfileView
	getJSON(t, h, api(svc)+"/v1/profiles/u5", &p)
	if got := string(p.ComputedTraits["big_orders"]); got != "30" {
		t.Fatalf("big_orders: %s, want 30 (10 before the change, 20 around it)", got)
	}
	if got := string(p.ComputedTraits["revenue"]); got != "600" {
		t.Fatalf("revenue: %s, want 600", got)
	}
}
