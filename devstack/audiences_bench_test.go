package devstack_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkRealtimeAudienceLatency runs the whole stack (what make run runs), sends b.N
// qualifying track calls over HTTP at BENCH_RATE a second (200 by default), each for a new
// user, and measures how long each takes to come out as the realtime audience's identify
// at a webhook receiver: p50, p99 and max (docs/benchmarks.md#audiences).
//
//	go test -run '^$' -bench RealtimeAudienceLatency -benchtime 6000x ./devstack
func BenchmarkRealtimeAudienceLatency(b *testing.B) {
	rate := 200
	if v := os.Getenv("BENCH_RATE"); v != "" {
		rate, _ = strconv.Atoi(v)
	}
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			Type   string         `json:"type"`
			UserID string         `json:"userId"`
			Traits map[string]any `json:"traits"`
		}
		if json.Unmarshal(body, &m) == nil && m.Type == "identify" && m.Traits["big_spenders"] == true {
			mu.Lock()
			if _, dup := arrived[m.UserID]; !dup {
				arrived[m.UserID] = time.Now()
			}
			mu.Unlock()
		}
	}))
	defer srv.Close()
	st := startStack(b, srv.URL, withConfig(b, `audiences:
  - id: big-spenders
    name: Big Spenders
    source: web
    realtime: true
    rule:
      event: Order Completed
      where: [{property: revenue, gte: 100}]
`))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	sent := make([]time.Time, b.N)
	b.ResetTimer()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	for i := range b.N {
		<-tick.C
		sent[i] = time.Now()
		wg.Go(func() {
			body := fmt.Sprintf(`{"userId":"rt-%d","event":"Order Completed","properties":{"revenue":150}}`, i)
			req, _ := http.NewRequest(http.MethodPost, "http://"+st.IngestAddr()+"/v1/track", strings.NewReader(body))
			req.SetBasicAuth("wk_e2e", "")
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(arrived)
		mu.Unlock()
		if n == b.N {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d identify calls arrived", n, b.N)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	lat := make([]time.Duration, 0, b.N)
	for i := range b.N {
		lat = append(lat, arrived["rt-"+strconv.Itoa(i)].Sub(sent[i]))
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(1), "max-ms")
}
