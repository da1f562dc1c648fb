package deliverer

import (
	"testing"
	"time"
)

// TestBreakerTransitions drives a breaker (3 failures, 10 s cooldown, at most 25 s) through
// every transition, checking its state and what allow answers after each step.
func TestBreakerTransitions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type step struct {
		do    string // "fail", "ok" or "allow"
		at    int    // seconds after t0
		ok    bool   // allow's answer (do == "allow")
		wait  time.Duration
		state breakerState // after the step
	}
	fail := func(s int, after breakerState) step { return step{do: "fail", at: s, state: after} }
	ok := func(after breakerState) step { return step{do: "ok", state: after} }
	allow := func(s int, admitted bool, wait time.Duration, after breakerState) step {
		return step{do: "allow", at: s, ok: admitted, wait: wait, state: after}
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"closed admits", []step{allow(0, true, 0, breakerClosed), allow(0, true, 0, breakerClosed)}},
		{"closed to open after threshold consecutive failures", []step{
			fail(0, breakerClosed), fail(0, breakerClosed), allow(0, true, 0, breakerClosed), fail(1, breakerOpen),
		}},
		{"a success resets the count of consecutive failures", []step{
			fail(0, breakerClosed), fail(0, breakerClosed), ok(breakerClosed), fail(0, breakerClosed), fail(0, breakerClosed),
			allow(0, true, 0, breakerClosed), fail(0, breakerOpen),
		}},
		{"open refuses until the cooldown ends", []step{
			fail(0, breakerClosed), fail(0, breakerClosed), fail(0, breakerOpen),
			allow(0, false, 10*time.Second, breakerOpen), allow(4, false, 6*time.Second, breakerOpen), allow(9, false, time.Second, breakerOpen),
		}},
		{"failures while open do not extend it", []step{
			fail(0, breakerClosed), fail(0, breakerClosed), fail(0, breakerOpen), fail(5, breakerOpen),
			allow(5, false, 5*time.Second, breakerOpen),
		}},
		{"half-open admits exactly one trial", []step{
			fail(0, breakerClosed), fail(0, breakerClosed), fail(0, breakerOpen),
			allow(10, true, 0, breakerHalfOpen), allow(10, false, 10*time.Second, breakerHalfOpen), allow(30, false, 10*time.Second, breakerHalfOpen),
		}},
		{"trial success closes", []step{
			fail(0, breakerClosed), fail(0, breakerClosed), fail(0, breakerOpen),
			allow(11, true, 0, breakerHalfOpen), ok(breakerClosed), allow(11, true, 0, breakerClosed), allow(11, true, 0, breakerClosed),
			fail(12, breakerClosed), fail(12, breakerClosed), fail(12, breakerOpen), allow(12, false, 10*time.Second, breakerOpen), // the first period again
		}},
		{"trial failure reopens with double the cooldown, capped", []step{
			fail(0, breakerClosed), fail(0, breakerClosed), fail(0, breakerOpen),
			allow(10, true, 0, breakerHalfOpen), fail(10, breakerOpen), allow(10, false, 20*time.Second, breakerOpen),
			allow(29, false, time.Second, breakerOpen), allow(30, true, 0, breakerHalfOpen), fail(30, breakerOpen),
			allow(30, false, 25*time.Second, breakerOpen), // 40 s capped at 25 s
			allow(55, true, 0, breakerHalfOpen), fail(55, breakerOpen), allow(55, false, 25*time.Second, breakerOpen),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBreaker(3, 10*time.Second, 25*time.Second)
			for i, s := range c.steps {
				switch s.do {
				case "fail":
					b.failure(at(s.at))
				case "ok":
					b.success()
				case "allow":
					if got, wait := b.allow(at(s.at)); got != s.ok || wait != s.wait {
						t.Fatalf("step %d: allow at %ds = %v, %v; want %v, %v", i+1, s.at, got, wait, s.ok, s.wait)
					}
				}
				if b.state != s.state {
					t.Fatalf("step %d (%s at %ds): state %s, want %s", i+1, s.do, s.at, b.state, s.state)
				}
				if b.tripped() != (s.state != breakerClosed) {
					t.Fatalf("step %d: tripped() = %v in state %s", i+1, b.tripped(), b.state)
				}
			}
		})
	}
}
