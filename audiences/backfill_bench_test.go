package audiences_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// revenue30d is the computed trait the backfill benchmark adds: a new sum with where, over
// the benchmark stream's orders (docs/audiences.md#backfill).
const revenue30d = `
  - {id: revenue-30d, name: Revenue 30d, source: engage, sum: {event: Order Completed, property: revenue, within: 720h, where: [{property: currency, equals: USD}]}}
`

// BenchmarkBackfill produces b.N events of the throughput benchmark's stream (100,000 users)
// to the embedded broker, lets one instance with the benchmark's config (10 audiences, 5
// computed traits) apply them, then adds a computed trait and times its backfill: from the
// config change until every partition has read its retention and merged the result. It
// reports events/s of the backfill.
//
//	go test -run '^$' -bench BenchmarkBackfill -benchtime 1000000x ./audiences
func BenchmarkBackfill(b *testing.B) {
	const users = 100_000
	env := servicetest.New(b, servicetest.Options{Config: sources + audiences.BenchConfig})
	r := rand.New(rand.NewPCG(1, 2))
	const chunk = 10_000
	for i := 0; i < b.N; i += chunk {
		recs := make([]*kgo.Record, 0, chunk)
		for j := i; j < min(i+chunk, b.N); j++ {
			recs = append(recs, servicetest.EventRecord(b, "web", audiences.BenchEvent(r, j, users)))
		}
		env.Produce(recs...)
	}
	cfg := audiences.DefaultConfig()
	cfg.Addr, cfg.TransactionalID, cfg.Token = "127.0.0.1:0", "bench", testToken
	// No sync during the benchmark (the first one would send 1.5M identify calls): the config
	// change is seen at the records sent after it (docs/audiences.md#backfill).
	cfg.SyncInterval = time.Hour
	reg := prometheus.NewRegistry()
	svc, err := audiences.New(cfg, audiences.Deps{
		Deps:   platform.Deps{Kafka: env.Kafka, Logger: env.Logger, Registerer: reg},
		Config: func() audiences.Snapshot { return env.Store.Snapshot() }, ConfigReady: env.Store.Ready(),
	})
	if err != nil {
		b.Fatal(err)
	}
	adm := kadm.NewClient(env.Client)
	env.Start("audiences", svc.Run)
	servicetest.Eventually(b, 10*time.Minute, "the service caught up", func() bool { return committed(b, adm, cfg) >= int64(b.N) })

	b.ResetTimer()
	start := time.Now()
	env.Apply(sources + audiences.BenchConfig + revenue30d)
	time.Sleep(500 * time.Millisecond) // the config store's poll
	recs := make([]*kgo.Record, 0, 256)
	for i := range 256 { // a record for every partition
		recs = append(recs, servicetest.EventRecord(b, "web", audiences.BenchEvent(r, b.N+i, users)))
	}
	env.Produce(recs...)
	servicetest.Eventually(b, 10*time.Minute, "the backfill is done", func() bool {
		return metricValue(reg, "tributary_audiences_backfill_events_total") >= float64(b.N) &&
			metricValue(reg, "tributary_audiences_backfill_running") == 0
	})
	el := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el, "events/s")
	b.ReportMetric(el, "s")
}

// metricValue is the value of the counter or gauge name of reg (-1: none).
func metricValue(reg *prometheus.Registry, name string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}
