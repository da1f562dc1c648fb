package deliverer

import (
	"sync"
	"time"
)

// hosts holds the isolation state of every endpoint host: requests in flight (bounded by
// maxPerHost), the records waiting for a slot, and a circuit breaker (breaker.go) that opens
// after `failures` consecutive failed requests. Its methods are safe for concurrent use.
type hosts struct {
	maxPerHost  int
	maxWaiting  int
	failures    int
	cooldown    time.Duration
	maxCooldown time.Duration
	// spawn runs a waiter's start in a goroutine its owner tracks (Service.spawn): hosts never
	// starts an untracked goroutine.
	spawn func(func())

	mu sync.Mutex
	m  map[string]*hostState
}

type hostState struct {
	inFlight int
	brk      breaker
	waiting  []waiter      // admitted later, in order, when a request ends
	progress time.Time     // the last time a request to the host ended, or one started on an idle host
	latency  time.Duration // moving average of request durations
	freed    chan struct{} // closed (and replaced) whenever a request ends
}

// waiter is a request queued for a host at its in-flight bound: start runs (in a goroutine
// started by spawn) once it holds a slot; refuse runs instead if the host's breaker opens first.
type waiter struct {
	start  func()
	refuse func(reason string, wait time.Duration)
}

// newHosts returns the hosts state; spawn starts the goroutine of a waiter that got a slot. It
// is called by enqueue and release, so from the goroutines that call those.
func newHosts(maxPerHost, maxWaiting, failures int, cooldown, maxCooldown time.Duration, spawn func(func())) *hosts {
	return &hosts{maxPerHost: maxPerHost, maxWaiting: maxWaiting, failures: failures, cooldown: cooldown,
		maxCooldown: maxCooldown, spawn: spawn, m: map[string]*hostState{}}
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
		st = &hostState{brk: newBreaker(h.failures, h.cooldown, h.maxCooldown), freed: make(chan struct{})}
		h.m[host] = st
	}
	if st.inFlight == 0 {
		st.progress = now
	}
	if st.brk.tripped() { // open or half-open: the trial is admitted beyond the bound
		if ok, wait := st.brk.allow(now); !ok {
			return false, refusedBreaker, wait
		}
	} else if st.inFlight >= h.maxPerHost {
		return false, refusedBusy, 0
	}
	st.inFlight++
	return true, "", 0
}

// stallAfter is how long a host with requests in flight may go without finishing one before it
// counts as stalled: at least minStall, else five times its average request.
const minStall = 250 * time.Millisecond

// enqueueResult says what enqueue did.
type enqueueResult int

const (
	queued  enqueueResult = iota // w runs when a slot frees
	full                         // the queue is full but the host is moving: wait on freed and try again
	refused                      // stalled host or open breaker: send the record to a retry tier
)

// enqueue queues w for a host at its bound. A host that has finished no request for a while
// (stalled: dead or hanging) or whose breaker is open takes no more waiters, so its records go
// to a retry tier instead of holding the partition; a host that is merely busy (a burst to a
// fast endpoint) makes the caller wait for room, which is backpressure, not blocking by a dead
// endpoint. freed is closed when the host finishes a request.
func (h *hosts) enqueue(host string, w waiter, now time.Time) (enqueueResult, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.m[host]
	if st == nil || st.brk.tripped() {
		return refused, nil
	}
	if st.inFlight > 0 && now.Sub(st.progress) > max(minStall, 5*st.latency) {
		return refused, nil
	}
	if st.inFlight < h.maxPerHost { // a slot freed since acquire refused
		st.inFlight++
		h.spawn(w.start)
		return queued, nil
	}
	if len(st.waiting) >= h.maxWaiting {
		return full, st.freed
	}
	st.waiting = append(st.waiting, w)
	return queued, nil
}

// release ends one admitted request; ok is whether the host answered (any status below 500
// but 408/429 counts as an answer: the host is up). The slot goes to the next waiter; if the
// breaker is now open, every waiter is refused.
func (h *hosts) release(host string, ok bool, took time.Duration, now time.Time) {
	h.mu.Lock()
	st := h.m[host]
	st.inFlight--
	st.progress = now
	st.latency = (7*st.latency + took) / 8
	close(st.freed)
	st.freed = make(chan struct{})
	if ok {
		st.brk.success()
	} else {
		st.brk.failure(now)
	}
	var start func()
	var refused []waiter
	wait := st.brk.remaining(now)
	switch {
	case st.brk.tripped():
		refused, st.waiting = st.waiting, nil
	case len(st.waiting) > 0 && st.inFlight < h.maxPerHost:
		start = st.waiting[0].start
		st.waiting[0] = waiter{}
		st.waiting = st.waiting[1:]
		st.inFlight++
	}
	h.mu.Unlock()
	if start != nil {
		h.spawn(start)
	}
	for _, w := range refused {
		w.refuse(refusedBreaker, wait)
	}
}

// openBreakers returns the hosts whose breaker is open or half-open.
func (h *hosts) openBreakers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for host, st := range h.m {
		if st.brk.tripped() {
			out = append(out, host)
		}
	}
	return out
}
