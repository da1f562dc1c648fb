// Command e2eload measures Tributary end to end: it runs the whole stack of `make run` in this
// process (embedded broker, ingest, router, deliverer, audiences, console) with a tenant
// config whose one destination posts to a fast webhook receiver that e2eload also runs, sends
// Segment batches over HTTP, and reports
//
//   - events/s acknowledged by ingest and webhooks/s received,
//   - the latency from ingest's 200 to the webhook's receipt (p50, p90, p99, max) per message,
//   - the process's CPU time per 1,000 webhooks and its peak RSS.
//
// Run from the repository root:
//
//	go run ./devstack/cmd/e2eload -d 30s               # as fast as it goes
//	go run ./devstack/cmd/e2eload -d 30s -rate 2000    # paced at 2,000 events/s
//	go run ./devstack/cmd/e2eload -d 60s -rate 2000 -receiver-latency 200ms
//	go run ./devstack/cmd/e2eload -d 30s -rate 5000 -neighbour 4s   # beside a slow endpoint
//	go run ./devstack/cmd/e2eload -d 30s -rate 5000 -neighbour hang # beside a dead one
//
// -receiver-latency makes the receiver answer each webhook that much later, like a real
// endpoint (a serverless function, a queue behind a load balancer); the receiver's peak number
// of requests at once is reported. -neighbour adds a second destination of the same source whose
// endpoint (another port, so another host to the deliverer) answers after that long, or never
// ("hang"): what is measured stays the first one's. -timeline also prints the worst latency of
// each second. The services read their settings from the environment as under make run, e.g.
//
//	DELIVERER_MAX_PER_HOST=8192 go run ./devstack/cmd/e2eload -d 30s -rate 5000 -receiver-latency 1s
//
// -external drives a Tributary running in another process instead (make run, as a user runs
// it), whose config posts to -receiver-addr with write key wk_bench; -pid names that process,
// whose CPU time and peak RSS are then reported (scripts/bench-compare.sh does this with
// MAKE_RUN=1):
//
//	e2eload -external http://127.0.0.1:8080 -receiver-addr 127.0.0.1:18099 -pid $(pgrep -n tributary) -d 20s -rate 30000 -batch 100 -c 8
//
// -otlp-addr runs a small OTLP/HTTP trace receiver there (a collector's stand-in) and reports the
// spans it received, for measuring span export (docs/benchmarks.md#tracing-overhead): point the
// stack's OTEL_EXPORTER_OTLP_ENDPOINT at it.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/tributary-cdp/tributary/devstack"
	"github.com/tributary-cdp/tributary/schemas"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2eload:", err)
		os.Exit(1)
	}
}

// tracker pairs each message's acknowledgement with its webhook.
type tracker struct {
	mu       sync.Mutex
	acked    map[string]time.Time
	received map[string]time.Time
	hist     *hdrhistogram.Histogram // microseconds
	dups     int
	// With -timeline: the worst latency of the webhooks received in each second of the run.
	start  time.Time
	worst  []time.Duration
	onTime []int // webhooks received within 1 s of their acknowledgement, per second
	last   time.Time
}

// record adds one webhook's latency, received at `at`. t.mu is held.
func (t *tracker) record(latency time.Duration, at time.Time) {
	latency = max(0, latency)
	_ = t.hist.RecordValue(latency.Microseconds())
	if t.worst == nil {
		return
	}
	sec := min(len(t.worst)-1, max(0, int(at.Sub(t.start)/time.Second)))
	t.worst[sec] = max(t.worst[sec], latency)
	if latency < time.Second {
		t.onTime[sec]++
	}
	if at.After(t.last) {
		t.last = at
	}
}

func (t *tracker) ack(ids []string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if r, ok := t.received[id]; ok {
			delete(t.received, id)
			t.record(r.Sub(at), r)
			continue
		}
		t.acked[id] = at
	}
}

func (t *tracker) receive(id string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.acked[id]; ok {
		delete(t.acked, id)
		t.record(at.Sub(a), at)
		return
	}
	if _, ok := t.received[id]; ok {
		t.dups++
		return
	}
	t.received[id] = at
}

func run() error {
	dur := flag.Duration("d", 30*time.Second, "how long to send")
	rate := flag.Int("rate", 0, "events per second (0: as fast as the stack takes them)")
	conns := flag.Int("c", 8, "concurrent ingest connections (unpaced mode)")
	batch := flag.Int("batch", 50, "messages per /v1/batch request")
	secret := flag.String("secret", "bench-secret", "the destination's sharedSecret (empty: unsigned)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the load phase to this file")
	heapprofile := flag.String("heapprofile", "", "write a heap profile to this file when the load ends (what is in use under load)")
	blockprofile := flag.String("blockprofile", "", "write a blocking profile of the load phase to this file (where goroutines waited, channel and select included)")
	mutexprofile := flag.String("mutexprofile", "", "write a mutex-contention profile of the load phase to this file")
	goroutines := flag.String("goroutines", "", "write every goroutine's stack to this file when the load ends (what the stack is waiting on)")
	netHTTP := flag.Bool("nethttp-receiver", false, "run the webhook receiver on net/http instead of fasthttp")
	latency := flag.Duration("receiver-latency", 0, "how long the receiver takes to answer each webhook")
	neighbour := flag.String("neighbour", "", `a second destination whose endpoint answers after this long ("4s"), or never ("hang"); "": none`)
	neighbourURL := flag.String("neighbour-url", "", "a second destination posting to this URL, an endpoint in another process (e.g. the demo receiver with RECEIVER_DELAY=4s)")
	tail := flag.Duration("tail", 30*time.Second, "how long to wait, after sending, for the last webhooks")
	throttle := flag.String("throttle", "", `"FROM:FOR" (e.g. "10s:30s"): from FROM into the run, for FOR, the receiver answers 429 with Retry-After: 5, and reports the requests that came during a pause it asked for`)
	timeline := flag.Bool("timeline", false, "also print the worst latency of the webhooks received in each second")
	external := flag.String("external", "", "the ingest base URL of a Tributary running in another process (make run: http://127.0.0.1:8080) instead of the stack in this one; its config must post to -receiver-addr (write key wk_bench, source bench); with -rate, at most -c connections")
	receiverAddr := flag.String("receiver-addr", "127.0.0.1:0", "where the webhook receiver listens")
	otlpAddr := flag.String("otlp-addr", "", `listen for OTLP/HTTP trace exports here ("127.0.0.1:4318") and report the spans received; "": none`)
	pid := flag.Int("pid", 0, "with -external: the process whose CPU time and peak RSS are reported (make run's)")
	flag.Parse()
	var neighbourDelay time.Duration
	switch *neighbour {
	case "":
	case "hang":
		neighbourDelay = time.Hour
	default:
		d, err := time.ParseDuration(*neighbour)
		if err != nil {
			return fmt.Errorf("-neighbour: %w", err)
		}
		neighbourDelay = d
	}

	tr := &tracker{acked: map[string]time.Time{}, received: map[string]time.Time{}, hist: hdrhistogram.New(1, 600_000_000, 3)}
	var receivedN, inFlight, peak, neighbourN atomic.Int64
	// answer counts a request at the receiver while it is being answered, keeping the peak.
	answer := func(id string) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if *latency > 0 {
			time.Sleep(*latency)
		}
		tr.receive(id, time.Now())
		receivedN.Add(1)
		inFlight.Add(-1)
	}
	thr, err := parseThrottle(*throttle)
	if err != nil {
		return err
	}
	var otlp *otlpSink
	if *otlpAddr != "" {
		if otlp, err = startOTLPSink(*otlpAddr); err != nil {
			return err
		}
		defer otlp.close()
	}
	ln, err := net.Listen("tcp", *receiverAddr)
	if err != nil {
		return err
	}
	// The receiver is a fasthttp server: a fast endpoint, so that what is measured is Tributary.
	// -nethttp-receiver uses net/http instead.
	if *netHTTP {
		hook := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			answer(r.Header.Get("X-Message-Id"))
		})}
		go func() { _ = hook.Serve(ln) }()
		defer hook.Close()
	} else {
		hook := &fasthttp.Server{Handler: func(c *fasthttp.RequestCtx) {
			if thr.refuse(time.Now()) {
				c.Response.Header.Set("Retry-After", strconv.Itoa(int(throttlePause/time.Second)))
				c.SetStatusCode(fasthttp.StatusTooManyRequests)
				return
			}
			answer(string(c.Request.Header.Peek("X-Message-Id")))
		}}
		go func() { _ = hook.Serve(ln) }()
		defer func() { _ = hook.Shutdown() }()
	}

	neighbourLine := ""
	if *neighbourURL != "" {
		neighbourLine = `  - {id: neighbour, type: webhooks, sources: [bench], settings: {webhooks: [{url: ` + strconv.Quote(*neighbourURL) + `}]}}
`
	} else if *neighbour != "" {
		nln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		stopNeighbour := make(chan struct{})
		slow := &fasthttp.Server{Handler: func(c *fasthttp.RequestCtx) {
			select {
			case <-time.After(neighbourDelay):
				neighbourN.Add(1)
			case <-stopNeighbour:
			}
		}}
		go func() { _ = slow.Serve(nln) }()
		defer func() {
			close(stopNeighbour) // first: Shutdown waits for the handlers
			_ = slow.Shutdown()
		}()
		neighbourLine = `  - {id: neighbour, type: webhooks, sources: [bench], settings: {webhooks: [{url: "http://` + nln.Addr().String() + `/hook"}]}}
`
	}

	dir, err := os.MkdirTemp("", "e2eload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfgFile := filepath.Join(dir, "config.yaml")
	secretLine := ""
	if *secret != "" {
		secretLine = ", sharedSecret: " + strconv.Quote(*secret)
	}
	if err := os.WriteFile(cfgFile, []byte(`sources: [{id: bench, writeKey: wk_bench}]
destinations:
  - {id: bench-hooks, type: webhooks, sources: [bench], settings: {webhooks: [{url: "http://`+ln.Addr().String()+`/hook"}]`+secretLine+`}}
`+neighbourLine), 0o600); err != nil {
		return err
	}
	var st *devstack.Stack
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := strings.TrimSuffix(*external, "/") + "/v1/batch"
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	if *external != "" {
		if *rate > 0 {
			transport.MaxConnsPerHost = *conns // an outside load tool's connections
		}
		done <- nil
	} else {
		// The services' settings come from the environment, as under make run
		// (DELIVERER_MAX_PER_HOST=8192 e2eload ...); the tool sets only where and what it runs.
		cfg, err := devstack.ConfigFromEnv()
		if err != nil {
			return err
		}
		cfg.DataDir, cfg.EmbeddedPort, cfg.Ingest.Addr, cfg.Audiences.Addr, cfg.ConfigFile = filepath.Join(dir, "data"), 0, "127.0.0.1:0", "127.0.0.1:0", cfgFile
		cfg.Deliverer.AllowPrivate = true
		if st, err = devstack.New(ctx, cfg, zerolog.New(os.Stderr).Level(zerolog.WarnLevel)); err != nil {
			return err
		}
		go func() { done <- st.Run(ctx) }()
		if err := st.WaitReady(ctx); err != nil {
			return err
		}
		url = "http://" + st.IngestAddr() + "/v1/batch"
	}
	client := &http.Client{Transport: transport}

	var seq atomic.Int64
	var sentN, failures atomic.Int64
	send := func() {
		ids := make([]string, *batch)
		var b bytes.Buffer
		now := schemas.FormatTimestamp(time.Now())
		b.WriteString(`{"batch":[`)
		for i := range ids {
			n := seq.Add(1)
			ids[i] = "e2e-" + strconv.FormatInt(n, 10)
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"type":"track","event":"Order Completed","userId":"user-%d","messageId":%q,"timestamp":%q,"properties":{"orderId":"o-%d","total":129.99,"currency":"USD"},"context":{"library":{"name":"e2eload","version":"1"}}}`, n%5000, ids[i], now, n)
		}
		b.WriteString(`]}`)
		req, _ := http.NewRequest(http.MethodPost, url, &b)
		req.SetBasicAuth("wk_bench", "")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			failures.Add(1)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			failures.Add(1)
			return
		}
		tr.ack(ids, time.Now())
		sentN.Add(int64(len(ids)))
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if *blockprofile != "" {
		runtime.SetBlockProfileRate(int(time.Millisecond))
		defer writeProfile("block", *blockprofile, 0)
	}
	if *mutexprofile != "" {
		runtime.SetMutexProfileFraction(10)
		defer writeProfile("mutex", *mutexprofile, 0)
	}
	measured := cpuSeconds
	if *external != "" && *pid > 0 {
		measured = func() float64 { return devstack.ProcessCPUSeconds(*pid) }
	}
	cpu0 := measured()
	start := time.Now()
	thr.begin(start)
	if *timeline {
		tr.mu.Lock()
		n := int((*dur+*tail)/time.Second) + 1
		tr.start, tr.worst, tr.onTime = start, make([]time.Duration, n), make([]int, n)
		tr.mu.Unlock()
	}
	stop := start.Add(*dur)
	var wg sync.WaitGroup
	if *rate > 0 {
		interval := time.Duration(float64(time.Second) * float64(*batch) / float64(*rate))
		tick := time.NewTicker(interval)
		for now := range tick.C {
			if now.After(stop) {
				break
			}
			wg.Add(1)
			go func() { defer wg.Done(); send() }()
		}
		tick.Stop()
	} else {
		for range *conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					send()
				}
			}()
		}
	}
	if *goroutines != "" {
		writeProfile("goroutine", *goroutines, 1)
	}
	wg.Wait()
	if *heapprofile != "" {
		if err := writeHeapProfile(*heapprofile); err != nil {
			return err
		}
	}
	sendTime := time.Since(start)
	// Wait for the tail to arrive (at most -tail).
	deadline := time.Now().Add(*tail)
	for receivedN.Load() < sentN.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	total := time.Since(start)
	cpu := measured() - cpu0
	tr.mu.Lock()
	h := tr.hist
	missing := len(tr.acked)
	dups := tr.dups
	tr.mu.Unlock()
	fmt.Printf("sent %d events in %v (%.0f events/s acknowledged), %d failed requests\n",
		sentN.Load(), sendTime.Round(time.Millisecond), float64(sentN.Load())/sendTime.Seconds(), failures.Load())
	fmt.Printf("received %d webhooks in %v (%.0f webhooks/s), %d not received, %d duplicates\n",
		receivedN.Load(), total.Round(time.Millisecond), float64(receivedN.Load())/total.Seconds(), missing, dups)
	fmt.Printf("ack -> webhook latency: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		float64(h.ValueAtQuantile(50))/1000, float64(h.ValueAtQuantile(90))/1000, float64(h.ValueAtQuantile(99))/1000, float64(h.Max())/1000)
	if *timeline {
		tr.mu.Lock()
		fmt.Print("worst latency per second:")
		for i, w := range tr.worst[:min(len(tr.worst), int(total/time.Second)+1)] {
			fmt.Printf(" %d:%dms", i, w.Milliseconds())
		}
		fmt.Println()
		tr.mu.Unlock()
	}
	if thr != nil {
		fmt.Println(thr.report(tr, *rate))
	}
	fmt.Printf("receiver: peak %d requests at once (latency %v)\n", peak.Load(), *latency)
	if *neighbour != "" {
		fmt.Printf("neighbour (%s): %d webhooks answered\n", *neighbour, neighbourN.Load())
	}
	if otlp != nil {
		fmt.Println(otlp.report())
	}
	rss := peakRSS("self")
	if st != nil {
		fmt.Printf("deliverer: %s\n", tierWrites(st.Registry()))
	} else if *pid > 0 {
		rss = peakRSS(strconv.Itoa(*pid))
	}
	fmt.Printf("process CPU %.1f s (%.2f CPU s per 1,000 webhooks), peak RSS %s\n", cpu, 1000*cpu/float64(max(1, receivedN.Load())), rss)
	cancel()
	<-done
	if st != nil {
		st.Close()
	}
	return nil
}

// throttlePause is the Retry-After of the -throttle receiver's 429s.
const throttlePause = 5 * time.Second

// throttler makes the receiver answer 429 with Retry-After for a while (-throttle), as an
// endpoint's rate limit does, and counts the requests that come while a pause it asked for
// lasts (the requests already under way when its first 429 went out excepted: 200 ms).
type throttler struct {
	from, span time.Duration
	mu         sync.Mutex
	start      time.Time
	pauseEnd   time.Time // the pause the last 429 asked for
	pauseFrom  time.Time
	refused    int
	during     int
}

func parseThrottle(v string) (*throttler, error) {
	if v == "" {
		return nil, nil
	}
	a, b, ok := strings.Cut(v, ":")
	from, err1 := time.ParseDuration(a)
	span, err2 := time.ParseDuration(b)
	if !ok || err1 != nil || err2 != nil || from < 0 || span <= 0 {
		return nil, fmt.Errorf("-throttle %q: want FROM:FOR, e.g. 10s:30s", v)
	}
	return &throttler{from: from, span: span}, nil
}

func (t *throttler) begin(start time.Time) {
	if t != nil {
		t.mu.Lock()
		t.start = start
		t.mu.Unlock()
	}
}

// refuse says whether the request arriving now gets a 429.
func (t *throttler) refuse(now time.Time) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.start.IsZero() {
		return false
	}
	if now.Before(t.pauseEnd) && now.After(t.pauseFrom.Add(200*time.Millisecond)) {
		t.during++
	}
	in := now.Sub(t.start)
	if in < t.from || in >= t.from+t.span {
		return false
	}
	t.refused++
	if !now.Before(t.pauseEnd) { // a new pause starts
		t.pauseFrom, t.pauseEnd = now, now.Add(throttlePause)
	}
	return true
}

// report says how the throttled receiver was treated, when fresh webhooks came on time again
// (the first second after the throttle with 95% of the rate within 1 s; needs -timeline and
// -rate) and when the last one came.
func (t *throttler) report(tr *tracker, rate int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	end := t.from + t.span
	recovered, drained := "(run with -timeline and -rate to see)", ""
	tr.mu.Lock()
	if tr.onTime != nil && rate > 0 {
		recovered = "never"
		for i := int(end / time.Second); i < len(tr.onTime); i++ {
			if float64(tr.onTime[i]) >= 0.95*float64(rate) {
				recovered = fmt.Sprintf("%ds after it ended", i-int(end/time.Second))
				break
			}
		}
		drained = fmt.Sprintf(", the last webhook %v after it ended", tr.last.Sub(tr.start.Add(end)).Round(100*time.Millisecond))
	}
	tr.mu.Unlock()
	return fmt.Sprintf("throttle for %v from %v: %d answered 429 (Retry-After: %d), %d requests came during a pause; 95%% of the rate on time again %s%s",
		t.span, t.from, t.refused, int(throttlePause/time.Second), t.during, recovered, drained)
}

// tierWrites sums the deliverer's hand-offs to the retry tiers (retried: after a failed attempt;
// deferred: unsent, the endpoint at its limit, paused or behind an open breaker) and to the DLQ.
func tierWrites(reg *prometheus.Registry) string {
	sums := map[string]float64{}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			sums[mf.GetName()] += m.GetCounter().GetValue()
		}
	}
	return fmt.Sprintf("%.0f records written to retry tiers (%.0f of them deferred unsent), %.0f dead-lettered",
		sums["tributary_deliverer_retried_total"], sums["tributary_deliverer_deferred_total"], sums["tributary_deliverer_dlq_total"])
}

// writeHeapProfile writes the heap profile, and the goroutine count (stacks are not in it).
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("at the end of the load: %d goroutines, stacks %d MB, heap in use %d MB\n",
		runtime.NumGoroutine(), ms.StackInuse>>20, ms.HeapInuse>>20)
	return pprof.WriteHeapProfile(f)
}

// writeProfile writes the named runtime profile to path (debug as pprof.Profile.WriteTo takes
// it); an error is printed, not returned: a profile is a by-product of the measurement.
func writeProfile(name, path string, debug int) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup(name).WriteTo(f, debug)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2eload: %s profile: %v\n", name, err)
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// peakRSS is the peak resident set of process proc ("self" or a pid), as /proc reports it.
func peakRSS(proc string) string {
	b, _ := os.ReadFile("/proc/" + proc + "/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
