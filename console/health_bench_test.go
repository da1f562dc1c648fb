package console

import (
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/console/internal/views"
)

// BenchmarkHealthApply: one webhooks.attempts record counted by the health view (after the
// delivery log read it: BenchmarkAttemptsApply), each of a message the view has not seen (the
// common case: one attempt per message), past the view's bound, so that the oldest message's
// state is forgotten on every record (docs/benchmarks.md#console).
//
//	go test -run '^$' -bench 'HealthApply|AttemptsApply' -benchtime 200000x -count 3 ./console/
func BenchmarkHealthApply(b *testing.B) {
	recs := benchAttemptRecords(200_000)
	dec := newAttemptDecoder()
	events := make([]views.HealthEvent, len(recs))
	for i, r := range recs {
		a, ok := dec.attempt(r)
		if !ok {
			b.Fatal("skipped")
		}
		events[i] = healthEventOf(&a)
	}
	h := views.NewHealth(24*time.Hour, 10_000)
	h.Add(events[:10_000], nil) // the bound reached: the steady state
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.Add(events[10_000+i%(len(events)-10_000):][:1], nil)
	}
}
