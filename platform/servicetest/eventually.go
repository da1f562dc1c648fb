package servicetest

import (
	"testing"
	"time"
)

// EventuallyPoll is how often Eventually checks its condition.
const EventuallyPoll = 20 * time.Millisecond

// Eventually checks cond every EventuallyPoll until it holds, and fails the test (t.Fatalf)
// if it does not within timeout, with "waited <timeout> for <what>". cond is either a
// func() bool, which holds when it returns true, or a func() string, which holds when it
// returns "" and else says what is still missing: its last answer is added to the failure.
// It must be called from the test's goroutine.
func Eventually[C func() bool | func() string](t testing.TB, timeout time.Duration, what string, cond C) {
	t.Helper()
	check := func() (bool, string) {
		switch c := any(cond).(type) {
		case func() bool:
			return c(), ""
		case func() string:
			msg := c()
			return msg == "", msg
		}
		panic("unreachable")
	}
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := check()
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
