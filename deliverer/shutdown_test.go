package deliverer_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// started is a deliverer running in the background with its own Kafka options.
type started struct {
	reg    *prometheus.Registry
	cancel context.CancelFunc // SIGTERM
	done   <-chan error       // Run's result
}

func (h *harness) start(cfg deliverer.Config, opts ...kgo.Opt) *started {
	h.t.Helper()
	svc, reg := h.newDeliverer(cfg, opts...)
	cancel, done := h.env.Go(svc.Run)
	return &started{reg: reg, cancel: cancel, done: done}
}

// waitCounter waits until the metric (summed over the labels kv) reaches want.
func waitCounter(t *testing.T, reg *prometheus.Registry, want float64, timeout time.Duration, name string, kv ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for counter(t, reg, name, kv...) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s %v reached %v, want %v", name, kv, counter(t, reg, name, kv...), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tally counts the 2xx answers a receiver gave, by message id.
type tally struct {
	mu sync.Mutex
	ok map[string]int
}

func (c *tally) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok == nil {
		c.ok = map[string]int{}
	}
	c.ok[id]++
}

func (c *tally) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ok)
}

func (c *tally) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok[id] > 0
}

// Kafka becomes unreachable while a failed delivery is being handed on to its retry tier; the
// deliverer is stopped (SIGTERM): Run returns within SHUTDOWN_TIMEOUT (plus slack for a loaded
// machine), leaving that record uncommitted; the next deliverer delivers every message.
func TestStopWithKafkaUnreachableIsBoundedAndLosesNothing(t *testing.T) {
	t.Parallel() // waits on processes, brokers and timeouts, not the CPU: overlaps with the others
	const n = 20
	var (
		net       servicetest.NetCut
		delivered tally
		once      sync.Once
	)
	rc := newReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		id := r.Header.Get("X-Message-Id")
		first := false
		if id == "m0" {
			once.Do(func() { first = true })
		}
		if first { // m0's first attempt fails, and Kafka is gone before its hand-off
			net.Cut()
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		delivered.add(id)
	})
	h := newHarness(t, "1s,2s", destYAML(dest("hooks", []string{rc.URL}, "")))
	cfg := h.config()
	cfg.InstanceID = "stop-test" // static membership: the next deliverer takes the partitions back at once
	cfg.ShutdownTimeout = 2 * time.Second
	h.send("hooks", messageIDs(0, n)...)

	first := h.start(cfg, kgo.Dialer(net.Dial))
	waitCounter(t, first.reg, 1, 20*time.Second, "tributary_deliverer_retried_total")
	time.Sleep(200 * time.Millisecond) // the hand-off is under way, and cannot reach Kafka
	if delivered.has("m0") {
		t.Fatal("m0 was delivered before the stop")
	}
	const slack = 3 * time.Second
	took, err := servicetest.StopWithin(t, fmt.Sprintf("Run with Kafka unreachable (SHUTDOWN_TIMEOUT %v + %v)", cfg.ShutdownTimeout, slack),
		first.cancel, first.done, cfg.ShutdownTimeout+slack)
	t.Logf("Run returned %v after the stop signal (SHUTDOWN_TIMEOUT %v), Kafka unreachable", took.Round(time.Millisecond), cfg.ShutdownTimeout)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	h.run(cfg) // a new deliverer, Kafka reachable
	deadline := time.Now().Add(30 * time.Second)
	for delivered.distinct() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages delivered after the restart: lost", delivered.distinct(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !delivered.has("m0") {
		t.Fatal("m0, whose hand-off was pending at the stop, was not delivered after the restart")
	}
}

// A hand-off that fails (Kafka unreachable longer than the record's delivery timeout) is
// retried until Kafka acknowledges it; the record then makes its retry as if nothing happened.
func TestHandOffRetriedUntilAcknowledged(t *testing.T) {
	t.Parallel() // waits on processes, brokers and timeouts, not the CPU: overlaps with the others
	var (
		net       servicetest.NetCut
		delivered tally
	)
	rc := newReceiver(t, func(n int, r *http.Request, w http.ResponseWriter) {
		id := r.Header.Get("X-Message-Id")
		if n == 1 { // the first attempt fails, and Kafka is gone for 2.5 s
			net.Cut()
			time.AfterFunc(2500*time.Millisecond, net.Restore)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		delivered.add(id)
	})
	h := newHarness(t, "1s,2s", destYAML(dest("hooks", []string{rc.URL}, "")))
	tier := h.reader(schemas.RetryTopic(time.Second))
	cfg := h.config()
	// A short delivery timeout makes the first produce of the hand-off fail while Kafka is away.
	d := h.start(cfg, kgo.Dialer(net.Dial), kgo.RecordDeliveryTimeout(time.Second)) // stopped on cleanup
	h.send("hooks", "m1")
	waitCounter(t, d.reg, 1, 30*time.Second, "tributary_deliverer_delivered_total")
	r := tier.waitFor(1, 10*time.Second)[0]
	if hdr(r, "attempt") != "2" || hdr(r, "message-id") != "m1" || hdr(r, "last-status") != "503" {
		t.Fatalf("tier record headers %v", r.Headers)
	}
	// The failure, then the retry from the tier. A third may follow: the cut also broke the
	// deliverer's group session, and when it rejoins, the commit of the retry's offset made
	// under the old generation is refused, so the tier record is read and sent again (at least
	// once; receivers drop it by X-Message-Id). What must not happen is fewer than two, or the
	// message in the DLQ.
	if got := len(rc.requests()); got < 2 {
		t.Fatalf("%d requests, want the failure, then the retry from the tier", got)
	}
	dlq := h.reader(schemas.TopicDLQ)
	time.Sleep(time.Second)
	if dlq.poll(); len(dlq.Got) != 0 {
		t.Fatalf("the message was dead-lettered: %v", dlq.Got[0].Headers)
	}
}

// Records waiting for a slot on their host when the stop comes are not started: only the POST
// in progress finishes; no goroutine is left to start one after Run returned (TestMain's
// goleak checks that too), and the waiting records stay uncommitted for the next deliverer.
func TestStopStartsNoQueuedDelivery(t *testing.T) {
	t.Parallel() // waits on processes, brokers and timeouts, not the CPU: overlaps with the others
	var fast atomic.Bool
	arrived := make(chan struct{}, 100)
	rc := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		arrived <- struct{}{}
		if !fast.Load() {
			time.Sleep(500 * time.Millisecond)
		}
	})
	h := newHarness(t, "1s,2s", destYAML(dest("slow", []string{rc.URL}, "")))
	cfg := h.config()
	cfg.MaxPerHost, cfg.MaxWaitingPerHost = 1, 8 // one POST at a time, the others queue
	cfg.ShutdownTimeout = 5 * time.Second
	ids := []string{"m0", "m1", "m2", "m3", "m4"}
	h.send("slow", ids...)
	d := h.start(cfg)
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("no request")
	}
	time.Sleep(100 * time.Millisecond) // the others are read and queued behind it
	took, err := servicetest.StopWithin(t, "Run", d.cancel, d.done, cfg.ShutdownTimeout+3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Run returned %v after the stop", took.Round(time.Millisecond))
	time.Sleep(time.Second) // a POST started late would arrive now
	if n := len(rc.requests()); n != 1 {
		t.Fatalf("%d POSTs, want 1: queued records were started after the stop signal", n)
	}
	fast.Store(true)
	h.run(cfg) // the next deliverer delivers what was queued
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := map[string]bool{}
		for _, r := range rc.requests() {
			got[r.header.Get("X-Message-Id")] = true
		}
		if len(got) == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the records queued at the stop were not all delivered by the next deliverer: got %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDelivererResumesAfterAnOutageLongerThanItsSession: Kafka is unreachable for the deliverer
// longer than its group session (the group is lost, as when the broker is killed and
// restarted), while deliveries keep arriving in webhooks.deliveries. Once it is back, the
// deliverer rejoins and delivers every record — those before, during and after the outage —
// and logs, once, that it resumed (docs/operations.md#broker-outages).
func TestDelivererResumesAfterAnOutageLongerThanItsSession(t *testing.T) {
	t.Parallel() // waits on processes, brokers and timeouts, not the CPU: overlaps with the others
	var (
		net       servicetest.NetCut
		delivered tally
		logs      servicetest.Buffer
	)
	rc := newReceiver(t, func(_ int, r *http.Request, _ http.ResponseWriter) { delivered.add(r.Header.Get("X-Message-Id")) })
	h := newHarness(t, "1s,2s", destYAML(dest("hooks", []string{rc.URL}, "")))
	h.logger = zerolog.New(&logs).Level(zerolog.InfoLevel)
	d := h.start(h.config(), kgo.Dialer(net.Dial), kgo.SessionTimeout(6*time.Second)) // stopped on cleanup
	h.send("hooks", messageIDs(0, 50)...)
	waitCounter(t, d.reg, 50, 30*time.Second, "tributary_deliverer_delivered_total")

	net.Cut()
	h.send("hooks", messageIDs(50, 100)...)
	time.Sleep(10 * time.Second) // past the 6 s session
	net.Restore()
	h.send("hooks", messageIDs(100, 150)...)

	deadline := time.Now().Add(60 * time.Second)
	for delivered.distinct() < 150 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 150 messages delivered 60 s after the outage", delivered.distinct())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "resumed after a Kafka outage"); n != 1 {
		t.Errorf("the deliverer logged %d times that it resumed, want once; its log:\n%s", n, logs.String())
	}
}
