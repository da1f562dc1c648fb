package deliverer

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestFailureLogSummaries: while a destination keeps failing, one summary line at most every
// 30 s, with the count and the age of the oldest message; a failure of another kind is a new
// first line; the breaker's opening and closing are lines too.
func TestFailureLogSummaries(t *testing.T) {
	var out strings.Builder
	f := newFailureLog(zerolog.New(&out))
	t0 := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	first := t0.Add(-4 * time.Minute)
	for i := range 40 { // one failure a second for 40 s
		now := t0.Add(time.Duration(i) * time.Second)
		f.failed("order-hooks", "hooks.example.com", 503, "http_5xx: HTTP 503 from hooks.example.com", first, now.Add(10*time.Second), now)
	}
	f.failed("order-hooks", "hooks.example.com", 0, "timeout: context deadline exceeded", first, t0.Add(time.Minute), t0.Add(41*time.Second))
	f.breaker("hooks.example.com", true, 30*time.Second)
	f.breaker("hooks.example.com", false, 0)
	f.delivered("order-hooks", "hooks.example.com", t0.Add(50*time.Second))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		`"message":"destination order-hooks failing: 503 Service Unavailable"`,
		`"message":"destination order-hooks: 30 attempts failed in 30s, 503 Service Unavailable; oldest message waiting 4m30s"`,
		`"message":"destination order-hooks failing: timeout"`,
		`"message":"circuit breaker opened: no request to hooks.example.com for 30s"`,
		`"message":"circuit breaker closed: hooks.example.com answers again"`,
		`"message":"destination order-hooks delivers again after 41 failed attempts in 50s"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %s\nwant %s", i+1, lines[i], w)
		}
	}
}
