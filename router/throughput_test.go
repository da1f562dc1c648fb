package router_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/router"
)

// BenchmarkRouterThroughput routes b.N pre-produced events through a running router on the
// embedded broker and reads every delivery back: messages/s in and deliveries/s out, for 1 and
// 3 destinations, exactly once (transactions) and at least once. The time counted is from the
// router's start to the last delivery read, so it includes joining the group.
// BENCH_DEDUPE_WINDOW=0 turns de-duplication off (BENCH_MAX_POLL sets MaxPollRecords).
//
//	go test -run '^$' -bench RouterThroughput -benchtime 50000x ./router
func BenchmarkRouterThroughput(b *testing.B) {
	for _, eos := range []bool{true, false} {
		for _, dests := range []int{1, 3} {
			mode := "at-least-once"
			if eos {
				mode = "exactly-once"
			}
			b.Run(fmt.Sprintf("%s/%ddest", mode, dests), func(b *testing.B) {
				y := "sources: [{id: web, writeKey: wk}]\ndestinations:\n"
				for i := range dests {
					y += "  - {id: d" + strconv.Itoa(i) + ", type: webhooks, sources: [web], settings: {webhooks: [{url: \"https://x.example.com\"}]}}\n"
				}
				routeThroughput(b, y, dests, func(c *router.Config) {
					c.ExactlyOnce = eos
					if v := os.Getenv("BENCH_MAX_POLL"); v != "" {
						c.MaxPollRecords, _ = strconv.Atoi(v)
					}
					if v := os.Getenv("BENCH_DEDUPE_WINDOW"); v != "" {
						c.DedupeWindow, _ = time.ParseDuration(v)
					}
				})
			})
		}
	}
}

// BenchmarkRouterThroughputPlan is BenchmarkRouterThroughput's exactly-once, one-destination
// case with its source checked against a tracking plan of 20 events (the message's among
// them, valid): run both in one go to compare (docs/benchmarks.md#tracking-plans). Its
// "filters" case adds the 10 destination filters of router.BenchFilters (a realistic mix; one
// drops context.ip, so the destination gets a body of its own): the cost of both features on
// one destination (docs/benchmarks.md#destination-filters).
//
//	go test -run '^$' -bench 'RouterThroughput(Plan)?$/exactly-once/1dest' -benchtime 50000x ./router
func BenchmarkRouterThroughputPlan(b *testing.B) {
	plan := "trackingPlans:\n  - id: shop\n    rules:\n      events:\n"
	for i := range 19 {
		plan += "        - {name: Event " + strconv.Itoa(i) + ", properties: {type: object, required: [a], properties: {a: {type: string}}}}\n"
	}
	plan += "        - {name: Order Completed, properties: {type: object, required: [orderId, total, currency], properties: {orderId: {type: string}, total: {type: number, minimum: 0}, currency: {type: string, enum: [USD, EUR]}}}}\n"
	b.Run("exactly-once/1dest", func(b *testing.B) {
		routeThroughput(b, "sources: [{id: web, writeKey: wk, trackingPlan: {planId: shop}}]\n"+
			"destinations: [{id: d0, type: webhooks, sources: [web], settings: {webhooks: [{url: \"https://x.example.com\"}]}}]\n"+plan, 1, nil)
	})
	b.Run("exactly-once/1dest/filters", func(b *testing.B) {
		routeThroughput(b, "sources: [{id: web, writeKey: wk, trackingPlan: {planId: shop}}]\n"+
			"destinations:\n  - id: d0\n    type: webhooks\n    sources: [web]\n    settings: {webhooks: [{url: \"https://x.example.com\"}]}\n"+
			router.BenchFilters+plan, 1, nil)
	})
}

// routeThroughput routes b.N pre-produced events of source web through a router of config y
// (with dests destinations, each getting every event; cfg, when set, changes the router's
// config) and reports msgs/s, and deliveries/s, from its start to the last delivery read.
func routeThroughput(b *testing.B, y string, dests int, cfg func(*router.Config)) {
	h := newHarness(b, y)
	const chunk = 5000
	for i := 0; i < b.N; i += chunk {
		var recs []*kgo.Record
		for j := i; j < min(i+chunk, b.N); j++ {
			recs = append(recs, eventRecord(b, "web", `{"type":"track","event":"Order Completed","userId":"user-`+strconv.Itoa(j%1000)+`","messageId":"m`+strconv.Itoa(j)+`","properties":{"orderId":"o-1","total":129.99,"currency":"USD"},"context":{"ip":"203.0.113.9","library":{"name":"analytics-go","version":"3.3.0"}},"timestamp":"2026-01-01T00:00:00.000Z","receivedAt":"2026-01-01T00:00:00.200Z"}`))
		}
		h.produce(recs...)
	}
	out := h.deliveries()
	b.ResetTimer()
	start := time.Now()
	h.runRouter(cfg)
	want := b.N * dests
	for len(out.got) < want {
		out.poll()
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("read %d of %d deliveries", len(out.got), want)
		}
	}
	el := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el, "msgs/s")
	b.ReportMetric(float64(want)/el, "deliveries/s")
}
