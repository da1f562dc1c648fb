package ingest

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSingleTrack is one /v1/track call at a time, as a server-side client without batching
// sends it: HTTP on loopback (keep-alive), the whole handler, and the produce to the embedded
// broker until Kafka acknowledged it. One op is one call, so ns/op is its latency; it also
// reports the p50 and p99 latency and the CPU the process (handler, producer, broker and the
// client) spent per call. docs/benchmarks.md#single-v1track-call compares commits with it:
//
//	go test -run '^$' -bench SingleTrack -benchtime 2000x -count 3 ./ingest
func BenchmarkSingleTrack(b *testing.B) {
	h := newHarness(b)
	body := []byte(`{"event":"Order Completed","userId":"user-48213","properties":{"orderId":"o-99812","total":129.99,"currency":"USD"},"context":{"locale":"en-US","page":{"path":"/checkout"}}}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	call := func() {
		req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/track", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.SetBasicAuth(testKey, "")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	for range 20 { // connection, topic metadata, producer id
		call()
	}
	lat := make([]time.Duration, 0, b.N)
	cpu0 := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		call()
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/call")
}

// cpuTime is the user + system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
