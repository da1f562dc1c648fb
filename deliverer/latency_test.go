package deliverer_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlowEndpointDoesNotHoldBackOthers: an endpoint that answers, slowly (1 s), with far more
// records than its concurrency takes, beside a fast one. Before, once the slow host's slots and
// queue were full, the poll loop waited for room and the fast destination got its records at the
// slow one's pace (2,000 slow records at 64 per second: half a minute). Now the slow host's limit
// grows with the demand and what does not fit goes to the first tier unsent: the fast
// destination gets its records at once, and the slow one all of its own.
func TestSlowEndpointDoesNotHoldBackOthers(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of real time")
	}
	slow := newReceiver(t, func(_ int, r *http.Request, _ http.ResponseWriter) {
		select {
		case <-time.After(time.Second):
		case <-r.Context().Done():
		}
	})
	fast := newReceiver(t, ok200)
	h := newHarness(t, "1s,2s", destYAML(dest("slow", []string{slow.URL}, ""), dest("fast", []string{fast.URL}, "")))
	h.run(h.config())

	// Warm up: the slow endpoint is known to answer, in about a second.
	h.send("slow", messageIDs(0, 64)...)
	slow.waitRequests(t, 64, 20*time.Second)
	time.Sleep(1500 * time.Millisecond)

	const slowN, fastN = 2000, 500
	start := time.Now()
	for b := 0; b < fastN; b += 100 {
		h.send("slow", messageIDs(64+b*4, 64+(b+100)*4)...) // ahead of the fast ones, in the same partitions
		h.send("fast", messageIDs(b, b+100)...)
	}
	got := fast.waitRequests(t, fastN, 60*time.Second)
	took := got[fastN-1].at.Sub(start)
	t.Logf("the fast endpoint got its %d records %v after they were sent, beside %d for a 1 s endpoint", fastN, took.Round(time.Millisecond), slowN)
	if took > 5*time.Second {
		t.Errorf("the fast destination waited %v for the slow one's records (head-of-line blocking)", took)
	}
	slow.waitRequests(t, 64+slowN, 60*time.Second)
}

// TestRetryAfterPausesTheEndpoint: a 429 with Retry-After stops every request to that endpoint
// until the pause is over; nothing is lost, and the records arrive after it.
func TestRetryAfterPausesTheEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of real time")
	}
	var mu sync.Mutex
	var firstLimited time.Time
	api := newReceiver(t, func(n int, _ *http.Request, w http.ResponseWriter) {
		if n <= 10 { // n counts from 1: the first ten requests
			mu.Lock()
			if firstLimited.IsZero() {
				firstLimited = time.Now()
			}
			mu.Unlock()
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	h := newHarness(t, "1s,2s", destYAML(dest("api", []string{api.URL}, "")))
	reg, _ := h.run(h.config())
	const n = 600 // 20 every 100 ms for 3 s: records keep coming during the pause
	for b := 0; b < n; b += 20 {
		h.send("api", messageIDs(b, b+20)...)
		time.Sleep(100 * time.Millisecond)
	}
	var reqs []received
	delivered := map[string]bool{} // the receiver answered requests 10 and later 200
	for deadline := time.Now().Add(30 * time.Second); len(delivered) < n && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		reqs = api.requests()
		for _, r := range reqs[min(10, len(reqs)):] {
			delivered[r.header.Get("X-Message-Id")] = true
		}
	}
	mu.Lock()
	pauseStart := firstLimited
	mu.Unlock()
	var during int
	seenID := map[string]int{}
	for i, r := range reqs {
		id := r.header.Get("X-Message-Id")
		// Requests already under way when the first 429 came back may still arrive: under
		// -race on a loaded machine, a wave of them sent together before any answer reached
		// the receiver's handlers 100 ms after the first 429. The window still spans 14 of
		// the test's sends, whose records would arrive in it if the pause were ignored.
		if r.at.After(pauseStart.Add(500*time.Millisecond)) && r.at.Before(pauseStart.Add(1900*time.Millisecond)) {
			during++
			first, ok := seenID[id]
			if !ok {
				first = i
			}
			t.Logf("request %d (%s, first sent as request %d) arrived %v after the first 429", i, id, first, r.at.Sub(pauseStart))
		}
		if _, ok := seenID[id]; !ok {
			seenID[id] = i
		}
	}
	if during > 0 {
		t.Errorf("%d requests during the 2 s pause", during)
	}
	for _, id := range messageIDs(0, n) {
		if !delivered[id] {
			var seen []int
			for i, r := range reqs {
				if r.header.Get("X-Message-Id") == id {
					seen = append(seen, i)
				}
			}
			t.Errorf("%s never delivered (requests %v of %d; dead letters %v)", id, seen, len(reqs), counter(t, reg, "tributary_deliverer_dlq_total"))
		}
	}
	if got := counter(t, reg, "tributary_deliverer_deferred_total", "reason", "endpoint_paused"); got == 0 {
		t.Error("no record was deferred for the pause")
	}
	// A deferred record waits for the tier that covers the pause, and says it was deferred.
	tier := h.reader("webhooks.retry.2s")
	var deferred int
	for _, r := range tier.waitFor(1, 10*time.Second) {
		if hdr(r, "last-error") == "endpoint_paused" {
			deferred++
			if hdr(r, "deferrals") != "1" || hdr(r, "attempt") != "1" {
				t.Errorf("deferred record: deferrals %q attempt %q", hdr(r, "deferrals"), hdr(r, "attempt"))
			}
		}
	}
	if deferred == 0 {
		t.Error("no deferred record on webhooks.retry.2s")
	}
}

// TestLimitFollowsTheEndpointsLatency: 1,000 records a second to an endpoint whose latency
// jumps from 10 ms to 300 ms mid-run. The rate needs 300 requests at once after the jump; the
// endpoint's limit follows (before, the fixed bound of 64 capped it at 213 a second and the
// backlog grew as long as the load lasted).
func TestLimitFollowsTheEndpointsLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of real time")
	}
	var latency atomic.Int64
	latency.Store(int64(10 * time.Millisecond))
	var inFlight, peak atomic.Int64
	api := newReceiver(t, func(_ int, r *http.Request, _ http.ResponseWriter) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		select {
		case <-time.After(time.Duration(latency.Load())):
		case <-r.Context().Done():
		}
	})
	h := newHarness(t, "1s,2s", destYAML(dest("api", []string{api.URL}, "")))
	reg, _ := h.run(h.config())
	const n = 4000 // 100 every 100 ms for 4 s; the latency jumps after 1 s
	for b := 0; b < n; b += 100 {
		if b == 1000 {
			latency.Store(int64(300 * time.Millisecond))
		}
		h.send("api", messageIDs(b, b+100)...)
		time.Sleep(100 * time.Millisecond)
	}
	sent := time.Now()
	reqs := api.waitRequests(t, n, 30*time.Second)
	behind := reqs[n-1].at.Sub(sent)
	limit := counter(t, reg, "tributary_deliverer_concurrency_limit")
	t.Logf("last of %d arrived %v after the last was sent; peak %d requests at once, limit %v", n, behind.Round(time.Millisecond), peak.Load(), limit)
	if behind > 2*time.Second {
		t.Errorf("the endpoint fell behind: its last record arrived %v after it was sent", behind)
	}
	if peak.Load() <= 64 || limit < 300 {
		t.Errorf("peak %d requests at once, limit %v: the limit did not follow the latency", peak.Load(), limit)
	}
}

// TestMaxConcurrencyCapsOneDestination: a destination with maxConcurrency 3 never has more than
// 3 requests in flight to its endpoint, and still gets every record; another destination on the
// same host is not held to it (nor to the first one's queue).
func TestMaxConcurrencyCapsOneDestination(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of real time")
	}
	var mu sync.Mutex
	inFlight, peak := map[string]int{}, map[string]int{}
	rc := newReceiver(t, func(_ int, r *http.Request, _ http.ResponseWriter) {
		mu.Lock()
		inFlight[r.URL.Path]++
		peak[r.URL.Path] = max(peak[r.URL.Path], inFlight[r.URL.Path])
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		inFlight[r.URL.Path]--
		mu.Unlock()
	})
	h := newHarness(t, "1s,2s", destYAML(
		dest("capped", []string{rc.URL + "/capped"}, ", maxConcurrency: 3"),
		dest("free", []string{rc.URL + "/free"}, "")))
	h.run(h.config())
	const n = 60
	h.send("capped", messageIDs(0, n)...)
	h.send("free", messageIDs(0, n)...)
	got := rc.waitRequests(t, 2*n, 30*time.Second)
	ids := map[string]bool{}
	for _, r := range got {
		if r.path == "/capped" {
			ids[r.header.Get("X-Message-Id")] = true
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != n {
		t.Errorf("the capped destination got %d of %d records", len(ids), n)
	}
	if peak["/capped"] > 3 {
		t.Errorf("the capped destination had %d requests in flight at once, want at most 3", peak["/capped"])
	}
	if peak["/free"] <= 3 {
		t.Errorf("the other destination on the same host had at most %d at once: held to the cap", peak["/free"])
	}
}
