package audiences_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// benchConfig has 10 audiences and 5 computed traits over the events benchEvents sends.
const benchConfig = sources + `
audiences:
  - {id: a1, name: A1, source: engage, rule: {event: Order Completed, atLeast: 3, within: 720h}}
  - {id: a2, name: A2, source: engage, rule: {trait: plan, equals: pro}}
  - {id: a3, name: A3, source: engage, rule: {all: [{event: Product Viewed, atLeast: 5, within: 24h}, {not: {event: Order Completed, within: 24h}}]}}
  - {id: a4, name: A4, source: engage, rule: {event: Order Completed, where: [{property: revenue, gte: 100}]}}
  - {id: a5, name: A5, source: engage, rule: {any: [{trait: country, in: [FR, DE]}, {trait: vip, equals: true}]}}
  - {id: a6, name: A6, source: engage, rule: {computedTrait: spend, gt: 500}}
  - {id: a7, name: A7, source: engage, rule: {event: Signed Up, atMost: 0}}
  - {id: a8, name: A8, source: engage, rule: {trait: email, contains: "@example.com"}}
  - {id: a9, name: A9, source: engage, rule: {event: Page Viewed, atLeast: 10, within: 1h}}
  - {id: a10, name: A10, source: engage, rule: {computedTrait: categories, contains: shoes}}
computedTraits:
  - {id: spend, name: Spend, source: engage, sum: {event: Order Completed, property: revenue, within: 2160h}}
  - {id: orders-30d, name: Orders 30d, source: engage, count: {event: Order Completed, within: 720h}}
  - {id: last-sku, name: Last SKU, source: engage, last: {event: Product Viewed, property: sku}}
  - {id: top-category, name: Top Category, source: engage, mostFrequent: {event: Product Viewed, property: category}}
  - {id: categories, name: Categories, source: engage, uniqueList: {event: Product Viewed, property: category}}
`

var (
	benchCategories = []string{"shoes", "hats", "bags", "coats", "socks"}
	benchPlans      = []string{"free", "pro", "team"}
	benchCountries  = []string{"FR", "DE", "US", "GB"}
)

// benchEvent is the i-th event of the benchmark stream over users users: views, orders,
// pages and identify calls, with properties as real clients send them.
func benchEvent(r *rand.Rand, i, users int) string {
	u := "user-" + strconv.Itoa(r.IntN(users))
	ts := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	switch i % 10 {
	case 0:
		return fmt.Sprintf(`{"type":"identify","userId":%q,"messageId":"m%d","traits":{"plan":%q,"country":%q,"email":"%s@example.com"},"timestamp":%q}`,
			u, i, benchPlans[r.IntN(3)], benchCountries[r.IntN(4)], u, ts)
	case 1, 2:
		return fmt.Sprintf(`{"type":"track","userId":%q,"messageId":"m%d","event":"Order Completed","properties":{"revenue":%d,"currency":"USD","orderId":"o-%d"},"context":{"ip":"203.0.113.9","library":{"name":"analytics-go","version":"3.3.0"}},"timestamp":%q}`,
			u, i, r.IntN(300), i, ts)
	case 3, 4, 5, 6:
		return fmt.Sprintf(`{"type":"track","userId":%q,"messageId":"m%d","event":"Product Viewed","properties":{"sku":"sku-%d","category":%q,"price":19.99},"context":{"ip":"203.0.113.9"},"timestamp":%q}`,
			u, i, r.IntN(1000), benchCategories[r.IntN(5)], ts)
	default:
		return fmt.Sprintf(`{"type":"track","userId":%q,"messageId":"m%d","event":"Page Viewed","properties":{"path":"/p/%d"},"timestamp":%q}`, u, i, r.IntN(50), ts)
	}
}

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
	env := servicetest.New(b, servicetest.Options{Config: benchConfig})
	r := rand.New(rand.NewPCG(1, 2))
	const chunk = 10_000
	for i := 0; i < b.N; i += chunk {
		recs := make([]*kgo.Record, 0, chunk)
		for j := i; j < min(i+chunk, b.N); j++ {
			recs = append(recs, servicetest.EventRecord(b, "web", benchEvent(r, j, users)))
		}
		env.Produce(recs...)
	}
	cfg := audiences.DefaultConfig()
	cfg.Addr, cfg.TransactionalID = "127.0.0.1:0", "bench"
	svc, err := audiences.New(cfg, audiences.Deps{Kafka: env.Kafka, Logger: env.Logger,
		Config: func() audiences.Snapshot { return env.Store.Snapshot() }, ConfigReady: env.Store.Ready()})
	if err != nil {
		b.Fatal(err)
	}
	adm := kadm.NewClient(env.Client)
	b.ResetTimer()
	start := time.Now()
	env.Start("audiences", svc.Run)
	for committed(b, adm, cfg) < int64(b.N) {
		if time.Since(start) > 10*time.Minute {
			b.Fatal("not caught up after 10 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
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
