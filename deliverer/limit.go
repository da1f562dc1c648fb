package deliverer

import (
	"math"
	"net/http"
	"time"
)

// The adaptive concurrency limit of an endpoint host (docs/delivery.md#concurrency-found-per-endpoint).
//
// It follows the gradient limit of Netflix's concurrency-limits (Gradient2Limit): the limit is
// scaled by the ratio of the host's baseline round trip to its recent one, so it stops growing,
// and shrinks, as soon as answers come back later than they used to. Growing on the pressure of
// waiting records, as the AIMD limit it replaced did, took our own overload for a slow
// endpoint: the limit rose to thousands of requests to a loopback receiver that needs tens, and
// the connections, goroutines and lock contention that cost made every answer slower still.
//
// Round trips are gathered in windows (at least limitWindow and minWindowSamples answers, at
// most maxLimitWindow), as concurrency-limits' windowed limit does. At the end of a window:
//
//   - a window in which fewer than half the limit were in use says nothing (app-limited);
//   - gradient = clamp(rttTolerance × max(baseline, local) / short, 0.5, 1), short being the
//     window's average round trip, local what the process's own busyness explains (lag.go);
//     round trips are taken at least rttFloor: below a few milliseconds, differences are
//     scheduling noise, not an endpoint's queue;
//   - gradient < 1: limit ← limit × (1 − smoothing) + (limit × gradient + √limit) × smoothing,
//     or, at 0.5 (three times slower than the baseline), limit × 0.5 + √limit;
//   - short within rttTolerance of the baseline, limit in use: it grows, by one per answer in
//     slow start (doubling each round trip, as TCP's), by √limit after;
//   - between the two (slower than the baseline, but only as slow as we are): it holds.
//
// The baseline is the fastest window of the last baselinePeriods periods, with its load (the
// requests in flight then). Slower under more load than the host was fast at is a queue — ours,
// at the endpoint — so the baseline stays and the limit shrinks; still slower once the limit has
// shrunk to half that load (and slower than our own busyness explains) is the endpoint's own
// change, so the baseline is reset to it and the host goes back to slow start. Near-equal loads
// do not decide it: on a saturated machine they reset the baseline again and again, and slow
// start ran the limit to the ceiling.
//
// A congestion signal cuts the limit as before: 429 or 503 (the endpoint asks for less) halves
// it, a timeout, a connection error, 502 or 504 takes 10% off, at most once per round trip (as
// TCP reacts once per window), so the requests in flight when an endpoint falters do not cut it
// to one. The limit stays within [minLimit, ceiling] (cuts may take it to one), ceiling being
// DELIVERER_MAX_PER_HOST or the destination's maxConcurrency. hosts.enqueue judges from the
// baseline whether a host with a full queue is slow (its records go to a retry tier) or fast and
// only held up by us (the poll loop waits: backpressure).

// signal is what one request's outcome says about its host's capacity.
type signal int

const (
	signalNone     signal = iota // no sample: the request did not run (shutdown), or a plain error answer
	signalAnswered               // an answer that is not a congestion signal: a round-trip sample
	signalOverload               // 429 or 503: the endpoint asks for less; halve
	signalFailure                // timeout, connection error, 502, 504: back off by 10%
)

// signalOf reads a POST's outcome.
func signalOf(r *urlResult) signal {
	switch r.Class {
	case Success, Status4xx, Status408:
		return signalAnswered
	case Status429:
		return signalOverload
	case Timeout, ConnError:
		return signalFailure
	case Status5xx:
		switch r.Status {
		case http.StatusServiceUnavailable:
			return signalOverload
		case http.StatusBadGateway, http.StatusGatewayTimeout:
			return signalFailure
		}
	}
	return signalNone
}

const (
	// initialLimit is a new host's limit: enough for any endpoint to start fast; it grows
	// within a round trip when the endpoint needs more.
	initialLimit = 64
	// minLimit is the lowest limit the gradient takes a host to (a congestion signal may cut
	// it lower, to one).
	minLimit = 8
	// limitDropWindow is the shortest time between two cuts of a host's limit.
	limitDropWindow = 100 * time.Millisecond
	// failureBackoff is what a failure leaves of the limit; an overload halves it.
	failureBackoff = 0.9
	// limitWindow and maxLimitWindow bound a sample window's length; minWindowSamples is the
	// fewest answers it needs before it ends before maxLimitWindow.
	limitWindow      = 50 * time.Millisecond
	maxLimitWindow   = time.Second
	minWindowSamples = 10
	// The baseline is the fastest window of the last baselinePeriods periods of
	// baselinePeriod: a host that turned slower for good (or a process that did) is taken as it
	// is within 1.5 to 2 s.
	baselinePeriod  = 500 * time.Millisecond
	baselinePeriods = 4
	// rttTolerance is how much slower than usual a window may be before the limit shrinks.
	rttTolerance = 1.5
	// smoothing is how much of a shrink a window applies.
	smoothing = 0.2
	// rttFloor is the least round trip the gradient compares: loopback and same-rack
	// endpoints answer within a millisecond, where scheduling noise of a busy process is the
	// whole difference.
	rttFloor = 5 * time.Millisecond
)

// gradient is one host's limit. It is a value with no lock: hosts guards it with its mutex.
type gradient struct {
	limit    float64
	ceiling  float64
	lastDrop time.Time
	answered bool // the host has answered a request: it is alive

	// The current window.
	winStart time.Time
	winN     int
	winSum   time.Duration
	winPeak  int // the most requests in flight when one of the window's ended

	// The baseline: the fastest window of the current period and of the baselinePeriods-1
	// before (zero: none).
	bases     [baselinePeriods]fastest
	baseAt    time.Time // when the current period, bases[0], began
	slowStart bool      // no window slower than the baseline, nor a cut, yet
}

// fastest is the fastest window of a period: its average round trip, and its peak of requests
// in flight.
type fastest struct {
	rtt  time.Duration
	load int
}

func newGradient(ceiling int) gradient {
	return gradient{limit: float64(min(initialLimit, ceiling)), ceiling: float64(ceiling), slowStart: true}
}

// grow raises the limit by one for a record that found the host at its limit with a full
// queue the host cannot drain within maxHold (hosts.enqueue): in slow start only — no window
// has shown the host slower than its baseline yet, nor a congestion signal — and once the host
// has answered (a dead or hanging endpoint never grows it). A slow endpoint (1 s a request at
// 5,000 a second needs 5,000 at once) so gets what it needs within a round trip, where a
// window per doubling would defer a few seconds of its records. It reports whether it did.
func (g *gradient) grow() bool {
	if !g.slowStart || !g.answered || g.limit+1 > g.ceiling {
		return false
	}
	g.limit++
	return true
}

// setCeiling changes the ceiling (a destination's maxConcurrency changed); the limit stays
// under it.
func (g *gradient) setCeiling(c int) {
	if float64(c) != g.ceiling {
		g.ceiling = float64(c)
		g.limit = min(g.limit, g.ceiling)
	}
}

// current is the number of requests the host may have in flight.
func (g *gradient) current() int { return int(g.limit) }

// roundTrip is the host's baseline round trip (0 until it has answered): what its queue
// drains at when nothing but the endpoint holds it back.
func (g *gradient) roundTrip() time.Duration { return g.baseline().rtt }

// baseline is the fastest window of the last baselinePeriods.
func (g *gradient) baseline() fastest {
	b := g.bases[0]
	for _, p := range g.bases[1:] {
		if p.rtt > 0 && p.rtt < b.rtt {
			b = p
		}
	}
	return b
}

// sample applies one request's signal; inFlight is the host's requests in flight when it ended
// (itself included), took its round trip, window the host's average request (the least time
// between two cuts), local the part of a round trip the process's own busyness explains.
func (g *gradient) sample(sig signal, inFlight int, took, window, local time.Duration, now time.Time) {
	switch sig {
	case signalAnswered:
		g.answered = true
		g.observe(inFlight, took, local, now)
	case signalOverload, signalFailure:
		if now.Sub(g.lastDrop) < max(window, limitDropWindow) {
			return
		}
		g.lastDrop, g.slowStart = now, false
		factor := failureBackoff
		if sig == signalOverload {
			factor = 0.5
		}
		g.limit = max(1, math.Floor(g.limit*factor))
	}
}

// observe adds one answer's round trip to the window, and ends the window when it is long
// enough.
func (g *gradient) observe(inFlight int, took, local time.Duration, now time.Time) {
	if g.winN == 0 {
		g.winStart, g.winPeak = now, 0
	}
	g.winN++
	g.winSum += took
	g.winPeak = max(g.winPeak, inFlight)
	age := now.Sub(g.winStart)
	if age < maxLimitWindow && (age < limitWindow || g.winN < minWindowSamples) {
		return
	}
	short := g.winSum / time.Duration(g.winN)
	n, peak := g.winN, float64(g.winPeak)
	g.winN, g.winSum = 0, 0
	w := fastest{short, g.winPeak}
	switch before := g.baseline(); {
	case before.rtt > 0 && float64(w.rtt) > rttTolerance*float64(max(before.rtt, local)) && 2*w.load <= before.load:
		// Slower under half the load the host was fast at, and slower than our own
		// busyness explains: the host turned slower for good (the limit shrank, and the
		// answers did not come back faster). It is taken as it is now, and
		// its new limit found as a new host's.
		g.bases, g.baseAt, g.slowStart = [baselinePeriods]fastest{w}, now, true
	case g.bases[0].rtt == 0 || now.Sub(g.baseAt) >= baselinePeriod:
		copy(g.bases[1:], g.bases[:])
		g.bases[0], g.baseAt = w, now
		// The baseline rises as its fastest period leaves, unless the host is now slower
		// under more load than it was fast at: that is a queue — ours, at the endpoint —
		// which the limit is there to shrink, so the old baseline stays.
		if after := g.baseline(); before.rtt > 0 && after.rtt > before.rtt && 4*after.load > 5*before.load {
			g.bases[0] = before
		}
	case w.rtt < g.bases[0].rtt:
		g.bases[0] = w
	}
	if 2*peak < g.limit {
		return // app-limited: the window says nothing of the host's capacity
	}
	// Growth needs answers as fast as the baseline; a shrink, answers slower than both the
	// baseline and what the process's own busyness explains. Between the two, the limit holds.
	base := float64(max(g.roundTrip(), rttFloor))
	grad := min(1, max(0.5, rttTolerance*max(base, float64(local))/float64(max(short, rttFloor))))
	queue := math.Sqrt(g.limit)
	switch {
	case grad == 0.5: // three times slower than its baseline, or more: no smoothing
		g.slowStart = false
		g.limit = g.limit*grad + queue
	case grad < 1:
		g.slowStart = false
		g.limit = g.limit*(1-smoothing) + (g.limit*grad+queue)*smoothing
	case float64(short) > rttTolerance*base: // slower, but only as slow as we are: hold
	case g.slowStart: // one more per answer: it doubles each round trip, as TCP's slow start
		g.limit += float64(n)
	default:
		g.limit += queue
	}
	g.limit = min(g.ceiling, max(float64(min(minLimit, int(g.ceiling))), g.limit))
}
