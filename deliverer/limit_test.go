package deliverer

import (
	"net/http"
	"testing"
	"time"
)

// endpoint models a server for the limiter: each request takes base, plus, beyond capacity
// requests at once, its share of the queue (a server with capacity workers), plus local per
// request in flight (the deliverer's own cost of each: a busy process answers later the more
// it has in flight).
type endpoint struct {
	base     time.Duration
	capacity int // 0: unbounded
	local    time.Duration
}

func (e endpoint) latency(inFlight int) time.Duration {
	d := e.base + time.Duration(inFlight)*e.local
	if e.capacity > 0 && inFlight > e.capacity {
		d = d * time.Duration(inFlight) / time.Duration(e.capacity)
	}
	return d
}

// simulate offers rate requests a second to ep through a gradient limit for dur, in 1 ms steps,
// and returns the limit, the requests completed and the peak in flight. Requests over the
// limit wait (the host's queue, unbounded here).
func simulate(g *gradient, ep func(time.Duration) endpoint, rate int, start time.Time, dur time.Duration) (limit, done, peak int) {
	type due struct {
		at   time.Time
		took time.Duration
	}
	var inFlight []due // kept ordered by at within a step's additions; completion scans all
	backlog := 0.0
	for t := time.Duration(0); t < dur; t += time.Millisecond {
		now := start.Add(t)
		// Completions.
		kept := inFlight[:0]
		var ended []due
		for _, d := range inFlight {
			if !d.at.After(now) {
				ended = append(ended, d)
			} else {
				kept = append(kept, d)
			}
		}
		inFlight = kept
		for i, d := range ended {
			g.sample(signalAnswered, len(inFlight)+len(ended)-i, d.took, 0, 0, now)
			done++
		}
		// Arrivals, started up to the limit.
		backlog += float64(rate) / 1000
		e := ep(t)
		for backlog >= 1 && len(inFlight) < g.current() {
			backlog--
			took := e.latency(len(inFlight) + 1)
			inFlight = append(inFlight, due{at: now.Add(took), took: took})
		}
		peak = max(peak, len(inFlight))
	}
	return g.current(), done, peak
}

// TestGradientConverges: the limit follows what the endpoint needs — rate × latency — for fast,
// slow, bounded and changing endpoints, and does not grow with our own overload.
func TestGradientConverges(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fixed := func(e endpoint) func(time.Duration) endpoint { return func(time.Duration) endpoint { return e } }
	for _, tc := range []struct {
		name           string
		ep             func(time.Duration) endpoint
		rate           int
		dur            time.Duration
		minLim, maxLim int
		minDone        int
	}{
		// 10,000 a second to a 1 ms endpoint need 10 at once: the limit is not used, so it
		// stays where it started and every request is served.
		{"fast", fixed(endpoint{base: time.Millisecond}), 10000, 5 * time.Second, initialLimit, initialLimit, 49000},
		// 5,000 a second to a 1 s endpoint need 5,000 at once: reached within seconds.
		{"slow 1s", fixed(endpoint{base: time.Second}), 5000, 15 * time.Second, 5000, 8192, 35000},
		// A server of 100 workers at 20 ms a request (5,000 a second at most), offered
		// 8,000: the limit settles near its capacity, not at the ceiling.
		{"bounded server", fixed(endpoint{base: 20 * time.Millisecond, capacity: 100}), 8000, 20 * time.Second, 60, 300, 80000},
		// Our own cost per request in flight (0.2 ms each): the latency grows with the limit,
		// so the limit stays where answers still come back in time.
		{"local overload", fixed(endpoint{base: time.Millisecond, local: 200 * time.Microsecond}), 20000, 10 * time.Second, minLimit, 200, 0},
		// 20 ms, then 200 ms from 5 s on, at 2,000 a second: 40 at once, then 400 — and more
		// to catch up with the backlog of the 10 s the baseline takes to follow.
		{"slower endpoint", func(t time.Duration) endpoint {
			if t < 5*time.Second {
				return endpoint{base: 20 * time.Millisecond}
			}
			return endpoint{base: 200 * time.Millisecond}
		}, 2000, 25 * time.Second, 400, 8192, 35000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGradient(8192)
			lim, done, peak := simulate(&g, tc.ep, tc.rate, start, tc.dur)
			t.Logf("limit %d, %d done, peak %d in flight, round trip without load %v", lim, done, peak, g.roundTrip())
			if lim < tc.minLim || lim > tc.maxLim {
				t.Errorf("limit %d, want within [%d, %d]", lim, tc.minLim, tc.maxLim)
			}
			if done < tc.minDone {
				t.Errorf("%d requests done, want at least %d", done, tc.minDone)
			}
		})
	}
}

// TestGradientCutsOncePerRoundTrip: a congestion signal cuts the limit — 429 or 503 halve it,
// a timeout or connection error takes 10% off — once per round trip of the host.
func TestGradientCutsOncePerRoundTrip(t *testing.T) {
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
			g := newGradient(1024)
			for range 50 { // the requests in flight when the endpoint faltered: one cut
				g.sample(tc.sig, 64, 5*time.Second, 200*time.Millisecond, 0, now)
			}
			if g.current() != tc.want {
				t.Fatalf("limit %d, want %d", g.current(), tc.want)
			}
			g.sample(tc.sig, 64, 5*time.Second, 200*time.Millisecond, 0, now.Add(150*time.Millisecond)) // within the round trip
			if g.current() != tc.want {
				t.Errorf("cut twice within one round trip: %d", g.current())
			}
			if tc.sig == signalNone {
				return
			}
			g.sample(tc.sig, 64, 5*time.Second, 200*time.Millisecond, 0, now.Add(250*time.Millisecond))
			if g.current() >= tc.want {
				t.Errorf("not cut in the next round trip: %d", g.current())
			}
		})
	}
	g := newGradient(1024)
	for i := range 200 { // never below one
		g.sample(signalOverload, 1, 0, 0, 0, now.Add(time.Duration(i)*time.Second))
	}
	if g.current() != 1 {
		t.Errorf("floor: %d", g.current())
	}
	if small := newGradient(4); small.current() != 4 {
		t.Errorf("a ceiling under the initial limit: starts at %d", small.current())
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

// TestHostsFullQueue: when a host at its limit has a full queue, the poll loop waits for room
// (full) while the host is fast — its queue drains within maxHold at its baseline round trip,
// or it has not answered yet but its first requests are under firstAnswerHold old — without moving its
// limit; a slow host in slow start raises its limit by one instead; any other slow, stalled or
// silent host's records are refused (to a retry tier).
func TestHostsFullQueue(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := waiter{start: func() task { return nil }, refuse: func(string, time.Duration) {}}
	fill := func(h *hosts, host string, waiting int) {
		for {
			if ok, _, _ := h.acquire(host, 0, now); !ok {
				break
			}
		}
		for range waiting {
			if res, _, _, _ := h.enqueue(host, w, now); res != queued {
				t.Fatalf("%s: the queue takes %d", host, waiting)
			}
		}
	}
	// answer gives host a baseline round trip of took: a window of answers.
	answer := func(h *hosts, host string, took time.Duration) {
		for i := range minWindowSamples {
			h.acquire(host, 0, now)
			h.release(host, hostUp, signalAnswered, took, 0, now.Add(time.Duration(i)*limitWindow/minWindowSamples*2))
		}
	}

	// A new host: firstRoundTripRoom times the queue wait for its first answers.
	h := newHosts(100, 2, 20, 10*time.Second, time.Minute, func(task) {})
	fill(h, "new:80", 2*firstRoundTripRoom)
	if res, _, _, freed := h.enqueue("new:80", w, now.Add(time.Millisecond)); res != full || freed == nil {
		t.Errorf("a new host's full queue, its first answers due: %v, want full (wait)", res)
	}
	if res, _, _, _ := h.enqueue("new:80", w, now.Add(firstAnswerHold-time.Millisecond)); res != full {
		t.Errorf("a new host's full queue, no answer yet after %v: %v, want full (wait)", firstAnswerHold-time.Millisecond, res)
	}
	if res, why, _, _ := h.enqueue("new:80", w, now.Add(firstAnswerHold+time.Millisecond)); res != refused || why != refusedBusy {
		t.Errorf("no answer after firstAnswerHold: %v %s, want refused", res, why)
	}
	if res, _, _, _ := h.enqueue("new:80", w, now.Add(minStall+time.Millisecond)); res != refused {
		t.Errorf("a stalled host: %v, want refused", res)
	}
	if l := h.limit("new:80", now).limit; l != initialLimit {
		t.Errorf("a silent host's limit moved: %d", l)
	}

	// Its first answer starts every waiting record: the limit meets the queue (slow start).
	started := 0
	h = newHosts(1000, 2, 20, 10*time.Second, time.Minute, func(task) { started++ })
	fill(h, "first:80", 2*firstRoundTripRoom)
	h.release("first:80", hostUp, signalAnswered, time.Second, 0, now.Add(time.Second))
	if started != 2*firstRoundTripRoom {
		t.Errorf("the first answer started %d of the %d waiting records", started, 2*firstRoundTripRoom)
	}
	if l := h.limit("first:80", now).limit; l != initialLimit-1+2*firstRoundTripRoom {
		t.Errorf("limit %d after the first answer, want %d (what is in flight)", l, initialLimit-1+2*firstRoundTripRoom)
	}

	h = newHosts(100, 2, 20, 10*time.Second, time.Minute, func(task) {})
	answer(h, "fast:80", time.Millisecond)
	fill(h, "fast:80", 2)
	before := h.limit("fast:80", now).limit
	for range 100 { // however long the burst lasts
		if res, _, _, freed := h.enqueue("fast:80", w, now); res != full || freed == nil {
			t.Fatalf("a fast host's full queue: %v, want full (wait for room)", res)
		}
	}
	if after := h.limit("fast:80", now).limit; after != before {
		t.Errorf("waiting records moved the limit: %d -> %d", before, after)
	}

	// A slow host (4 s a request; 256 waiting at 64 take 16 s) in slow start: the limit meets
	// the demand, one more per record.
	h = newHosts(100, 256, 20, 10*time.Second, time.Minute, func(task) {})
	answer(h, "slow:80", 4*time.Second)
	fill(h, "slow:80", 256)
	before = h.limit("slow:80", now).limit
	if res, _, _, _ := h.enqueue("slow:80", w, now.Add(time.Millisecond)); res != queued {
		t.Errorf("a slow host in slow start, full queue: %v, want queued (the limit grows)", res)
	}
	if after := h.limit("slow:80", now).limit; after != before+1 {
		t.Errorf("slow start: limit %d -> %d, want one more", before, after)
	}
	// Out of slow start (a timeout cut it): refused, the poll loop does not wait for it.
	h.release("slow:80", hostDown, signalFailure, 5*time.Second, 0, now.Add(time.Second))
	fill(h, "slow:80", 0)
	if res, why, _, _ := h.enqueue("slow:80", w, now.Add(time.Second)); res != refused || why != refusedBusy {
		t.Errorf("a slow host's full queue out of slow start: %v %s, want refused", res, why)
	}
}

// TestHostsPauseOnRetryAfter: a 429 (or 503) with Retry-After pauses its host: nothing is
// admitted until then, its waiters are refused with the pause's length, and the limit halves.
func TestHostsPauseOnRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := newHosts(64, 8, 20, 10*time.Second, time.Minute, func(task) {})
	for range 64 {
		h.acquire("api:443", 0, now)
	}
	var refusals []string
	var waits []time.Duration
	w := waiter{start: func() task { return nil }, refuse: func(why string, wait time.Duration) { refusals, waits = append(refusals, why), append(waits, wait) }}
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

// TestLimitCeilingFollowsMaxConcurrency: a lower ceiling (a destination's maxConcurrency) takes
// effect at once; the limit never grows past it.
func TestLimitCeilingFollowsMaxConcurrency(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := newHosts(1024, 0, 20, 10*time.Second, time.Minute, func(task) {})
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
