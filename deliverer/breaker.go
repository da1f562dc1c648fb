package deliverer

import "time"

// breakerState is where a circuit breaker stands (docs/delivery.md#isolation-a-dead-endpoint-does-not-hold-back-the-others).
type breakerState int

const (
	// breakerClosed admits every request; `threshold` consecutive failures open it.
	breakerClosed breakerState = iota
	// breakerOpen admits nothing until openUntil; then the next request is the trial.
	breakerOpen
	// breakerHalfOpen has its one trial request in flight and admits nothing else.
	breakerHalfOpen
)

func (st breakerState) String() string {
	return [...]string{"closed", "open", "half-open"}[st]
}

// breaker is the circuit breaker of one endpoint host. It opens after `threshold` consecutive
// failures for `cooldown`; then it admits one trial request: success closes it, failure reopens
// it for twice as long as the last time (at most maxCooldown). A success of any request closes
// it. It is a value with no lock: hosts guards it with its mutex.
type breaker struct {
	threshold   int
	cooldown    time.Duration // the first open period
	maxCooldown time.Duration

	state     breakerState
	failed    int           // consecutive failures
	period    time.Duration // the current open period (0 while closed)
	openUntil time.Time     // while open: the end of the period
}

func newBreaker(threshold int, cooldown, maxCooldown time.Duration) breaker {
	return breaker{threshold: threshold, cooldown: cooldown, maxCooldown: max(maxCooldown, cooldown)}
}

// allow says whether a request may start now; when it may not, wait is how long the breaker
// stays open (while a trial is in flight: the current open period). An open breaker whose
// period is over admits the caller as its trial and becomes half-open.
func (b *breaker) allow(now time.Time) (ok bool, wait time.Duration) {
	switch b.state {
	case breakerOpen:
		if now.Before(b.openUntil) {
			return false, b.openUntil.Sub(now)
		}
		b.state = breakerHalfOpen
		return true, 0
	case breakerHalfOpen:
		return false, b.period
	}
	return true, 0
}

// success records a request the host answered: the breaker closes.
func (b *breaker) success() {
	b.state, b.failed, b.period = breakerClosed, 0, 0
}

// failure records a failed request: the threshold-th consecutive failure opens a closed breaker
// for the first period; a failure while half-open (the trial failed) reopens it for twice the
// last period, at most maxCooldown.
func (b *breaker) failure(now time.Time) {
	b.failed++
	switch {
	case b.state == breakerHalfOpen:
		b.period = min(2*b.period, b.maxCooldown)
		b.state, b.openUntil = breakerOpen, now.Add(b.period)
	case b.state == breakerClosed && b.failed >= b.threshold:
		b.period = b.cooldown
		b.state, b.openUntil = breakerOpen, now.Add(b.period)
	}
}

// tripped is true while the breaker is open or half-open.
func (b *breaker) tripped() bool { return b.state != breakerClosed }

// remaining is how long the breaker stays open after now (0 or less once the period is over).
func (b *breaker) remaining(now time.Time) time.Duration { return b.openUntil.Sub(now) }
