package deliverer

import (
	"sync"
	"time"
)

// hosts holds the isolation state of every endpoint host: requests in flight (bounded by its
// adaptive limit, limit.go, itself at most maxPerHost), the records waiting for a slot, a pause
// asked for by the endpoint (429 or 503 with Retry-After), and a circuit breaker (breaker.go)
// that opens after `failures` consecutive failed requests. Its methods are safe for concurrent
// use.
type hosts struct {
	maxPerHost  int // the ceiling of every host's limit
	maxWaiting  int
	failures    int
	cooldown    time.Duration
	maxCooldown time.Duration
	// spawn runs a waiter's start in a goroutine its owner tracks (Service.spawnTask): hosts never
	// starts an untracked goroutine.
	spawn func(task)
	// onBreaker, when set, is told when a host's breaker opens (for period) or closes; it is
	// called without the lock held.
	onBreaker func(host string, open bool, period time.Duration)
	// local, when set, is the part of a round trip the process's own busyness explains
	// (localLag.roundTrip): the limit does not shrink for it, nor is a host that answers within
	// it judged slow.
	local func() time.Duration

	mu sync.Mutex
	m  map[string]*hostState
}

type hostState struct {
	inFlight    int
	lim         gradient  // how many may be in flight
	pausedUntil time.Time // no request starts before (Retry-After of a 429 or 503)
	brk         breaker
	waiting     []waiter      // admitted later, in order, when a request ends
	progress    time.Time     // the last time a request to the host ended, or one started on an idle host
	latency     time.Duration // moving average of request durations
	freed       chan struct{} // closed (and replaced) when a request ends, if anyone took it
	freedTaken  bool          // enqueue handed freed to a waiter since it was made
}

// waiter is a request queued for a host at its in-flight bound: start runs (in a goroutine
// started by spawn, or in the goroutine of the request whose end freed its slot: releaseInto)
// once it holds a slot; refuse runs instead if the host's breaker opens first.
type waiter struct {
	start  task
	refuse func(reason string, wait time.Duration)
}

// task is work of a delivery goroutine; it returns the task the same goroutine runs next (nil:
// none). A request that ends hands the waiter its end let in to its own goroutine that way
// (releaseInto): no new goroutine, no new stack to grow, for most requests of a busy host.
type task func() task

// newHosts returns the hosts state; spawn starts the goroutine of a waiter that got a slot. It
// is called by enqueue and release, so from the goroutines that call those.
func newHosts(maxPerHost, maxWaiting, failures int, cooldown, maxCooldown time.Duration, spawn func(task)) *hosts {
	return &hosts{maxPerHost: maxPerHost, maxWaiting: maxWaiting, failures: failures, cooldown: cooldown,
		maxCooldown: maxCooldown, spawn: spawn, m: map[string]*hostState{}}
}

// Refusal reasons of acquire.
const (
	refusedBusy    = "host_at_bound"
	refusedBreaker = "breaker_open"
	refusedPaused  = "endpoint_paused"
)

// state returns host's state, made on first use. h.mu is held.
func (h *hosts) state(host string) *hostState {
	st := h.m[host]
	if st == nil {
		st = &hostState{brk: newBreaker(h.failures, h.cooldown, h.maxCooldown), lim: newGradient(h.maxPerHost), freed: make(chan struct{})}
		h.m[host] = st
	}
	return st
}

// acquire admits one request to host, or says why not and how long the breaker or the pause
// lasts. ceiling, when above 0 and below maxPerHost, caps the host's limit (a destination's
// maxConcurrency, whose host key is its own: unitOf).
func (h *hosts) acquire(host string, ceiling int, now time.Time) (ok bool, reason string, wait time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.state(host)
	if ceiling <= 0 || ceiling > h.maxPerHost {
		ceiling = h.maxPerHost
	}
	st.lim.setCeiling(ceiling)
	if st.inFlight == 0 {
		st.progress = now
	}
	if now.Before(st.pausedUntil) {
		return false, refusedPaused, st.pausedUntil.Sub(now)
	}
	if st.brk.tripped() { // open or half-open: the trial is admitted beyond the bound
		if ok, wait := st.brk.allow(now); !ok {
			return false, refusedBreaker, wait
		}
	} else if st.inFlight >= st.lim.current() {
		return false, refusedBusy, 0
	}
	st.inFlight++
	return true, "", 0
}

// stallAfter is how long a host with requests in flight may go without finishing one before it
// counts as stalled: at least minStall, else five times its average request. A second, not less:
// a pause of the whole process (a garbage collection under a large heap, CPU starvation) stops
// every host's progress for a few hundred milliseconds, and a fast host judged stalled then
// would have its records deferred to a tier (seconds late) for nothing. A dead host's queue is
// bounded anyway, and once full its records are refused at once (enqueue).
const minStall = time.Second

// maxHold is the longest a host's full queue may take to drain, at the host's baseline round
// trip (gradient.roundTrip), for the poll loop to wait for room in it (backpressure) rather
// than send the record to a retry tier: a fast endpoint's queue drains within it even when our
// own process is what slows its answers (a burst, a garbage collection, a starved scheduler:
// the answer is to poll less, never to defer); a slow endpoint's does not, and its records go
// to the first retry tier unsent, so that no endpoint holds back the partition.
const maxHold = 100 * time.Millisecond

// firstAnswerHold is how long the poll loop waits for room in the full queue of a host that
// has not answered yet (a new endpoint): its first answers tell whether
// it is fast. Longer than maxHold, so that an endpoint of a few hundred milliseconds is not
// deferred for the time of its first round trip; a dead or hanging one costs the partition
// that once, then its records go to a retry tier.
const firstAnswerHold = 500 * time.Millisecond

// firstRoundTripRoom is how many times DELIVERER_MAX_WAITING_PER_HOST records (8,192 by
// default) may wait for a host that has not answered yet. An endpoint that takes a second gets
// a second's worth of records (5,000 at 5,000 a second) before its first answer says how many
// it takes at once; they wait in memory, and its first answers raise its limit to start them
// all (slow start, release), instead of going to a retry tier for ten seconds. A dead
// endpoint's queue is refused once its breaker opens.
const firstRoundTripRoom = 32

// enqueueResult says what enqueue did.
type enqueueResult int

const (
	queued  enqueueResult = iota // w runs when a slot frees
	full                         // the queue is full and the host is fast: wait on freed (at most maxHold) and try again
	refused                      // stalled, slow or paused host, or open breaker: send the record to a retry tier
)

// enqueue queues w for a host at its limit. A host that has finished no request for a while
// (stalled: dead or hanging), whose breaker is open or that asked for a pause takes no more
// waiters. When its queue is full, the poll loop waits for room (full) if the host is fast —
// its queue drains within maxHold at its baseline round trip, or the process's own busyness
// explains that round trip, or it has not answered yet but its first request started less
// than firstAnswerHold ago; else a host still in slow start raises its limit by one
// (gradient.grow), and any other's record is refused (to a retry tier): the host is slow.
// freed is closed when the host finishes a request (hostState.takeFreed).
func (h *hosts) enqueue(host string, w waiter, now time.Time) (res enqueueResult, why string, wait time.Duration, freed <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.m[host]
	switch {
	case st == nil:
		return refused, refusedBusy, 0, nil
	case st.brk.tripped():
		return refused, refusedBreaker, st.brk.remaining(now), nil
	case now.Before(st.pausedUntil):
		return refused, refusedPaused, st.pausedUntil.Sub(now), nil
	case st.lim.answered && st.inFlight > 0 && now.Sub(st.progress) > max(minStall, 5*st.latency):
		// Stalled: no answer for a while from a host that answered before (dead or hanging
		// now). A host in its first round trip is not judged by it: its queue has the room of
		// a round trip (firstRoundTripRoom), then firstAnswerHold decides.
		return refused, refusedBusy, 0, nil
	}
	if st.inFlight < st.lim.current() { // a slot freed since acquire refused
		st.inFlight++
		h.spawn(w.start)
		return queued, "", 0, nil
	}
	room := h.maxWaiting
	if !st.lim.answered { // a new host, in its first round trip: its records wait for the answers
		room *= firstRoundTripRoom
	}
	if len(st.waiting) >= room {
		rtt := st.lim.roundTrip()
		if rtt == 0 { // no window of answers yet: its average request so far
			rtt = st.latency
		}
		if rtt == 0 {
			if now.Sub(st.progress) < firstAnswerHold {
				return full, refusedBusy, 0, st.takeFreed() // its first answers are due
			}
		} else if !h.slow(st, rtt) {
			return full, refusedBusy, 0, st.takeFreed() // fast, or only as slow as we are
		}
		if st.lim.grow() { // slow start: a slow endpoint's limit meets the demand
			st.inFlight++
			h.spawn(w.start)
			return queued, "", 0, nil
		}
		return refused, refusedBusy, 0, nil
	}
	st.waiting = append(st.waiting, w)
	return queued, "", 0, nil
}

// slow reports whether a host whose requests take rtt cannot drain its queue within maxHold
// at its current requests in flight, rtt being more than the process's own busyness explains
// (then the host is only as slow as we are). h.mu is held.
func (h *hosts) slow(st *hostState, rtt time.Duration) bool {
	return rtt > h.localRoundTrip() && time.Duration(len(st.waiting)+1)*rtt/time.Duration(max(1, st.inFlight)) > maxHold
}

// localRoundTrip is the part of a round trip the process's own busyness explains (0 without
// a local lag reader).
func (h *hosts) localRoundTrip() time.Duration {
	if h.local == nil {
		return 0
	}
	return h.local()
}

// hostOutcome is what one request says of its host, for the circuit breaker.
type hostOutcome int

const (
	hostUnknown hostOutcome = iota // the request did not reach the host (not started, TLS refused, blocked, invalid): no count
	hostUp                         // the host answered (2xx, 4xx, 408, 429): the breaker closes
	hostDown                       // timeout, connection error, 5xx: one more consecutive failure
)

// outcomeOf reads a class for the breaker: only the endpoint's own answers and the failures to
// reach it count. A certificate the deliverer refuses says nothing of the host's health (it
// answered the handshake) and is not retried: it does not count; nor does a request that never
// left (blocked address, invalid URL, invalid request: a poison messageId must not open the
// breaker of every destination on the host, docs/delivery.md#outcome-one-function-decides).
func outcomeOf(c Class) hostOutcome {
	switch c {
	case Success, Status4xx, Status408, Status429:
		return hostUp
	case Timeout, ConnError, Status5xx:
		return hostDown
	}
	return hostUnknown
}

// release ends one admitted request and returns the host's limit and pause after it (for the
// attempt log). out is what it says of the host, for the breaker; sig is what the outcome says
// of the host's capacity, for its limit; retryAfter is a 429's or 503's Retry-After, which
// pauses the host. Freed slots go to the next waiters; if the breaker is now open or the host
// paused, every waiter is refused.
func (h *hosts) release(host string, out hostOutcome, sig signal, took, retryAfter time.Duration, now time.Time) hostLimit {
	return h.releaseInto(nil, host, out, sig, took, retryAfter, now)
}

// releaseInto is release, handing the first waiter it starts to *next when next is not nil and
// *next is empty, for the caller's goroutine to run once its own work is done, rather than to a
// new goroutine.
func (h *hosts) releaseInto(next *task, host string, out hostOutcome, sig signal, took, retryAfter time.Duration, now time.Time) hostLimit {
	h.mu.Lock()
	st := h.m[host]
	st.lim.sample(sig, st.inFlight, took, st.latency, h.localRoundTrip(), now)
	st.inFlight--
	st.progress = now
	st.latency = (7*st.latency + took) / 8
	if st.freedTaken { // a new channel per request ended showed in the whole product's CPU
		close(st.freed)
		st.freed, st.freedTaken = make(chan struct{}), false
	}
	wasOpen, period := st.brk.state == breakerOpen, st.brk.period
	wasTripped := st.brk.tripped()
	switch out {
	case hostUp:
		st.brk.success()
	case hostDown:
		st.brk.failure(now)
	}
	var breakerChanged func()
	switch {
	case h.onBreaker == nil:
	case st.brk.state == breakerOpen && (!wasOpen || st.brk.period != period):
		open, p := st.brk.period, h.onBreaker
		breakerChanged = func() { p(host, true, open) }
	case wasTripped && !st.brk.tripped():
		p := h.onBreaker
		breakerChanged = func() { p(host, false, 0) }
	}
	if sig == signalOverload && retryAfter > 0 {
		st.pausedUntil = maxTime(st.pausedUntil, now.Add(min(retryAfter, h.maxCooldown)))
	}
	var starts []task
	var refused []waiter
	reason, wait := refusedBreaker, st.brk.remaining(now)
	switch {
	case st.brk.tripped():
		refused, st.waiting = st.waiting, nil
	case now.Before(st.pausedUntil):
		reason, wait = refusedPaused, st.pausedUntil.Sub(now)
		refused, st.waiting = st.waiting, nil
	default:
		// A slow host in slow start that answered starts every waiting record: the queue is
		// the demand its limit has to meet (a slow endpoint's first round trip). A fast
		// host's queue drains by itself.
		if rtt := st.lim.roundTrip(); sig == signalAnswered && h.slow(st, max(rtt, took)) {
			for st.inFlight+len(st.waiting) > st.lim.current() && st.lim.grow() {
			}
		}
		for len(st.waiting) > 0 && st.inFlight < st.lim.current() {
			starts = append(starts, st.waiting[0].start)
			st.waiting[0] = waiter{}
			st.waiting = st.waiting[1:]
			st.inFlight++
		}
	}
	after := hostLimit{limit: st.lim.current(), paused: max(0, st.pausedUntil.Sub(now))}
	h.mu.Unlock()
	if breakerChanged != nil {
		breakerChanged()
	}
	for _, start := range starts {
		if next != nil && *next == nil {
			*next = start
			continue
		}
		h.spawn(start)
	}
	for _, w := range refused {
		w.refuse(reason, wait)
	}
	return after
}

// hostLimit is a host's concurrency limit and what is left of its pause, as the attempt log
// and the metrics show them.
type hostLimit struct {
	limit  int
	paused time.Duration
}

// limit returns host's current concurrency limit and pause (zero for a host never used).
func (h *hosts) limit(host string, now time.Time) hostLimit {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.m[host]
	if st == nil {
		return hostLimit{}
	}
	return hostLimit{limit: st.lim.current(), paused: max(0, st.pausedUntil.Sub(now))}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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

// takeFreed is the channel closed when the host's next request ends; called with the lock held.
func (st *hostState) takeFreed() <-chan struct{} {
	st.freedTaken = true
	return st.freed
}
