package servicetest

import (
	"testing"
	"time"
)

// EventuallyPoll is how often Eventually and Consistently check their condition.
const EventuallyPoll = 20 * time.Millisecond

// Eventually checks cond every EventuallyPoll until it holds, and fails the test (t.Fatalf)
// if it does not within timeout, with "waited <timeout> for <what>". cond is either a
// func() bool, which holds when it returns true, or a func() string, which holds when it
// returns "" and else says what is still missing: its last answer is added to the failure.
// It must be called from the test's goroutine.
func Eventually[C func() bool | func() string](t testing.TB, timeout time.Duration, what string, cond C) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := check(cond)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if msg != "" {
				t.Fatalf("waited %v for %s: %s", timeout, what, msg)
			}
			t.Fatalf("waited %v for %s", timeout, what)
		}
		time.Sleep(EventuallyPoll)
	}
}

// Consistently checks cond every EventuallyPoll for d (at its start and at its end too), and
// fails the test (t.Fatalf) the first time it does not hold, with "<what> did not hold
// throughout <d>" and, for a func() string, its answer: a test that something stays so (a
// dry run writes nothing, a view stays empty) for a while. cond is as Eventually's. It must
// be called from the test's goroutine.
func Consistently[C func() bool | func() string](t testing.TB, d time.Duration, what string, cond C) {
	t.Helper()
	end := time.Now().Add(d)
	for {
		if ok, msg := check(cond); !ok {
			if msg != "" {
				t.Fatalf("%s did not hold throughout %v: %s", what, d, msg)
			}
			t.Fatalf("%s did not hold throughout %v", what, d)
		}
		left := time.Until(end)
		if left <= 0 {
			return
		}
		time.Sleep(min(EventuallyPoll, left))
	}
}

// NextMillisecond returns once the clock has moved past the millisecond it is in, so that a
// timestamp of millisecond resolution (schemas.FormatTimestamp) taken after it is later than
// every one taken before: a regulation later than the events a test planted. Inside a
// testing/synctest bubble it waits in virtual time.
func NextMillisecond() {
	now := time.Now()
	time.Sleep(now.Truncate(time.Millisecond).Add(time.Millisecond).Sub(now))
}

// check evaluates an Eventually or Consistently condition: whether it holds, and what a
// func() string said.
func check[C func() bool | func() string](cond C) (bool, string) {
	switch c := any(cond).(type) {
	case func() bool:
		return c(), ""
	case func() string:
		msg := c()
		return msg == "", msg
	}
	panic("unreachable")
}
