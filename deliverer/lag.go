package deliverer

import (
	"context"
	rtmetrics "runtime/metrics"
	"sync/atomic"
	"time"
)

// localLag measures how long this process's runnable goroutines wait for a CPU: the 90th
// percentile of the Go scheduler's latencies (runtime/metrics /sched/latencies:seconds) over
// the last lagInterval. A busy or starved process (its own load, a garbage collection, a
// neighbour taking the cores) delays every answer by a few of those waits — the goroutine that
// writes the request, the one that reads the answer — whatever the endpoint does; the
// concurrency limit does not take that for the endpoint's queue, and a host whose round trip
// that explains is not judged slow (docs/delivery.md#concurrency-found-per-endpoint).
type localLag struct {
	p90    atomic.Int64 // nanoseconds
	sample []rtmetrics.Sample
	prev   []uint64
}

const (
	schedLatencies = "/sched/latencies:seconds"
	// lagInterval is how often the scheduler's latencies are read.
	lagInterval = 100 * time.Millisecond
	// lagHops is how many scheduler waits one round trip takes: the request's write, the
	// answer's read, and the goroutine that waits for it.
	lagHops = 4
)

func newLocalLag() *localLag {
	return &localLag{sample: []rtmetrics.Sample{{Name: schedLatencies}}}
}

// current is the recent 90th percentile scheduler latency (0 before the first reading).
func (l *localLag) current() time.Duration { return time.Duration(l.p90.Load()) }

// roundTrip is the part of a round trip the process's own busyness explains.
func (l *localLag) roundTrip() time.Duration { return lagHops * l.current() }

// read takes one reading: the 90th percentile of the latencies since the previous one.
func (l *localLag) read() {
	rtmetrics.Read(l.sample)
	if l.sample[0].Value.Kind() != rtmetrics.KindFloat64Histogram {
		return
	}
	h := l.sample[0].Value.Float64Histogram()
	if len(l.prev) != len(h.Counts) {
		l.prev = make([]uint64, len(h.Counts))
		copy(l.prev, h.Counts)
		return
	}
	var total uint64
	for i, c := range h.Counts {
		total += c - l.prev[i]
	}
	if total == 0 {
		l.p90.Store(0)
		return
	}
	want, seen := total-total/10, uint64(0)
	for i, c := range h.Counts {
		seen += c - l.prev[i]
		if seen >= want {
			// Buckets[i+1] is the upper bound of bucket i; the last may be +Inf.
			upper := h.Buckets[min(i+1, len(h.Buckets)-1)]
			if upper > 10 {
				upper = h.Buckets[i]
			}
			l.p90.Store(int64(upper * float64(time.Second)))
			break
		}
	}
	copy(l.prev, h.Counts)
}

// run reads the scheduler's latencies every lagInterval until ctx is done.
func (l *localLag) run(ctx context.Context) {
	t := time.NewTicker(lagInterval)
	defer t.Stop()
	for {
		l.read()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
