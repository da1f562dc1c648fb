package audiences

import (
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// BenchmarkEventPath is the audiences transform without Kafka, with identity resolution off
// and on, side by side: the throughput benchmark's stream (10 audiences, 5 computed traits,
// 100,000 users, an email in every identify) in polls of 4,500 events over 3 partitions, each
// poll's profile changelog written and its hand-offs (the links) applied on their partitions,
// as the next transaction would. It isolates what identity resolution costs the event path
// from the broker's share (docs/benchmarks.md#audiences).
//
//	go test -run '^$' -bench EventPath -benchtime 300000x ./audiences
func BenchmarkEventPath(b *testing.B) {
	const users, poll, nparts = 100_000, 4_500, 3
	r := rand.New(rand.NewPCG(1, 2))
	msgs := make([]*schemas.Message, 300_000)
	for i := range msgs {
		m, err := schemas.DecodeMessage([]byte(benchEvent(r, i, users)))
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = m
	}
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			s, _, _ := newBenchService(b, func(c *Config) { c.IdentityExternalIDs = mode == "on" })
			s.nparts = nparts
			parts := map[int32]*partition{}
			for p := range int32(nparts) {
				parts[p] = &partition{restored: true, profiles: map[string]*profile{}, meta: partMeta{Defs: map[string]metaDef{}}}
			}
			s.parts = parts
			now := time.Now()
			b.ReportAllocs()
			runtime.GC()
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; {
				bt := &batch{now: now.UnixMilli(), touched: map[int32]*partition{}}
				for j := 0; j < poll && i < b.N; j, i = j+1, i+1 {
					m := msgs[i%len(msgs)]
					p := s.partitionOf(m.Key())
					s.handleMessage(bt, p, parts[p], m, nil, "", now)
				}
				bt.encodeLinks() // as transform before producing
				handOffs := bt.out
				bt.out = nil
				for _, rec := range handOffs { // the next transaction reads the hand-offs
					if rec.Topic == s.cfg.RepartitionTopic {
						o, err := decodeOp(rec.Value)
						if err != nil {
							b.Fatal(err)
						}
						s.handleOp(bt, rec.Partition, parts[rec.Partition], &o, now)
					}
				}
				for p, part := range bt.touched {
					bt.out = s.changelog(bt.out, p, part)
				}
			}
			b.StopTimer()
			// CPU time of the whole process (GC included) per event: on a shared machine
			// wall time per event measures the neighbours too.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
