package router_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/router"
)

// TestDuplicatesAreRoutedOnce sends messages again, as clients retrying after a timeout do:
// within DEDUPE_WINDOW a (source, messageId) already routed is dropped, in the same poll or a
// later one; the same messageId from another source is another message; after the window
// the message is routed again.
func TestDuplicatesAreRoutedOnce(t *testing.T) {
	for _, exactlyOnce := range []bool{true, false} {
		t.Run(fmt.Sprintf("exactly-once=%v", exactlyOnce), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testDuplicatesRoutedOnce(t, exactlyOnce) })
		})
	}
}

func testDuplicatesRoutedOnce(t *testing.T, exactlyOnce bool) {
	h := newVirtualHarness(t, baseYAML) // web → orders, growth; app → orders
	reg, _ := h.runRouter(func(c *router.Config) { c.ExactlyOnce = exactlyOnce })
	out := h.deliveries()
	m1 := `{"type":"track","event":"Order Completed","userId":"u1","messageId":"m1"}`
	h.produce(eventRecord(t, "web", m1), eventRecord(t, "web", m1), eventRecord(t, "app", m1))
	out.waitFor(3, 15*time.Second)
	h.event("web", m1)
	h.event("web", `{"type":"track","event":"Order Completed","userId":"u1","messageId":"m2"}`)
	got := out.waitFor(5, 15*time.Second)
	if len(got) != 5 {
		t.Fatalf("%d deliveries within the window, want 5 (m1 to orders and growth from web, to orders from app; m2 to both)", len(got))
	}
	if n := counter(t, reg, "tributary_router_messages_total", "outcome", "duplicate"); n != 2 {
		t.Errorf("duplicates counted: %v, want 2", n)
	}
	time.Sleep(router.DefaultConfig().DedupeWindow + time.Second)
	h.event("web", m1)
	if got := out.waitFor(7, 15*time.Second); len(got) != 7 {
		t.Fatalf("%d deliveries after the window, want 7: m1 routed again", len(got))
	}
}

// TestDedupeRemembersAcrossRouters stops a router and starts another one (another instance,
// as after a crash or a scale-down): the messages the first routed are still duplicates for
// the second, which restores the memory from router.dedupe, in both delivery modes. A window
// of 0 turns de-duplication off.
func TestDedupeRemembersAcrossRouters(t *testing.T) {
	for _, exactlyOnce := range []bool{true, false} {
		t.Run(fmt.Sprintf("exactly-once=%v", exactlyOnce), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testDedupeAcrossRouters(t, exactlyOnce) })
		})
	}
	t.Run("off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newVirtualHarness(t, baseYAML)
			h.runRouter(func(c *router.Config) { c.DedupeWindow = 0 })
			out := h.deliveries()
			m := `{"type":"identify","userId":"u1","messageId":"m1"}`
			h.produce(eventRecord(t, "web", m), eventRecord(t, "web", m))
			if got := out.waitFor(4, 15*time.Second); len(got) != 4 {
				t.Fatalf("%d deliveries with DEDUPE_WINDOW=0, want 4", len(got))
			}
		})
	})
}

func testDedupeAcrossRouters(t *testing.T, exactlyOnce bool) {
	h := newVirtualHarness(t, baseYAML)
	msg := func(n int) string {
		return fmt.Sprintf(`{"type":"track","event":"E","userId":"u%d","messageId":"m%d"}`, n, n)
	}
	_, stop := h.runRouter(func(c *router.Config) { c.ExactlyOnce = exactlyOnce })
	out := h.deliveries()
	for n := range 20 {
		h.event("web", msg(n))
	}
	out.waitFor(40, 15*time.Second)
	stop()
	reg, _ := h.runRouter(func(c *router.Config) { c.ExactlyOnce = exactlyOnce })
	for n := range 21 {
		h.event("web", msg(n))
	}
	got := out.waitFor(42, 30*time.Second)
	count := map[string]int{}
	for _, r := range got {
		count[hdr(r, "message-id")]++
	}
	if len(got) != 42 || count["m20"] != 2 {
		t.Fatalf("%d deliveries (%v), want 42: only m20 is new to the second router", len(got), count)
	}
	if n := counter(t, reg, "tributary_router_messages_total", "outcome", "duplicate"); n != 20 {
		t.Errorf("duplicates counted by the second router: %v, want 20", n)
	}
}

// TestDedupeWaitsForItsTopic: a router whose router.dedupe does not exist yet (a cluster
// upgraded without running the init) waits for it, routing nothing, and routes once it is
// created — it does not stop.
func TestDedupeWaitsForItsTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newVirtualHarness(t, baseYAML)
		const topic = "router.dedupe-created-later"
		h.runRouter(func(c *router.Config) { c.DedupeTopic = topic })
		out := h.deliveries()
		h.event("web", `{"type":"identify","userId":"u1","messageId":"m1"}`)
		time.Sleep(10 * time.Second)
		if out.poll(); len(out.got) != 0 {
			t.Fatalf("%d deliveries before %s existed", len(out.got), topic)
		}
		if err := platform.EnsureTopics(h.ctx, kadm.NewClient(h.cl), -1, []platform.TopicSpec{{Name: topic, Partitions: 3}}); err != nil {
			t.Fatal(err)
		}
		if got := out.waitFor(2, 30*time.Second); len(got) != 2 {
			t.Fatalf("%d deliveries once %s exists, want 2", len(got), topic)
		}
	})
}
