// Command loadgen is Tributary's load tool: it posts batches of realistic Segment messages
// (~400 bytes each) to an ingest with N concurrent connections for a duration, and reports
// events/s, request latency percentiles and CPU seconds per million events.
//
//	go run ./devstack/cmd/loadgen -inprocess -c 16 -d 60s          # embedded broker + ingest here
//	go run ./devstack/cmd/loadgen -url http://127.0.0.1:8080 -key wk_dev_web -pid $(pgrep tributary)
//	go run ./devstack/cmd/loadgen -inprocess -c 32 -d 20s -cpuprofile /tmp/ingest.prof
//	go run ./devstack/cmd/loadgen -rate 5000 -batch 50 -d 60s -pid $(pgrep tributary)  # paced
//
// With -inprocess the CPU figure is that of this whole process (load tool, broker and ingest
// together); with -pid it is that of the given process only (e.g. the ingest, or make run).
// -inprocess starts only the broker and ingest, so that the figure stays the ingest's as services
// are added to make run; -inprocess -stack starts every service of make run (devstack.New).
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
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"golang.org/x/time/rate"

	"github.com/tributary-cdp/tributary/devstack"
	"github.com/tributary-cdp/tributary/ingest"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/embedded"
	"github.com/tributary-cdp/tributary/schemas"
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
	wholeStack := flag.Bool("stack", false, "with -inprocess: start every service of make run, not only ingest")
	paced := flag.Int("rate", 0, "events per second in all, paced (0: as fast as the connections go)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of this process over the load phase to this file (with -inprocess it covers the ingest and the broker too)")
	flag.Parse()
	if *conns < 1 || *batch < 1 || *dur <= 0 {
		return fmt.Errorf("-c, -batch and -d must be positive")
	}

	ctx, stop := platform.SignalContext(context.Background())
	defer stop()
	if *inproc {
		start := startIngest
		if *wholeStack {
			start = startStack
		}
		base, shutdown, err := start(ctx)
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
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return fmt.Errorf("creating the CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("starting the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	var limiter *rate.Limiter
	if *paced > 0 {
		limiter = rate.NewLimiter(rate.Limit(*paced), max(*batch, *paced/10))
	}
	cpu0 := devstack.ProcessCPUSeconds(*pid)
	start := time.Now()
	deadline := start.Add(*dur)
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, seed*7+1))
			local := hdrhistogram.New(1, int64(60*time.Second/time.Microsecond), 3)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if limiter != nil && limiter.WaitN(ctx, *batch) != nil {
					break
				}
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
	cpu := devstack.ProcessCPUSeconds(*pid) - cpu0
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
// identify and page calls, random users, a library context and a few properties. It appends
// bytes instead of using fmt (which took a sixth of the machine's CPU under load, CPU that the
// ingest being measured then did not have); the bodies are byte for byte what the fmt version
// wrote (TestMakeBatchMatchesFmt).
func makeBatch(rng *rand.Rand, n int) []byte {
	return appendBatch(make([]byte, 0, n*420+64), rng, n, time.Now().UTC().Format("2006-01-02T15:04:05.000Z"))
}

func appendBatch(b []byte, rng *rand.Rand, n int, now string) []byte {
	// Every string written here is plain ASCII without quotes or backslashes: JSON quoting is
	// just the two quotes.
	str := func(s string) { b = append(b, '"'); b = append(b, s...); b = append(b, '"') }
	num := func(v int) { b = strconv.AppendInt(b, int64(v), 10) }
	hex16 := func(v uint64) {
		const digits = "0123456789abcdef"
		for shift := 60; shift >= 0; shift -= 4 {
			b = append(b, digits[(v>>uint(shift))&0xf])
		}
	}
	b = append(b, `{"batch":[`...)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		user := rng.IntN(1_000_000)
		msgID := rng.Uint64()
		head := func(typ string) {
			b = append(b, `{"type":"`...)
			b = append(b, typ...)
			b = append(b, `","messageId":"lg-`...)
			hex16(msgID)
			b = append(b, `","userId":"user_`...)
			num(user)
			b = append(b, '"')
		}
		switch r := rng.IntN(10); {
		case r < 7:
			head("track")
			b = append(b, `,"anonymousId":"5f0a4b2c-9d1e-4c3b-8a7f-1e2d3c4b5a69","event":`...)
			str(events[rng.IntN(len(events))])
			b = append(b, `,"properties":{"orderId":"ord_`...)
			num(rng.IntN(99999))
			b = append(b, `","total":`...)
			num(rng.IntN(500))
			b = append(b, '.')
			if cents := rng.IntN(100); cents < 10 {
				b = append(b, '0', byte('0'+cents))
			} else {
				num(cents)
			}
			b = append(b, `,"currency":"USD","coupon":"WINTER","items":`...)
			num(1 + rng.IntN(9))
			b = append(b, `},"context":{"library":{"name":"analytics.js","version":"next-1.64.0"},"page":{"path":"/checkout","url":"https://shop.example.com/checkout"},"locale":"en-US"},"timestamp":`...)
			str(now)
			b = append(b, '}')
		case r < 9:
			head("identify")
			b = append(b, `,"traits":{"email":"user_`...)
			num(user)
			b = append(b, `@example.com","name":"Peter Gibbons","plan":"pro","logins":`...)
			num(rng.IntN(500))
			b = append(b, `,"company":"Initech"},"context":{"library":{"name":"analytics-go","version":"3.1.0"},"locale":"en-US"},"timestamp":`...)
			str(now)
			b = append(b, '}')
		default:
			head("page")
			b = append(b, `,"name":"Pricing","properties":{"path":"/pricing","referrer":"https://www.example.org/","title":"Pricing","url":"https://shop.example.com/pricing"},"context":{"library":{"name":"analytics.js","version":"next-1.64.0"}},"timestamp":`...)
			str(now)
			b = append(b, '}')
		}
	}
	b = append(b, `],"sentAt":"`...)
	b = append(b, now...)
	return append(b, `"}`...)
}

func avgMessageBytes() int {
	body := makeBatch(rand.New(rand.NewPCG(1, 2)), 1000)
	return len(body) / 1000
}

// configFile is the tenant config -inprocess applies: the demo source wk_dev_web.
const configFile = "deploy/config/dev.yaml"

// startStack starts an embedded broker (under a temporary DATA_DIR) and every service of make
// run, and returns the ingest URL.
func startStack(ctx context.Context) (string, func(), error) {
	if _, err := os.Stat(configFile); err != nil {
		return "", nil, fmt.Errorf("run loadgen -inprocess from the repository root (it applies %s)", configFile)
	}
	dir, err := os.MkdirTemp("", "loadgen-")
	if err != nil {
		return "", nil, err
	}
	cfg := devstack.DefaultConfig()
	cfg.DataDir, cfg.EmbeddedPort, cfg.Ingest.Addr, cfg.Audiences.Addr, cfg.ConfigFile = dir, 0, "127.0.0.1:0", "127.0.0.1:0", configFile
	stack, err := devstack.New(ctx, cfg, zerolog.New(os.Stderr).Level(zerolog.WarnLevel))
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- stack.Run(runCtx) }()
	if err := stack.WaitReady(ctx); err != nil {
		cancel()
		<-done
		os.RemoveAll(dir)
		return "", nil, err
	}
	return "http://" + stack.IngestAddr(), func() { cancel(); <-done; os.RemoveAll(dir) }, nil
}

// startIngest starts an embedded broker (under a temporary data directory), creates the topics,
// applies the demo config and starts the ingest service alone, wired as devstack wires it, and
// returns its URL.
func startIngest(ctx context.Context) (_ string, _ func(), err error) {
	if _, err := os.Stat(configFile); err != nil {
		return "", nil, fmt.Errorf("run loadgen -inprocess from the repository root (it applies %s)", configFile)
	}
	logger := zerolog.New(os.Stderr).Level(zerolog.WarnLevel)
	dir, err := os.MkdirTemp("", "loadgen-")
	if err != nil {
		return "", nil, err
	}
	var closers []func()
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		os.RemoveAll(dir)
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	broker, err := embedded.Start(embedded.Options{DataDir: filepath.Join(dir, "kafka"), Logger: logger})
	if err != nil {
		return "", nil, fmt.Errorf("starting the embedded broker: %w", err)
	}
	closers = append(closers, broker.Close)
	defaults := devstack.DefaultConfig()
	kafka := defaults.Kafka
	kafka.Brokers, kafka.ReplicationFactor = broker.Addrs(), 1
	admin, err := platform.NewKafkaClient(kafka, logger)
	if err != nil {
		return "", nil, err
	}
	closers = append(closers, admin.Close)
	topics := platform.DefaultTopics(kafka.Partitions, defaults.Deliverer.RetrySchedule)
	if err := platform.EnsureTopics(ctx, kadm.NewClient(admin), 1, topics); err != nil {
		return "", nil, fmt.Errorf("creating topics: %w", err)
	}
	if _, err := platform.ApplyConfigFile(ctx, kafka, schemas.TopicConfig, configFile, platform.ApplyOptions{}, logger); err != nil {
		return "", nil, err // it names the file
	}
	store, err := platform.NewConfigStore(kafka, schemas.TopicConfig, logger)
	if err != nil {
		return "", nil, err
	}
	icfg := ingest.DefaultConfig()
	icfg.Addr = "127.0.0.1:0"
	svc, err := ingest.New(icfg, ingest.Deps{
		Deps: platform.Deps{
			Kafka:  kafka,
			Logger: logger,
		},
		Sources:     func() ingest.Sources { return store.Snapshot() },
		ConfigReady: store.Ready(),
	})
	if err != nil {
		return "", nil, err
	}
	if err := svc.Listen(); err != nil {
		return "", nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- platform.RunAll(runCtx, store, svc) }()
	closers = append(closers, func() { cancel(); <-done })
	select {
	case <-store.Ready():
	case <-ctx.Done():
		return "", nil, ctx.Err()
	}
	return "http://" + svc.Addr(), cleanup, nil
}
