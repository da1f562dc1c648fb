package audiences

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// profileAPIService is a service (no Kafka) holding n profiles of the throughput benchmark's
// stream (10 audiences, 5 computed traits) in one restored partition, each with 8 messages,
// keeping up to events track events per profile.
func profileAPIService(tb testing.TB, n, events int) *Service {
	tb.Helper()
	s, part, _ := newBenchService(tb, func(c *Config) { c.ProfileEvents = events })
	part.profiles = make(map[string]*profile, n)
	s.parts[0], s.nparts = part, 1
	r := rand.New(rand.NewPCG(5, 6))
	now := time.Now().UnixMilli()
	bt := &batch{now: now, touched: map[int32]*partition{}, source: "web"}
	for i := range 8 * n {
		raw := benchEvent(r, 10*i+r.IntN(10), n)
		u := "user-" + strconv.Itoa(i%n)
		raw = strings.Replace(raw, `"userId":"user-`, `"userId":"x`, 1)
		raw = strings.Replace(raw, `"userId":"x`, `"userId":"`+u+`","_":"`, 1)
		m, err := schemas.DecodeMessage([]byte(raw))
		if err != nil {
			tb.Fatal(err, raw)
		}
		s.handleMessage(bt, 0, part, m, nil, "", time.UnixMilli(now))
		if i%100_000 == 0 {
			part.dirty = nil
		}
	}
	part.dirty = nil
	return s
}

// keptEventBytes is the heap of one kept event: of 20,000 profiles keeping 10 each, with
// them and after dropping them.
func keptEventBytes(tb testing.TB) float64 {
	s := profileAPIService(tb, 20_000, 10)
	var with, without runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&with)
	kept := 0
	for _, p := range s.parts[0].profiles {
		kept += len(p.tracks())
		p.setTracks(nil)
	}
	runtime.GC()
	runtime.ReadMemStats(&without)
	runtime.KeepAlive(s)
	return (float64(with.HeapAlloc) - float64(without.HeapAlloc)) / float64(kept)
}

// BenchmarkSegmentProfileAPI: Segment's Profile API's handler over BENCH_PROFILES profiles
// (100,000 by default) keeping 10 events each: the time of a request (through the whole
// handler: auth, lookup, rendering, JSON), its p50 and p99, and the heap of one kept event.
//
//	go test -run '^$' -bench BenchmarkSegmentProfileAPI -benchtime 20000x ./audiences
func BenchmarkSegmentProfileAPI(b *testing.B) {
	n := 100_000
	if v := os.Getenv("BENCH_PROFILES"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	perEvent := keptEventBytes(b)
	s := profileAPIService(b, n, 10)
	h := s.Handler()
	auth := "Basic " + basicToken(s.cfg.Token)
	for _, path := range []string{"traits", "traits?include=plan,spend", "traits?class=audience", "events", "external_ids", "metadata"} {
		b.Run(strings.SplitN(path, "?", 2)[0]+strings.ReplaceAll(strings.TrimPrefix(path, strings.SplitN(path, "?", 2)[0]), "&", "+"), func(b *testing.B) {
			r := rand.New(rand.NewPCG(7, 8))
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				id, rest, _ := strings.Cut(path, "?")
				u := "/v1/spaces/s/collections/users/profiles/user_id:user-" + strconv.Itoa(r.IntN(n)) + "/" + id
				if rest != "" {
					u += "?" + rest
				}
				req := httptest.NewRequest(http.MethodGet, u, nil)
				req.Header.Set("Authorization", auth)
				w := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(w, req)
				lat = append(lat, time.Since(start))
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", u, w.Code, w.Body)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
			b.ReportMetric(perEvent, "heap-bytes/event")
		})
	}
}

func basicToken(token string) string {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth(token, "")
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// TestSegmentProfileAPILoad paces PROFILE_API_LOAD_RATE requests a second (1,000 by default)
// for PROFILE_API_LOAD_SECONDS (10) over HTTP at one instance holding 100,000 profiles (traits,
// a traits include, events, in turn), and fails when the p99 is over 10 ms. It runs only when
// PROFILE_API_LOAD is set:
//
//	PROFILE_API_LOAD=1 go test -count=1 -v -run TestSegmentProfileAPILoad ./audiences
func TestSegmentProfileAPILoad(t *testing.T) {
	if os.Getenv("PROFILE_API_LOAD") == "" {
		t.Skip("PROFILE_API_LOAD is not set")
	}
	rateN, secs := 1000, 10
	if v, err := strconv.Atoi(os.Getenv("PROFILE_API_LOAD_RATE")); err == nil {
		rateN = v
	}
	if v, err := strconv.Atoi(os.Getenv("PROFILE_API_LOAD_SECONDS")); err == nil {
		secs = v
	}
	const n = 100_000
	s := profileAPIService(t, n, 10)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	paths := []string{"traits", "traits?include=plan,spend", "events"}
	total := rateN * secs
	lat := make([]time.Duration, total)
	var failed int
	var mu sync.Mutex
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(rateN)
	start := time.Now()
	for i := range total {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := fmt.Sprintf("%s/v1/spaces/s/collections/users/profiles/user_id:user-%d/%s", srv.URL, (i*7919)%n, paths[i%len(paths)])
			req, _ := http.NewRequest(http.MethodGet, u, nil)
			req.SetBasicAuth(s.cfg.Token, "")
			t0 := time.Now()
			resp, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			lat[i] = time.Since(t0)
			if err != nil || resp.StatusCode != http.StatusOK {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	slices.Sort(lat)
	p50, p99, worst := lat[total/2], lat[total*99/100], lat[total-1]
	t.Logf("%d requests in %s (%.0f/s): p50 %s, p99 %s, max %s, %d failed", total, took.Round(time.Millisecond), float64(total)/took.Seconds(), p50, p99, worst, failed)
	if failed > 0 || p99 > 10*time.Millisecond {
		t.Errorf("p99 %s (want under 10ms), %d failed", p99, failed)
	}
}
