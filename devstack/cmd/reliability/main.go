// Command reliability is the chaos harness of `make reliability` (docs/reliability.md): it runs
// Tributary the way a user who outgrew one machine does — every service its own process from
// bin/, one ingest, two routers, two deliverers, on the embedded broker in its own process
// (or Apache Kafka from deploy/kafka with -apache) — drives it over HTTP with unique message
// ids, injects one fault per scenario, and counts what a recording webhook receiver got. Each
// scenario prints a verdict line; the rule is 0 acknowledged events lost, every webhook
// signed and valid JSON, plus the scenario's own check. It exits 1 if any scenario fails.
//
//	reliability                 # the short version CI runs (about 4 minutes on 2 cores)
//	reliability -full           # longer faults, higher rate (about 20 minutes)
//	reliability -run kill,hostile -keep
//
// "reliability broker -data DIR -port N" is the embedded broker the harness starts as a
// separate process, so that it can be frozen, killed and restarted on its data.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/embedded"
)

type options struct {
	full, apache, keep bool
	bin, root          string
	logLevel           string
	rate               int
	run                []string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "broker" {
		if err := runBroker(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "reliability broker:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	var run string
	flag.BoolVar(&o.full, "full", false, "the full run: longer faults and load (docs/reliability.md's figures)")
	flag.BoolVar(&o.apache, "apache", false, "Apache Kafka from deploy/kafka instead of the embedded broker")
	flag.BoolVar(&o.keep, "keep", false, "keep every scenario's folder (logs, broker data); failed ones are always kept")
	flag.StringVar(&o.bin, "bin", "bin", "the folder of the service binaries (make build)")
	flag.StringVar(&o.logLevel, "log-level", "warn", "LOG_LEVEL of the services (their logs are in each scenario's folder)")
	flag.IntVar(&o.rate, "rate", 0, "events/s of the load (default 300, -full 1000)")
	flag.StringVar(&run, "run", "", "comma-separated scenarios to run (default: all): "+strings.Join(scenarioNames(), ","))
	flag.Parse()
	if o.rate == 0 {
		o.rate = 300
		if o.full {
			o.rate = 1000
		}
	}
	if run != "" {
		o.run = strings.Split(run, ",")
		for _, name := range o.run {
			if !slices.Contains(scenarioNames(), name) {
				fmt.Fprintf(os.Stderr, "reliability: no scenario %q (have %s)\n", name, strings.Join(scenarioNames(), ","))
				os.Exit(2)
			}
		}
	}
	var err error
	if o.root, err = os.Getwd(); err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(1)
	}
	if o.bin, err = filepath.Abs(o.bin); err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(1)
	}
	for _, b := range []string{"ingest", "router", "deliverer", "tributary-init"} {
		if _, err := os.Stat(filepath.Join(o.bin, b)); err != nil {
			fmt.Fprintf(os.Stderr, "reliability: %s: run make build first (%v)\n", b, err)
			os.Exit(1)
		}
	}
	ctx, stop := platform.SignalContext(context.Background())
	defer stop()
	commit := "?" // of the binaries' source, as the run starts
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
	}
	var results []result
	failed := false
	for _, sc := range scenarios(o) {
		if len(o.run) > 0 && !slices.Contains(o.run, sc.name) {
			continue
		}
		r := runScenario(ctx, o, sc)
		fmt.Println(r.line())
		results = append(results, r)
		failed = failed || !r.pass
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Println()
	fmt.Println(table(results, o, commit))
	if failed || ctx.Err() != nil {
		os.Exit(1)
	}
}

func runBroker(args []string) error {
	fs := flag.NewFlagSet("broker", flag.ExitOnError)
	data := fs.String("data", "", "data directory")
	port := fs.Int("port", 0, "port")
	_ = fs.Parse(args)
	b, err := embedded.Start(embedded.Options{DataDir: *data, Port: *port})
	if err != nil {
		return err
	}
	ctx, stop := platform.SignalContext(context.Background())
	defer stop()
	<-ctx.Done()
	b.Close()
	return nil
}

// env is what a scenario's steps work with.
type env struct {
	o     options
	st    *stack
	rcv   *receiver
	load  *loadGen
	notes []string
	ok    bool
	// measured are the receiver paths whose messages count (the healthy destination's).
	measured []string
	// drainFrom is when the fault ended (zero: when the load ended); the drain time is measured
	// from it.
	drainFrom time.Time
}

func (e *env) note(format string, args ...any) {
	e.notes = append(e.notes, fmt.Sprintf(format, args...))
}

// fail marks the scenario failed, with why.
func (e *env) fail(format string, args ...any) {
	e.ok = false
	e.note("FAIL: "+format, args...)
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

type scenario struct {
	name, fault string
	// config returns the tenant config (nil: the default one, one healthy destination).
	config func(rcv *receiver) string
	// during runs while the load runs and returns when the load should stop.
	during func(ctx context.Context, e *env)
	// measured overrides env.measured.
	measured []string
	// maxP99, when set, fails the scenario if the measured deliveries' p99 latency is above it:
	// the legitimate load stayed on time.
	maxP99 time.Duration
}

func scenarioNames() []string {
	var names []string
	for _, s := range scenarios(options{}) {
		names = append(names, s.name)
	}
	return names
}

func defaultConfig(rcv *receiver) string {
	return configWith(rcv, "/healthy", "")
}

// configWith is the harness's tenant config: source "load", destination "healthy" posting to
// path, signed, plus extra destinations.
func configWith(rcv *receiver, path, extra string) string {
	return fmt.Sprintf(`sources:
  - id: load
    name: Load
    writeKey: %s
destinations:
  - id: healthy
    type: webhooks
    sources: [load]
    settings:
      webhooks: [{url: %q}]
      sharedSecret: %s
%s`, writeKey, rcv.url(path), sharedSecret, extra)
}

func scenarios(o options) []scenario {
	// d picks the CI or the full duration.
	d := func(ci, full time.Duration) time.Duration {
		if o.full {
			return full
		}
		return ci
	}
	return []scenario{
		{name: "steady", fault: "none", during: func(ctx context.Context, e *env) {
			sleep(ctx, d(10*time.Second, 60*time.Second))
		}},
		{name: "kill", fault: fmt.Sprintf("SIGKILL of a random service every %s, restarted 1 s later", d(6*time.Second, 20*time.Second)),
			during: func(ctx context.Context, e *env) {
				end := time.Now().Add(d(30*time.Second, 120*time.Second))
				killed := map[string]int{}
				for time.Now().Before(end) && ctx.Err() == nil {
					sleep(ctx, d(6*time.Second, 20*time.Second))
					p := e.st.services[rand.IntN(len(e.st.services))]
					p.kill()
					killed[p.name]++
					sleep(ctx, time.Second)
					if err := p.start(); err != nil {
						e.fail("restarting %s: %v", p.name, err)
						return
					}
				}
				e.note("killed %s", formatCounts(killed))
				e.drainFrom = time.Now()
			}},
		{name: "broker-freeze", fault: fmt.Sprintf("broker SIGSTOP for %s", d(10*time.Second, 30*time.Second)),
			during: func(ctx context.Context, e *env) {
				sleep(ctx, 5*time.Second)
				e.st.broker.freeze()
				sleep(ctx, d(10*time.Second, 30*time.Second))
				e.st.broker.thaw()
				e.drainFrom = time.Now()
				sleep(ctx, d(5*time.Second, 15*time.Second))
				e.checkAlive()
			}},
		{name: "broker-kill", fault: "broker SIGKILL, restarted on its data 3 s later",
			during: func(ctx context.Context, e *env) {
				sleep(ctx, 5*time.Second)
				e.st.broker.kill()
				sleep(ctx, 3*time.Second)
				if err := e.st.broker.restart(ctx); err != nil {
					e.fail("restarting the broker: %v", err)
					return
				}
				e.drainFrom = time.Now()
				sleep(ctx, d(10*time.Second, 30*time.Second))
				e.checkAlive()
			}},
		{name: "receiver-outage", fault: fmt.Sprintf("receiver answers 503 for %s", d(10*time.Second, 2*time.Minute)),
			during: func(ctx context.Context, e *env) {
				sleep(ctx, 5*time.Second)
				e.rcv.setMode(outage)
				sleep(ctx, d(10*time.Second, 2*time.Minute))
				e.rcv.setMode(healthy)
				e.drainFrom = time.Now()
				sleep(ctx, 5*time.Second)
			}},
		{name: "flaky-receiver", fault: "20% of webhooks fail: 500, hang, 502 after 1 s, or reset",
			during: func(ctx context.Context, e *env) {
				e.rcv.setMode(flaky)
				sleep(ctx, d(10*time.Second, 60*time.Second))
				e.rcv.setMode(healthy)
				e.drainFrom = time.Now()
			}},
		{name: "dead-and-slow", fault: "beside the measured destination: one whose endpoint never answers, one that answers in 4 s",
			config: func(rcv *receiver) string {
				return configWith(rcv, "/healthy", fmt.Sprintf(`  - id: dead
    type: webhooks
    sources: [load]
    settings: {webhooks: [{url: %q}], sharedSecret: %s}
  - id: slow
    type: webhooks
    sources: [load]
    settings: {webhooks: [{url: %q}], sharedSecret: %s}
`, rcv.url("/hang"), sharedSecret, rcv.url("/slow"), sharedSecret))
			},
			during: func(ctx context.Context, e *env) { sleep(ctx, d(10*time.Second, 60*time.Second)) }},
		{name: "hostile", fault: "malformed JSON, random bytes, gzip bombs, 600 KB bodies, wrong keys, invalid UTF-8, slow bodies, poison messageIds, a replay by message id repeated",
			maxP99: time.Second,
			config: func(rcv *receiver) string { return withReplays(defaultConfig(rcv), rcv) },
			during: func(ctx context.Context, e *env) {
				a := newAttacker(e.st.ingestURL, e.load)
				p, err := newPoisoner(e.st.ingestURL, e.st.broker.addr(), e.load)
				if err != nil {
					e.fail("poisoner: %v", err)
					return
				}
				defer p.close()
				actx, cancel := context.WithTimeout(ctx, d(10*time.Second, 60*time.Second))
				defer cancel()
				metrics, scraper := e.st.delivererMetrics(), &http.Client{Timeout: 5 * time.Second}
				var wg sync.WaitGroup
				wg.Go(func() { p.run(actx) })
				wg.Go(func() { replayOnce(ctx, e) })
				breakersSeen := 0.0
				wg.Go(func() { // a breaker that opens holds back every legitimate delivery to its host
					for actx.Err() == nil {
						if n, err := sumOver(scraper, metrics, "tributary_deliverer_open_breakers"); err == nil {
							breakersSeen = max(breakersSeen, n)
						}
						sleep(actx, 100*time.Millisecond)
					}
				})
				a.run(actx, int(d(100, 300)))
				wg.Wait()
				s, ok := a.summary()
				e.note("%s", s)
				if !ok {
					e.fail("a hostile request was not refused with a 4xx, or an invalid-UTF-8 event was refused")
				}
				ps, ok := p.summary()
				e.note("%s", ps)
				if !ok {
					e.fail("a poison messageId was not refused (single calls must get 400, batches must reject the poison alone), or a poison record could not be produced to Kafka")
				}
				if got := p.rejectedInbound(ctx, e.st.broker.addr(), p.inbound, 30*time.Second); got < p.inbound {
					e.fail("%d of the %d poison records on tracking.inbound reached tracking.rejected with a messageId reason", got, p.inbound)
				}
				// The poison produced straight to tracking.events: dead-lettered as invalid_request.
				var dead float64
				for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; sleep(ctx, 250*time.Millisecond) {
					if dead, _ = sumOver(scraper, metrics, "tributary_deliverer_dlq_total", `reason="invalid_request"`); dead >= float64(p.events) {
						break
					}
				}
				deferred, err := sumOver(scraper, metrics, "tributary_deliverer_deferred_total", `reason="breaker_open"`)
				e.note("deliverers: %.0f of %d poison deliveries dead-lettered as invalid_request; at most %.0f breakers open at once, %.0f deliveries deferred by an open breaker",
					dead, p.events, breakersSeen, deferred)
				switch {
				case dead < float64(p.events):
					e.fail("the deliverers dead-lettered %.0f of the %d poison deliveries as invalid_request", dead, p.events)
				case err != nil:
					e.fail("reading the deliverers' metrics: %v", err)
				case breakersSeen > 0 || deferred > 0:
					e.fail("a poison messageId opened a breaker: legitimate deliveries were held back")
				}
			}},
		{name: "config-change", fault: "the destination's URL changes from /a to /b during the load",
			config:   func(rcv *receiver) string { return configWith(rcv, "/a", "") },
			measured: []string{"/a", "/b"},
			during: func(ctx context.Context, e *env) {
				sleep(ctx, 5*time.Second)
				if err := e.st.applyConfig(ctx, configWith(e.rcv, "/b", "")); err != nil {
					e.fail("applying the new config: %v", err)
					return
				}
				acked := time.Now()
				sleep(ctx, d(5*time.Second, 30*time.Second))
				last := e.rcv.lastArrival("/a")
				e.note("last webhook to /a %s after the change was acknowledged", last.Sub(acked).Round(time.Millisecond))
				if last.After(acked.Add(time.Second)) {
					e.fail("a webhook reached the old URL more than 1 s after the change")
				}
			}},
	}
}

// checkAlive fails the scenario if a service exited.
func (e *env) checkAlive() {
	for _, p := range e.st.services {
		if !p.alive() {
			e.fail("%s exited (log: %s)", p.name, p.log)
		}
	}
}

type result struct {
	scenario, fault string
	rate            int
	duration        time.Duration
	sent, acked     int
	delivered, lost int
	duplicates      int
	retries, gaveUp int
	p50, p99, max   time.Duration
	drain           time.Duration
	pass            bool
	notes           []string
	statuses        string
	badSig, badBody int
	at              time.Time
	dir             string
}

func runScenario(ctx context.Context, o options, sc scenario) (r result) {
	r = result{scenario: sc.name, fault: sc.fault, rate: o.rate, at: time.Now()}
	dir, err := os.MkdirTemp("", "tributary-reliability-"+sc.name+"-")
	if err != nil {
		r.notes = append(r.notes, err.Error())
		return r
	}
	r.dir = dir
	defer func() {
		if r.pass && !o.keep {
			_ = os.RemoveAll(dir)
		}
	}()
	rcv, err := startReceiver()
	if err != nil {
		r.notes = append(r.notes, err.Error())
		return r
	}
	defer rcv.close()
	config := defaultConfig(rcv)
	if sc.config != nil {
		config = sc.config(rcv)
	}
	st, err := startStack(ctx, o, dir, config)
	if err != nil {
		r.notes = append(r.notes, "starting the stack: "+err.Error())
		return r
	}
	defer st.close()
	e := &env{o: o, st: st, rcv: rcv, ok: true, measured: []string{"/healthy"}}
	if sc.measured != nil {
		e.measured = sc.measured
	}
	if err := warmUp(ctx, e); err != nil {
		r.notes = append(r.notes, err.Error())
		return r
	}

	e.load = newLoad(st.ingestURL, sc.name, o.rate)
	lctx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	start := time.Now()
	go func() { e.load.run(lctx); close(loadDone) }()
	sc.during(ctx, e)
	stopLoad()
	<-loadDone
	r.duration = time.Since(start)
	if e.drainFrom.IsZero() {
		e.drainFrom = time.Now()
	}

	// The drain: until every acknowledged event arrived, or the drain timeout.
	acked := e.load.ackedIDs()
	drainLimit := 90 * time.Second
	if o.full {
		drainLimit = 5 * time.Minute
	}
	deadline := time.Now().Add(drainLimit)
	var got map[string]int
	for {
		got = rcv.counts(e.measured...)
		missing := 0
		for id := range acked {
			if got[id] == 0 {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleep(ctx, 250*time.Millisecond)
	}
	r.drain = time.Since(e.drainFrom)
	sleep(ctx, 2*time.Second) // late duplicates
	got = rcv.counts(e.measured...)
	e.checkAlive()

	r.sent, r.acked = e.load.sent, len(acked)
	e.load.mu.Lock()
	r.retries, r.gaveUp = e.load.retries, e.load.gaveUp
	r.statuses = formatCounts(e.load.statuses)
	e.load.mu.Unlock()
	for id, n := range got {
		if strings.HasPrefix(id, "warmup-") {
			continue
		}
		r.delivered++
		r.duplicates += n - 1
	}
	missing := map[string]struct{}{}
	for id := range acked {
		if got[id] == 0 {
			missing[id] = struct{}{}
		}
	}
	r.lost = len(missing)
	if r.lost > 0 && ctx.Err() == nil {
		r.notes = append(r.notes, postmortem(ctx, st, missing, dir))
	}
	lat := rcv.latencies(e.measured...)
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50, r.p99, r.max = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)], lat[len(lat)-1]
	}
	r.badSig, r.badBody = rcv.bad()
	r.notes = append(r.notes, e.notes...)
	if sc.maxP99 > 0 && r.p99 > sc.maxP99 {
		e.fail("the legitimate load's p99 latency %s is above %s: held back", r.p99.Round(time.Millisecond), sc.maxP99)
		r.notes = append(r.notes, e.notes[len(e.notes)-1])
	}
	r.pass = e.ok && r.lost == 0 && r.acked > 0 && r.badSig == 0 && r.badBody == 0
	if r.badSig > 0 || r.badBody > 0 {
		r.notes = append(r.notes, fmt.Sprintf("FAIL: %d webhooks with a bad signature, %d not valid JSON", r.badSig, r.badBody))
	}
	return r
}

// warmUp waits until the stack is settled: one event made it through (groups joined, config
// read), then ten in a row each arrived within 150 ms — the second router and deliverer have
// joined their groups, and the rebalances that follow are over.
func warmUp(ctx context.Context, e *env) error {
	l := newLoad(e.st.ingestURL, "warmup", 1)
	l.batchSize = 1
	deadline := time.Now().Add(90 * time.Second)
	fast := 0
	for seq := 0; fast < 10; seq++ {
		b := l.build(seq)
		sent := time.Now()
		l.send(b)
		for e.rcv.counts(e.measured...)[b.ids[0]] == 0 {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("warm-up: the stack did not settle within 90 s (logs in %s)", e.st.dir)
			}
			sleep(ctx, 5*time.Millisecond)
		}
		if time.Since(sent) < 150*time.Millisecond {
			fast++
		} else {
			fast = 0
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return nil
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func (r result) line() string {
	verdict := "PASS"
	if !r.pass {
		verdict = "FAIL"
	}
	s := fmt.Sprintf("reliability: %s %s: %d/s for %s; sent %d, acknowledged %d, delivered %d, lost %d, duplicates %d; client retries %d (answers %s), given up %d; latency p50 %s p99 %s max %s; drained %s after the fault",
		verdict, r.scenario, r.rate, r.duration.Round(time.Second), r.sent, r.acked, r.delivered, r.lost, r.duplicates,
		r.retries, r.statuses, r.gaveUp, r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.max.Round(time.Millisecond), r.drain.Round(100*time.Millisecond))
	for _, n := range r.notes {
		s += "\n    " + n
	}
	if !r.pass && r.dir != "" {
		s += "\n    logs and broker data kept in " + r.dir
	}
	return s
}

// table is the results as docs/reliability.md's table.
func table(rs []result, o options, commit string) string {
	broker := "embedded broker (separate process)"
	if o.apache {
		broker = "Apache Kafka (deploy/kafka)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s on %s, commit %s, %s, %d events/s:\n\n", map[bool]string{true: "-full", false: "(CI)"}[o.full],
		time.Now().UTC().Format("2006-01-02"), commit, broker, o.rate)
	b.WriteString("| scenario | fault | load | acknowledged | delivered | lost | duplicates | p99 | drain | verdict |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rs {
		v := "pass"
		if !r.pass {
			v = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %s | %d/s, %s | %d | %d | %d | %d | %s | %s | %s |\n", r.scenario, r.fault, r.rate,
			r.duration.Round(time.Second), r.acked, r.delivered, r.lost, r.duplicates, r.p99.Round(time.Millisecond), r.drain.Round(100*time.Millisecond), v)
	}
	return b.String()
}
