package console_test

import (
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// The delivery log's benchmarks (docs/benchmarks.md#console): 100,000 attempts of 20
// destinations in webhooks.attempts, read by a console that starts after they were written.
//
//	go test -run '^$' -bench 'Console' -benchtime 1x ./console/

// produceAttempts writes n attempts spread over dests destinations, of the last minutes.
func produceAttempts(b *testing.B, env *servicetest.Env, n, dests int) {
	now := time.Now().UTC()
	const chunk = 5000
	for done := 0; done < n; done += chunk {
		recs := make([]*kgo.Record, 0, chunk)
		for i := done; i < min(n, done+chunk); i++ {
			dest := "dest-" + strconv.Itoa(i%dests)
			status, class := 200, "ok"
			if i%10 == 0 {
				status, class = 503, "status_5xx"
			}
			recs = append(recs, &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte(dest),
				Value: attemptJSON(dest, fmt.Sprintf("msg-%07d", i), "https://hooks.example.com/"+dest, 1+i%3, status, float64(5+i%200), class, now.Add(-time.Duration(n-i)*time.Millisecond))})
		}
		env.Produce(recs...)
	}
}

func benchConfig(dests int) string {
	cfg := "sources:\n  - id: web\n    writeKey: wk_bench_0123456789\ndestinations:\n"
	for d := range dests {
		cfg += fmt.Sprintf("  - id: dest-%d\n    type: webhooks\n    sources: [web]\n    settings:\n      webhooks:\n        - url: https://hooks.example.com/dest-%d\n", d, d)
	}
	return cfg
}

// BenchmarkConsoleAttempts: how fast a console reads webhooks.attempts (attempts/s: the rate it
// keeps up with), the heap its views hold, and GET /v1/destinations/{id}/attempts latency.
func BenchmarkConsoleAttempts(b *testing.B) {
	const n, dests = 100_000, 20
	env := servicetest.New(b, servicetest.Options{Config: benchConfig(dests), Partitions: 6})
	produceAttempts(b, env, n, dests)
	for b.Loop() {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		h := startConsole(b, env, func(c *console.Config) { c.EventsBackfill = 0 })
		took := time.Since(start) // ready: every attempt read
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(n)/took.Seconds(), "attempts/s")
		b.ReportMetric(float64(after.HeapAlloc-min(after.HeapAlloc, before.HeapAlloc))/(1<<20), "MiB-views")

		var lat []time.Duration
		for i := range 2000 {
			path := "/v1/destinations/dest-" + strconv.Itoa(i%dests) + "/attempts"
			switch i % 4 {
			case 1:
				path += "?status=failure"
			case 2:
				path += "?limit=1000"
			case 3:
				path += "?status=5xx&limit=200"
			}
			t0 := time.Now()
			r := h.do(http.MethodGet, path, nil)
			lat = append(lat, time.Since(t0))
			if r.Status != http.StatusOK {
				b.Fatalf("%s: %d %s", path, r.Status, r.Body)
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		st := h.do(http.MethodGet, "/v1/destinations/dest-0/stats?window=24h", nil)
		if st.Status != http.StatusOK || st.Data(b)["attempts"] != float64(n/dests) {
			b.Fatalf("stats: %s", st.Body)
		}
		h.stop()
	}
}

// BenchmarkConsoleAttemptsLive: a running console follows webhooks.attempts written at
// 30,000 attempts/s for 10 s; it reports how far behind it is when the writing stops (lag-ms:
// the time until the last attempt is in the log).
func BenchmarkConsoleAttemptsLive(b *testing.B) {
	const rate, seconds, dests = 30_000, 10, 20
	env := servicetest.New(b, servicetest.Options{Config: benchConfig(dests), Partitions: 6})
	for b.Loop() {
		h := startConsole(b, env, func(c *console.Config) { c.EventsBackfill = 0 })
		start := time.Now()
		sent := 0
		last := ""
		for tick := range seconds * 10 { // 100 ms batches
			recs := make([]*kgo.Record, 0, rate/10)
			now := time.Now().UTC()
			for range rate / 10 {
				dest := "dest-" + strconv.Itoa(sent%dests)
				last = fmt.Sprintf("live-%08d", sent)
				recs = append(recs, &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte(dest),
					Value: attemptJSON(dest, last, "https://hooks.example.com/"+dest, 1, 200, 12, "ok", now)})
				sent++
			}
			for _, r := range recs {
				env.Client.Produce(env.Ctx, r, nil)
			}
			if wait := time.Until(start.Add(time.Duration(tick+1) * 100 * time.Millisecond)); wait > 0 {
				time.Sleep(wait)
			}
		}
		if err := env.Client.Flush(env.Ctx); err != nil {
			b.Fatal(err)
		}
		written := time.Now()
		achieved := float64(sent) / written.Sub(start).Seconds()
		lastDest := "dest-" + strconv.Itoa((sent-1)%dests)
		for {
			r := h.do(http.MethodGet, "/v1/destinations/"+lastDest+"/attempts?limit=1", nil)
			if page := r.JSON(b)["data"].([]any); len(page) == 1 && page[0].(map[string]any)["messageId"] == last {
				break
			}
			if time.Since(written) > 30*time.Second {
				b.Fatal("the console did not catch up within 30 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.ReportMetric(achieved, "written/s")
		b.ReportMetric(float64(time.Since(written).Microseconds())/1000, "lag-ms")
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "MiB-heap")
		h.stop()
	}
}
