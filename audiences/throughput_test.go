package audiences_test

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// BenchmarkAudiencesThroughput processes b.N pre-produced events (10 audiences, 5 computed
// traits, BENCH_USERS users, 100,000 by default) through one running instance on the
// embedded broker, exactly once, and reports events/s from its start until its group has
// committed every event.
//
//	go test -run '^$' -bench AudiencesThroughput -benchtime 500000x ./audiences
func BenchmarkAudiencesThroughput(b *testing.B) {
	users := 100_000
	if v := os.Getenv("BENCH_USERS"); v != "" {
		users, _ = strconv.Atoi(v)
	}
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
	cfg.IdentityExternalIDs = os.Getenv("BENCH_IDENTITY") != "off" // docs/benchmarks.md
	svc, err := audiences.New(cfg, audiences.Deps{
		Deps: platform.Deps{
			Kafka:  env.Kafka,
			Logger: env.Logger,
		},
		Config: func() audiences.Snapshot { return env.Store.Snapshot() }, ConfigReady: env.Store.Ready(),
	})
	if err != nil {
		b.Fatal(err)
	}
	adm := kadm.NewClient(env.Client)
	b.ResetTimer()
	start := time.Now()
	env.Start("audiences", svc.Run)
	servicetest.Eventually(b, 10*time.Minute, "the service caught up", func() bool { return committed(b, adm, cfg) >= int64(b.N) })
	el := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el, "events/s")
}

// committed is the sum of the group's committed offsets on tracking.events.
func committed(b *testing.B, adm *kadm.Client, cfg audiences.Config) int64 {
	offs, err := adm.FetchOffsets(b.Context(), cfg.Group)
	if err != nil {
		return 0
	}
	var n int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == cfg.EventsTopic && o.Err == nil {
			n += o.At
		}
	})
	return n
}
