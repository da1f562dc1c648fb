package deliverer

import (
	"testing"
	"time"
)

// TestFailStreaks (docs/delivery.md#auto-disable): the notices come due at 50, 90 and 100 % of
// the budget from the first failure, each once, whatever happens between; a delivery ends the
// streak; a destination without auto-disable has none; a disable that could not be written is
// due again, for the same streak.
func TestFailStreaks(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	budget := func(string) time.Duration { return 10 * time.Second }
	none := func(time.Duration) time.Duration { return 0 }
	f := failStreaks{m: map[string]*failStreak{}}
	f.failed("a", t0)
	f.failed("a", t0.Add(3*time.Second)) // the streak still began at t0
	for _, c := range []struct {
		at   time.Duration
		want int // the percent due, 0: none
	}{{4 * time.Second, 0}, {5 * time.Second, 50}, {6 * time.Second, 0}, {9 * time.Second, 90}, {9500 * time.Millisecond, 0}, {10 * time.Second, 100}, {11 * time.Second, 0}} {
		due := f.due(t0.Add(c.at), budget, none)
		if got := due["a"].percent; got != c.want {
			t.Errorf("at %s: due %d %%, want %d", c.at, got, c.want)
		}
	}
	// A failed disable: due again at the next look, for the same streak.
	f.failed("a", t0.Add(12*time.Second))
	f.again("a", dueNotice{since: t0, budget: 10 * time.Second, percent: 100})
	if n := f.due(t0.Add(12*time.Second), budget, none)["a"]; n.percent != 100 || !n.since.Equal(t0) {
		t.Errorf("after a failed disable: %+v, want 100 %% of the streak from %s", n, t0)
	}
	// A delivery ends the streak: the budget starts again at the next failure.
	f.failed("b", t0)
	f.due(t0.Add(5*time.Second), budget, none) // 50 %
	f.delivered("b")
	f.failed("b", t0.Add(6*time.Second))
	if n, ok := f.due(t0.Add(10*time.Second), budget, none)["b"]; ok {
		t.Errorf("after a delivery: %+v due at the old streak's 100 %%, want nothing", n)
	}
	if n := f.due(t0.Add(11*time.Second), budget, none)["b"]; n.percent != 50 || !n.since.Equal(t0.Add(6*time.Second)) {
		t.Errorf("the new streak: %+v, want 50 %% from %s", n, t0.Add(6*time.Second))
	}
	// No auto-disable: the streak is forgotten. A lag delays every threshold.
	f.failed("c", t0)
	if due := f.due(t0.Add(time.Hour), func(string) time.Duration { return 0 }, none); len(due) != 0 || f.m["c"] != nil {
		t.Errorf("without auto-disable: %+v", due)
	}
	f.failed("d", t0)
	lag := func(time.Duration) time.Duration { return time.Second }
	if n, ok := f.due(t0.Add(5*time.Second), budget, lag)["d"]; ok {
		t.Errorf("with a lag of 1s: %+v due at 5s", n)
	}
	if n := f.due(t0.Add(6*time.Second), budget, lag)["d"]; n.percent != 50 {
		t.Errorf("with a lag of 1s: %+v at 6s, want 50 %%", n)
	}
}
