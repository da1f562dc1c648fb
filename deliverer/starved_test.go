package deliverer_test

import (
	"context"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestStarvedDelivererHoldsBackInsteadOfDeferring: a deliverer starved of CPU — one P
// (GOMAXPROCS=1) shared with busy neighbours, as when the whole product shares a small machine
// under load — and a fast endpoint that answers at once. Its answers come back late because the
// process is busy, not because the endpoint is: the deliverer must not defer a single record to
// a retry tier for that (nor raise the limit to thousands of requests at once, which only makes
// the process busier); it delivers everything, polling no faster than it sends (docs/delivery.md#concurrency-found-per-endpoint).
// Before the latency-gradient limit, the AIMD limit's growth on queue pressure and its
// deferral of full queues did both.
func TestStarvedDelivererHoldsBackInsteadOfDeferring(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of real time")
	}
	skipUnderRace(t)
	api := newReceiver(t, func(int, *http.Request, http.ResponseWriter) {})
	h := newHarness(t, "1s,2s", destYAML(dest("api", []string{api.URL}, "")))
	reg, _ := h.run(h.config())
	h.send("api", messageIDs(0, 100)...) // warm up: the endpoint has answered
	api.waitRequests(t, 100, 10*time.Second)

	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	ctx, stop := context.WithCancel(context.Background())
	var busy sync.WaitGroup
	for range 3 { // neighbours that never yield: each holds the only P for a time slice
		busy.Go(func() {
			for ctx.Err() == nil {
				x := 0
				for i := range 1 << 16 {
					x += i ^ x
				}
				_ = x
			}
		})
	}
	const n = 20000 // 10,000 a second for 2 s
	for b := 100; b < n; b += 1000 {
		h.send("api", messageIDs(b, min(n, b+1000))...)
		time.Sleep(100 * time.Millisecond)
	}
	api.waitRequests(t, n, 90*time.Second)
	stop()
	busy.Wait()

	deferred := counter(t, reg, "tributary_deliverer_deferred_total")
	limit := counter(t, reg, "tributary_deliverer_concurrency_limit")
	t.Logf("%d delivered; %v deferred (%v host_at_bound); limit %v; held back %v times", n, deferred, counter(t, reg, "tributary_deliverer_deferred_total", "reason", "host_at_bound"), limit, counter(t, reg, "tributary_deliverer_held_back_total"))
	if deferred != 0 {
		t.Errorf("%v records of a fast endpoint deferred to a retry tier because the deliverer was starved", deferred)
	}
	if limit > 1024 {
		t.Errorf("limit %v: it grew with our own overload (10,000 a second to an endpoint that answers at once need tens)", limit)
	}
}
