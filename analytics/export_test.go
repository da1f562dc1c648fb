package analytics

import (
	"sync"
	"time"
)

// ManualClock is a clock that moves only when told to, for tests of the flush schedule.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

// NewManualClock returns a clock standing at now.
func NewManualClock(now time.Time) *ManualClock { return &ManualClock{now: now} }

// UseClock makes c read time from clk. Call it before c's first call.
func UseClock(c *Client, clk *ManualClock) { c.clock = clk }

func (m *ManualClock) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Advance moves the clock by d and fires the timers that are due.
func (m *ManualClock) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
	for _, t := range m.timers {
		if t.armed && !t.due.After(m.now) {
			t.armed = false
			select {
			case t.ch <- m.now:
			default:
			}
		}
	}
}

func (m *ManualClock) NewTimer(d time.Duration) timer {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &manualTimer{clock: m, ch: make(chan time.Time, 1), due: m.now.Add(d), armed: true}
	m.timers = append(m.timers, t)
	return t
}

type manualTimer struct {
	clock *ManualClock
	ch    chan time.Time
	due   time.Time
	armed bool
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Reset(d time.Duration) {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	t.due = t.clock.now.Add(d)
	t.armed = true
	if d <= 0 {
		t.armed = false
		select {
		case t.ch <- t.clock.now:
		default:
		}
	}
}

func (t *manualTimer) Stop() {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	t.armed = false
}
