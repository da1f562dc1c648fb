//go:build unix

package ingest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSingleTrack is one /v1/track call per op, sequential, through the real handler and
// the real producer to an embedded broker (in this process), acknowledged before the answer:
// "handler" calls the handler directly, "http" posts over loopback with a keep-alive client.
// Besides ns/op and allocs/op (both include the in-process broker) it reports the p50 and p99
// latency of a call and the process CPU per call (getrusage: ingest and broker).
//
//	go test -run '^$' -bench SingleTrack -benchmem -benchtime 3s ./ingest
func BenchmarkSingleTrack(b *testing.B) {
	body := []byte(`{"event":"Order Completed","userId":"user-48213","anonymousId":"8f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b","timestamp":"2026-11-23T10:00:00.123Z","sentAt":"2026-11-23T10:00:00.323Z","properties":{"orderId":"o-99812","total":129.99,"revenue":119.99,"currency":"USD","products":[{"sku":"sku-1","price":64.99,"quantity":2}]},"context":{"library":{"name":"analytics-node","version":"3.1.0"},"userAgent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7)","locale":"en-US","page":{"path":"/checkout"}}}`)
	auth := basic(testKey)["Authorization"]

	b.Run("handler", func(b *testing.B) {
		h := newHarness(b)
		handler := h.svc.Handler()
		call := func() {
			req := httptest.NewRequest(http.MethodPost, "/v1/track", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", auth)
			w := httptest.NewRecorder()
			handler.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
		measure(b, call)
	})

	b.Run("http", func(b *testing.B) {
		h := newHarness(b)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		b.Cleanup(client.CloseIdleConnections)
		url := h.srv.URL + "/v1/track"
		call := func() {
			req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", auth)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
		measure(b, call)
	})
}

// measure runs call once per op after a warm-up (the producer learns the topic's partitions)
// and reports p50, p99 and process CPU per op.
func measure(b *testing.B, call func()) {
	b.Helper()
	for range 20 {
		call()
	}
	b.ReportAllocs()
	lat := make([]time.Duration, 0, 1<<16)
	var before, after syscall.Rusage
	b.ResetTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for b.Loop() {
		start := time.Now()
		call()
		lat = append(lat, time.Since(start))
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3
	}
	cpu := time.Duration(after.Utime.Nano()-before.Utime.Nano()) + time.Duration(after.Stime.Nano()-before.Stime.Nano())
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(lat)), "cpu-µs/op")
}
