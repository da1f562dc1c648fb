package deliverer

import (
	"net/http"
	"testing"
	"time"
)

func TestAIMDGrowsWhileUsedAndAnswered(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAIMD(100)
	if a.current() != initialLimit {
		t.Fatalf("starts at %d", a.current())
	}
	a.sample(signalAnswered, 10, 0, now) // 10 in flight of 64: not in use, no growth
	if a.current() != initialLimit {
		t.Errorf("an idle limit grew to %d", a.current())
	}
	for range 64 { // a saturated limit: one more per answer, so it doubles per round trip
		a.sample(signalAnswered, a.current(), 0, now)
	}
	if a.current() != 100 {
		t.Errorf("after a saturated round trip: %d, want the ceiling 100", a.current())
	}
	if small := newAIMD(4); small.current() != 4 {
		t.Errorf("a ceiling under the initial limit: starts at %d", small.current())
	}
}

func TestAIMDCutsOncePerRoundTrip(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		sig  signal
		want int
	}{
		{"429 or 503 halve", signalOverload, 32},
		{"timeouts take 10%", signalFailure, 57},
		{"plain errors say nothing", signalNone, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAIMD(1024)
			for range 50 { // the requests in flight when the endpoint faltered: one cut
				a.sample(tc.sig, 64, 200*time.Millisecond, now)
			}
			if a.current() != tc.want {
				t.Fatalf("limit %d, want %d", a.current(), tc.want)
			}
			a.sample(tc.sig, 64, 200*time.Millisecond, now.Add(150*time.Millisecond)) // within the round trip
			if a.current() != tc.want {
				t.Errorf("cut twice within one round trip: %d", a.current())
			}
			if tc.sig == signalNone {
				return
			}
			a.sample(tc.sig, 64, 200*time.Millisecond, now.Add(250*time.Millisecond))
			if a.current() >= tc.want {
				t.Errorf("not cut in the next round trip: %d", a.current())
			}
			if a.slowStart {
				t.Error("still in slow start after a congestion signal")
			}
		})
	}
	a := newAIMD(1024)
	for i := range 200 { // never below one
		a.sample(signalOverload, 1, 0, now.Add(time.Duration(i)*time.Second))
	}
	if a.current() != 1 {
		t.Errorf("floor: %d", a.current())
	}
}

func TestSignalOf(t *testing.T) {
	for _, tc := range []struct {
		res  urlResult
		want signal
	}{
		{urlResult{Class: Success, Status: 200}, signalAnswered},
		{urlResult{Class: Status4xx, Status: 400}, signalAnswered},
		{urlResult{Class: Status429, Status: 429}, signalOverload},
		{urlResult{Class: Status5xx, Status: http.StatusServiceUnavailable}, signalOverload},
		{urlResult{Class: Status5xx, Status: http.StatusBadGateway}, signalFailure},
		{urlResult{Class: Status5xx, Status: http.StatusGatewayTimeout}, signalFailure},
		{urlResult{Class: Status5xx, Status: 500}, signalNone},
		{urlResult{Class: Timeout}, signalFailure},
		{urlResult{Class: ConnError}, signalFailure},
		{urlResult{Class: TLSError}, signalNone},
	} {
		if got := signalOf(&tc.res); got != tc.want {
			t.Errorf("%s %d: signal %d, want %d", tc.res.Class, tc.res.Status, got, tc.want)
		}
	}
}

// TestHostsSlowStartOnlyForAnsweringHosts: a full queue raises the limit of a host that has
// answered (slow start), never that of one that has not (dead or hanging), whose records are
// refused once it has been stalled for minStall; a slow host's full queue is refused at once.
func TestHostsSlowStartOnlyForAnsweringHosts(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	started := 0
	h := newHosts(100, 2, 20, 10*time.Second, time.Minute, func(func()) { started++ })
	w := waiter{start: func() {}, refuse: func(string, time.Duration) {}}
	fill := func(host string) {
		for {
			if ok, _, _ := h.acquire(host, 0, now); !ok {
				return
			}
		}
	}
	fill("dead:80")
	for range 2 {
		if res, _, _, _ := h.enqueue("dead:80", w, now); res != queued {
			t.Fatal("the queue takes two")
		}
	}
	// No request finished yet, so its drain time is unknown: the poll loop does not wait for
	// room (it would for a host known to drain its queue within maxHold), the limit does not
	// grow, its records are refused.
	if res, why, _, _ := h.enqueue("dead:80", w, now.Add(time.Millisecond)); res != refused || why != refusedBusy {
		t.Errorf("a full queue of a host that has not answered yet: %v %s, want refused (no wait, no growth)", res, why)
	}
	if res, why, _, _ := h.enqueue("dead:80", w, now.Add(minStall+time.Millisecond)); res != refused || why != refusedBusy {
		t.Errorf("a stalled host: %v %s, want refused", res, why)
	}
	if l := h.limit("dead:80", now); l.limit != initialLimit {
		t.Errorf("dead host's limit %d", l.limit)
	}

	fill("alive:80")
	h.release("alive:80", hostUp, signalAnswered, 10*time.Millisecond, 0, now) // it answers
	fill("alive:80")
	for range 2 {
		h.enqueue("alive:80", w, now)
	}
	before, startedBefore := h.limit("alive:80", now).limit, started
	if res, _, _, _ := h.enqueue("alive:80", w, now); res != queued || started != startedBefore+1 {
		t.Errorf("slow start: %v, started %d", res, started-startedBefore)
	}
	if after := h.limit("alive:80", now).limit; after != before+1 {
		t.Errorf("limit %d -> %d, want one more", before, after)
	}
	// After minStall without an answer the host counts as stalled: refused, even in slow start.
	if res, _, _, _ := h.enqueue("alive:80", w, now.Add(minStall+time.Millisecond)); res != refused {
		t.Errorf("a stalled host: %v", res)
	}

	// A fast host (1 ms a request) out of slow start, limit and queue full: the poll loop waits
	// for room (its queue drains within maxHold).
	h = newHosts(100, 2, 20, 10*time.Second, time.Minute, func(func()) {})
	fill("fast:80")
	h.release("fast:80", hostUp, signalFailure, time.Millisecond, 0, now)
	fill("fast:80")
	for range 2 {
		h.enqueue("fast:80", w, now)
	}
	if res, _, _, freed := h.enqueue("fast:80", w, now); res != full || freed == nil {
		t.Errorf("a fast host's full queue: %v, want full (wait for room)", res)
	}

	// A slow host (4 s a request) out of slow start, limit and queue full: refused at once, the
	// poll loop does not wait for it (256 waiting at 57 in flight take seconds to drain).
	h = newHosts(100, 256, 20, 10*time.Second, time.Minute, func(func()) {})
	fill("slow:80")
	h.release("slow:80", hostUp, signalFailure, 4*time.Second, 0, now) // a timeout: out of slow start
	h.release("slow:80", hostUp, signalAnswered, 4*time.Second, 0, now)
	fill("slow:80")
	for range 256 {
		if res, _, _, _ := h.enqueue("slow:80", w, now); res != queued {
			t.Fatal("the queue takes 256")
		}
	}
	if res, why, _, _ := h.enqueue("slow:80", w, now.Add(time.Second)); res != refused || why != refusedBusy {
		t.Errorf("a slow host's full queue: %v %s, want refused", res, why)
	}
}

// TestHostsPauseOnRetryAfter: a 429 (or 503) with Retry-After pauses its host: nothing is
// admitted until then, its waiters are refused with the pause's length, and the limit halves.
func TestHostsPauseOnRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := newHosts(64, 8, 20, 10*time.Second, time.Minute, func(func()) {})
	for range 64 {
		h.acquire("api:443", 0, now)
	}
	var refusals []string
	var waits []time.Duration
	w := waiter{start: func() {}, refuse: func(why string, wait time.Duration) { refusals, waits = append(refusals, why), append(waits, wait) }}
	h.enqueue("api:443", w, now)
	h.release("api:443", hostUp, signalOverload, 50*time.Millisecond, 5*time.Second, now)
	if len(refusals) != 1 || refusals[0] != refusedPaused || waits[0] != 5*time.Second {
		t.Fatalf("waiters on a paused host: %v %v", refusals, waits)
	}
	if l := h.limit("api:443", now.Add(time.Second)); l.limit != 32 || l.paused != 4*time.Second {
		t.Errorf("limit and pause %+v, want 32 and 4s", l)
	}
	if ok, why, wait := h.acquire("api:443", 0, now.Add(4*time.Second)); ok || why != refusedPaused || wait != time.Second {
		t.Errorf("during the pause: %v %s %v", ok, why, wait)
	}
	if res, why, wait, _ := h.enqueue("api:443", w, now.Add(4*time.Second)); res != refused || why != refusedPaused || wait != time.Second {
		t.Errorf("enqueue during the pause: %v %s %v", res, why, wait)
	}
	for range 63 {
		h.release("api:443", hostUp, signalAnswered, time.Millisecond, 0, now.Add(4*time.Second))
	}
	if ok, _, _ := h.acquire("api:443", 0, now.Add(5*time.Second)); !ok {
		t.Error("after the pause: not admitted")
	}
}

func TestDeferralsWaitForLongerTiers(t *testing.T) {
	tiers := []time.Duration{time.Minute, 10 * time.Second, time.Hour, 5 * time.Minute, time.Hour}
	for n, want := range map[int]time.Duration{0: 10 * time.Second, 1: 10 * time.Second, 2: time.Minute, 3: 5 * time.Minute, 4: time.Hour, 9: time.Hour} {
		if got := deferDelay(tiers, n); got != want {
			t.Errorf("deferral %d: %v, want %v", n, got, want)
		}
	}
}

// TestAIMDCeilingFollowsMaxConcurrency: a lower ceiling (a destination's maxConcurrency) takes
// effect at once; the limit never grows past it.
func TestAIMDCeilingFollowsMaxConcurrency(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := newHosts(1024, 0, 20, 10*time.Second, time.Minute, func(func()) {})
	for range 5 {
		if ok, _, _ := h.acquire("a:80 capped", 5, now); !ok {
			t.Fatal("the first 5 are admitted")
		}
	}
	if ok, why, _ := h.acquire("a:80 capped", 5, now); ok || why != refusedBusy {
		t.Fatalf("the 6th: %v %s, want refused at the cap", ok, why)
	}
	for range 50 {
		h.release("a:80 capped", hostUp, signalAnswered, time.Millisecond, 0, now)
		h.acquire("a:80 capped", 5, now)
	}
	if l := h.limit("a:80 capped", now).limit; l != 5 {
		t.Errorf("limit %d, want the cap 5", l)
	}
	h.acquire("a:80 capped", 2, now) // the cap lowered
	if l := h.limit("a:80 capped", now).limit; l != 2 {
		t.Errorf("limit %d after the cap went to 2", l)
	}
}
