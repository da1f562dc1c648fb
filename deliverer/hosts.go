package deliverer

import (
	"sync"
	"time"
)

// hosts holds the isolation state of every endpoint host: requests in flight (bounded by
// maxPerHost) and a circuit breaker that opens after `failures` consecutive failed requests.
// An open breaker admits nothing until its cooldown ends, then one trial request: success
// closes it, failure reopens it for twice the cooldown (at most maxCooldown).
type hosts struct {
	maxPerHost  int
	failures    int
	cooldown    time.Duration
	maxCooldown time.Duration

	mu sync.Mutex
	m  map[string]*hostState
}

type hostState struct {
	inFlight  int
	failed    int           // consecutive failures
	openUntil time.Time     // breaker open while now < openUntil
	cooldown  time.Duration // the current open period (0: closed)
	trial     bool          // the half-open trial request is in flight
}

func newHosts(maxPerHost, failures int, cooldown, maxCooldown time.Duration) *hosts {
	return &hosts{maxPerHost: maxPerHost, failures: failures, cooldown: cooldown,
		maxCooldown: max(maxCooldown, cooldown), m: map[string]*hostState{}}
}

// Refusal reasons of acquire.
const (
	refusedBusy    = "host_at_bound"
	refusedBreaker = "breaker_open"
)

// acquire admits one request to host, or says why not and how long the breaker stays open.
func (h *hosts) acquire(host string, now time.Time) (ok bool, reason string, wait time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.m[host]
	if st == nil {
		st = &hostState{}
		h.m[host] = st
	}
	if st.cooldown > 0 { // open or half-open
		if now.Before(st.openUntil) {
			return false, refusedBreaker, st.openUntil.Sub(now)
		}
		if st.trial {
			return false, refusedBreaker, st.cooldown
		}
		st.trial = true
	} else if st.inFlight >= h.maxPerHost {
		return false, refusedBusy, 0
	}
	st.inFlight++
	return true, "", 0
}

// release ends one admitted request; ok is whether the host answered (any status below 500
// but 408/429 counts as an answer: the host is up).
func (h *hosts) release(host string, ok bool, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.m[host]
	st.inFlight--
	wasTrial := st.trial && st.cooldown > 0
	if ok {
		st.failed, st.cooldown, st.trial = 0, 0, false
		return
	}
	st.failed++
	switch {
	case wasTrial:
		st.trial = false
		st.cooldown = min(2*st.cooldown, h.maxCooldown)
		st.openUntil = now.Add(st.cooldown)
	case st.cooldown == 0 && st.failed >= h.failures:
		st.cooldown = h.cooldown
		st.openUntil = now.Add(st.cooldown)
	}
}

// openBreakers returns the hosts whose breaker is open or half-open.
func (h *hosts) openBreakers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for host, st := range h.m {
		if st.cooldown > 0 {
			out = append(out, host)
		}
	}
	return out
}
