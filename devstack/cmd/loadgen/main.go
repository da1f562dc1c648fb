// Command loadgen is Tributary's load tool: it posts batches of realistic Segment messages
// (~400 bytes each) to an ingest with N concurrent connections for a duration, and reports
// events/s, request latency percentiles and CPU seconds per million events.
//
//	go run ./devstack/cmd/loadgen -inprocess -c 16 -d 60s          # embedded broker + ingest here
//	go run ./devstack/cmd/loadgen -url http://127.0.0.1:8080 -key wk_dev_web -pid $(pgrep tributary)
//
// With -inprocess the CPU figure is that of this whole process (load tool, broker and ingest
// together); with -pid it is that of the given process only (e.g. the ingest, or make run).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/devstack"
	"github.com/tributary-cdp/tributary/platform"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run() error {
	url := flag.String("url", "http://127.0.0.1:8080", "ingest base URL")
	key := flag.String("key", "wk_dev_web", "write key")
	conns := flag.Int("c", 16, "concurrent connections")
	dur := flag.Duration("d", 30*time.Second, "how long to send")
	batch := flag.Int("batch", 100, "messages per batch request")
	pid := flag.Int("pid", 0, "process whose CPU time to report (0: this process)")
	inproc := flag.Bool("inprocess", false, "start an embedded broker and ingest in this process")
	flag.Parse()
	if *conns < 1 || *batch < 1 || *dur <= 0 {
		return fmt.Errorf("-c, -batch and -d must be positive")
	}

	ctx, stop := platform.SignalContext(context.Background())
	defer stop()
	if *inproc {
		base, shutdown, err := startInProcess(ctx)
		if err != nil {
			return err
		}
		defer shutdown()
		*url, *key, *pid = base, "wk_dev_web", os.Getpid()
	}
	if *pid == 0 {
		*pid = os.Getpid()
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns}, Timeout: 30 * time.Second}
	// Warm up: one request so that topics, metadata and connections exist.
	if err := post(client, *url, *key, makeBatch(rand.New(rand.NewPCG(0, 0)), 1)); err != nil {
		return fmt.Errorf("warm-up request: %w", err)
	}

	var (
		sent, failed atomic.Int64
		mu           sync.Mutex
		hist         = hdrhistogram.New(1, int64(60*time.Second/time.Microsecond), 3)
		wg           sync.WaitGroup
	)
	cpu0 := cpuSeconds(*pid)
	start := time.Now()
	deadline := start.Add(*dur)
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, seed*7+1))
			local := hdrhistogram.New(1, int64(60*time.Second/time.Microsecond), 3)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				body := makeBatch(rng, *batch)
				t0 := time.Now()
				if err := post(client, *url, *key, body); err != nil {
					failed.Add(1)
					continue
				}
				_ = local.RecordValue(time.Since(t0).Microseconds())
				sent.Add(int64(*batch))
			}
			mu.Lock()
			hist.Merge(local)
			mu.Unlock()
		}(uint64(i + 1))
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuSeconds(*pid) - cpu0
	events := sent.Load()
	fmt.Printf("connections          %d\n", *conns)
	fmt.Printf("batch size           %d messages (~%d bytes each)\n", *batch, avgMessageBytes())
	fmt.Printf("duration             %s\n", elapsed.Round(time.Millisecond))
	fmt.Printf("events accepted      %d (%d failed requests)\n", events, failed.Load())
	fmt.Printf("events/s             %.0f\n", float64(events)/elapsed.Seconds())
	fmt.Printf("requests/s           %.0f\n", float64(hist.TotalCount())/elapsed.Seconds())
	fmt.Printf("latency p50          %s\n", time.Duration(hist.ValueAtQuantile(50))*time.Microsecond)
	fmt.Printf("latency p99          %s\n", time.Duration(hist.ValueAtQuantile(99))*time.Microsecond)
	fmt.Printf("latency max          %s\n", time.Duration(hist.Max())*time.Microsecond)
	if events > 0 && cpu > 0 {
		fmt.Printf("CPU s per 1M events  %.2f (pid %d, %.1f CPU s in all)\n", cpu/float64(events)*1e6, *pid, cpu)
	}
	if failed.Load() > 0 {
		return fmt.Errorf("%d requests failed", failed.Load())
	}
	return nil
}

func post(client *http.Client, url, key string, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/batch", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.SetBasicAuth(key, "")
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

var events = []string{"Order Completed", "Product Viewed", "Checkout Started", "Signed Up", "Cart Viewed"}

// makeBatch builds a /v1/batch body of n realistic messages: mostly track calls, with
// identify and page calls, random users, a library context and a few properties.
func makeBatch(rng *rand.Rand, n int) []byte {
	var b bytes.Buffer
	b.Grow(n * 420)
	b.WriteString(`{"batch":[`)
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		user := "user_" + strconv.Itoa(rng.IntN(1_000_000))
		msgID := fmt.Sprintf("lg-%016x", rng.Uint64())
		switch r := rng.IntN(10); {
		case r < 7:
			fmt.Fprintf(&b, `{"type":"track","messageId":%q,"userId":%q,"anonymousId":"5f0a4b2c-9d1e-4c3b-8a7f-1e2d3c4b5a69","event":%q,"properties":{"orderId":"ord_%d","total":%d.%02d,"currency":"USD","coupon":"WINTER","items":%d},"context":{"library":{"name":"analytics.js","version":"next-1.64.0"},"page":{"path":"/checkout","url":"https://shop.example.com/checkout"},"locale":"en-US"},"timestamp":%q}`,
				msgID, user, events[rng.IntN(len(events))], rng.IntN(99999), rng.IntN(500), rng.IntN(100), 1+rng.IntN(9), now)
		case r < 9:
			fmt.Fprintf(&b, `{"type":"identify","messageId":%q,"userId":%q,"traits":{"email":"%s@example.com","name":"Peter Gibbons","plan":"pro","logins":%d,"company":"Initech"},"context":{"library":{"name":"analytics-go","version":"3.1.0"},"locale":"en-US"},"timestamp":%q}`,
				msgID, user, user, rng.IntN(500), now)
		default:
			fmt.Fprintf(&b, `{"type":"page","messageId":%q,"userId":%q,"name":"Pricing","properties":{"path":"/pricing","referrer":"https://www.example.org/","title":"Pricing","url":"https://shop.example.com/pricing"},"context":{"library":{"name":"analytics.js","version":"next-1.64.0"}},"timestamp":%q}`,
				msgID, user, now)
		}
	}
	b.WriteString(`],"sentAt":"` + now + `"}`)
	return b.Bytes()
}

func avgMessageBytes() int {
	body := makeBatch(rand.New(rand.NewPCG(1, 2)), 1000)
	return len(body) / 1000
}

// cpuSeconds is the user+system CPU time of pid, from /proc/<pid>/stat.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // clock ticks; USER_HZ is 100 on Linux
}

// startInProcess starts an embedded broker (in memory, under a temporary DATA_DIR) and the
// stack's services, and returns the ingest URL.
func startInProcess(ctx context.Context) (string, func(), error) {
	dir, err := os.MkdirTemp("", "loadgen-")
	if err != nil {
		return "", nil, err
	}
	cfg := devstack.Defaults()
	cfg.DataDir, cfg.EmbeddedPort, cfg.IngestAddr, cfg.ConfigFile = dir, 0, "127.0.0.1:0", "deploy/config/dev.yaml"
	if _, err := os.Stat(cfg.ConfigFile); err != nil {
		return "", nil, fmt.Errorf("run loadgen -inprocess from the repository root (it applies %s)", cfg.ConfigFile)
	}
	stack, err := devstack.New(ctx, cfg, zerolog.New(os.Stderr).Level(zerolog.WarnLevel))
	if err != nil {
		return "", nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- stack.Run(runCtx) }()
	if err := stack.WaitReady(ctx); err != nil {
		cancel()
		return "", nil, err
	}
	return "http://" + stack.IngestAddr(), func() { cancel(); <-done; os.RemoveAll(dir) }, nil
}
