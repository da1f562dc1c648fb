package deliverer

import (
	"net/http"
	"time"
)

// The adaptive concurrency limit of an endpoint host (docs/delivery.md#concurrency-found-per-endpoint).
//
// It follows the AIMD limit of Netflix's concurrency-limits (AIMDLimit): every answered request
// while the host uses at least half its limit raises the limit by one — so a saturated limit
// doubles each round trip, and a 200 ms endpoint reaches the few hundred requests at once that
// thousands of webhooks a second need within seconds — and a congestion signal cuts it: 429 or
// 503 (the endpoint asks for less) halves it, a timeout, a connection error, 502 or 504 takes
// 10% off. Until its first congestion signal a host is in slow start, as a TCP connection is:
// a record that finds an answering host at its limit with a full queue raises the limit at once
// instead of being turned away, so the limit meets the demand within a round trip. A cut happens at most
// once per round trip of the host (its average latency, at least
// limitDropWindow), as TCP reacts once per window, so the requests in flight when an endpoint
// falters do not cut it to one. The limit stays within [1, DELIVERER_MAX_PER_HOST].

// signal is what one request's outcome says about its host's capacity.
type signal int

const (
	signalNone     signal = iota // no sample: the request did not run (shutdown), or a plain error answer
	signalAnswered               // an answer that is not a congestion signal: room to grow
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
	// initialLimit is a new host's limit: the fixed bound this limit replaced, so that no
	// endpoint starts slower than before; it grows within a few round trips.
	initialLimit = 64
	// limitDropWindow is the shortest time between two cuts of a host's limit.
	limitDropWindow = 100 * time.Millisecond
	// failureBackoff is what a failure leaves of the limit; an overload halves it.
	failureBackoff = 0.9
)

// aimd is one host's limit. It is a value with no lock: hosts guards it with its mutex.
type aimd struct {
	limit     float64
	ceiling   float64
	lastDrop  time.Time
	slowStart bool // no congestion signal yet
	answered  bool // the host has answered a request: it is alive
}

func newAIMD(ceiling int) aimd {
	return aimd{limit: float64(min(initialLimit, ceiling)), ceiling: float64(ceiling), slowStart: true}
}

// grow raises the limit by one for a record that found the host full, in slow start only and
// once the host has answered (a dead or hanging endpoint never grows); it reports whether it did.
func (a *aimd) grow() bool {
	if !a.slowStart || !a.answered || a.limit+1 > a.ceiling {
		return false
	}
	a.limit++
	return true
}

// setCeiling changes the ceiling (a destination's maxConcurrency changed); the limit stays
// under it.
func (a *aimd) setCeiling(c int) {
	if float64(c) != a.ceiling {
		a.ceiling = float64(c)
		a.limit = min(a.limit, a.ceiling)
	}
}

// current is the number of requests the host may have in flight.
func (a *aimd) current() int { return int(a.limit) }

// sample applies one request's signal; inFlight is the host's requests in flight when it ended
// (itself included) and window its round trip.
func (a *aimd) sample(sig signal, inFlight int, window time.Duration, now time.Time) {
	switch sig {
	case signalAnswered:
		a.answered = true
		if 2*inFlight >= a.current() { // only a limit in use grows
			a.limit = min(a.ceiling, a.limit+1)
		}
	case signalOverload, signalFailure:
		if now.Sub(a.lastDrop) < max(window, limitDropWindow) {
			return
		}
		a.lastDrop, a.slowStart = now, false
		factor := failureBackoff
		if sig == signalOverload {
			factor = 0.5
		}
		a.limit = max(1, a.limit*factor)
	}
}
