// Package servicetest is the test harness of the services built on platform (ingest, router,
// deliverer, audiences, console) and of devstack: an Env is a fresh embedded broker with every
// default topic, a tenant config applied and a running config store, plus the readers and
// probes service tests share: a topic reader (Reader), a metric reader (Counter), a header
// reader (Header) and a webhook endpoint that records what it receives (Receiver). Every
// package's tests wait with Eventually (poll a condition until a timeout), check that a
// condition stays so with Consistently, and call an HTTP service with Call, Get and Post (and
// WaitReady for its /readyz) rather than a copy of their own.
//
// Everything an Env starts is stopped on t.Cleanup, in reverse order (services, readers, the
// config store, the client, the broker), so a test that uses it leaves no goroutine behind
// (goleak). With Options.Virtual the broker listens on an in-memory network, and the whole Env
// can run inside a testing/synctest bubble: see kafkatest.Virtual. A service's HTTP server then
// listens there too (Env.Listen, platform.HTTPServer's UseListener), and the test calls it
// through the Env's client (Env.Call, Get, Post, WaitReady): a goroutine in real network I/O
// would keep the bubble's clock from moving.
package servicetest

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/schemas"
)

// Options configure New. The zero value is an Env with three partitions per topic, one retry
// tier of 1 s, no tenant config and warn-level logs, on loopback TCP.
type Options struct {
	// Config is a tenant config (YAML) applied before the config store starts; "" applies none.
	Config string
	// RetrySchedule decides the retry tier topics (platform.DefaultTopics); nil: one tier, 1 s.
	RetrySchedule []time.Duration
	// Partitions of every topic but the config topic; 0: 3.
	Partitions int32
	// LogLevel of Env.Logger, which the config store and the clients log to (and services under
	// test should too). zerolog's zero level, DebugLevel, is taken as WarnLevel: debug logs are
	// never wanted in a test's output.
	LogLevel zerolog.Level
	// Virtual runs the broker on kfake's VirtualNetwork (kafkatest.Virtual) instead of loopback
	// TCP, so that a test can run inside a testing/synctest bubble; call New inside it. Every
	// client must then add Env.KafkaOpts; a separate process cannot reach the broker.
	Virtual bool
	// ReadyTimeout bounds the wait for the config store to be ready; 0: 10 s.
	ReadyTimeout time.Duration
	// Closable starts a broker the test can stop while services use it (Env.CloseBroker);
	// it has no effect with Virtual.
	Closable bool
	// ConfigEncryptionKey is Env.Kafka's CONFIG_ENCRYPTION_KEY (the config store's keys);
	// "": none.
	ConfigEncryptionKey string
	// LogWriter also receives every line of Env.Logger (a test that searches the logs).
	LogWriter io.Writer
}

// Env is a broker with every default topic, a tenant config and a running config store. Its
// fields are set by New and not changed after; its methods must be called from the test's
// goroutine (they fail the test with t.Fatal).
type Env struct {
	T testing.TB
	// Ctx is cancelled on cleanup, once everything started with the Env has stopped.
	Ctx context.Context
	// Kafka reaches the broker: Brokers, ReplicationFactor -1 and Options.Partitions.
	Kafka platform.KafkaSettings
	// KafkaOpts must be added to every client of the test, services under test included: the
	// virtual network's dialer with Options.Virtual, nothing otherwise.
	KafkaOpts []kgo.Opt
	// Network is the virtual network with Options.Virtual, else nil.
	Network *kfake.VirtualNetwork
	// Client produces and administers (kadm.NewClient(Client)); it has no consumer options.
	Client *kgo.Client
	// Store is the running config store of schemas.TopicConfig, ready when New returns.
	Store  *platform.ConfigStore
	Logger zerolog.Logger
	// CloseBroker stops the broker (Broker) with Options.Closable, else it is nil. The config
	// store, ready by then, keeps running until cleanup and then stops without error.
	CloseBroker func()

	http     *http.Client
	nextPort int // ports Listen gave for port 0
}

// FirstVirtualPort is the first port Env.Listen gives for port 0 on the virtual network.
const FirstVirtualPort = 10000

// HTTPClient is the client of Env.Call, Get and Post, with a timeout of CallTimeout: with
// Options.Virtual it dials the virtual network (where a service listens on Env.Listen), else
// loopback TCP. Its idle connections are closed on cleanup.
func (e *Env) HTTPClient() *http.Client { return e.http }

// Listen returns a listener on the Env's virtual network (Options.Virtual) at localhost:port,
// for a service's HTTP server inside a testing/synctest bubble (platform.HTTPServer's
// UseListener); the server closes it, else cleanup does. Port 0 is the next port Listen has not
// given yet, from FirstVirtualPort.
func (e *Env) Listen(port int) net.Listener {
	e.T.Helper()
	if e.Network == nil {
		e.T.Fatal("Listen needs an Env with Options.Virtual")
	}
	if port == 0 {
		e.nextPort++
		port = FirstVirtualPort + e.nextPort - 1
	}
	ln, err := e.Network.Listen("tcp", "localhost:"+strconv.Itoa(port))
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { _ = ln.Close() })
	return ln
}

// New starts an Env: the broker, the topics of platform.DefaultTopics, the tenant config
// Options.Config, and the config store, which is ready when New returns.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	if o.Partitions == 0 {
		o.Partitions = 3
	}
	if o.RetrySchedule == nil {
		o.RetrySchedule = []time.Duration{time.Second}
	}
	if o.LogLevel == zerolog.DebugLevel {
		o.LogLevel = zerolog.WarnLevel
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 10 * time.Second
	}
	var w io.Writer = zerolog.NewTestWriter(t)
	if o.LogWriter != nil {
		w = io.MultiWriter(w, o.LogWriter)
	}
	e := &Env{T: t, Logger: zerolog.New(w).Level(o.LogLevel)}
	var brokers []string
	if o.Virtual {
		brokers, e.Network = kafkatest.Virtual(t)
		e.KafkaOpts = []kgo.Opt{kgo.Dialer(e.Network.DialContext)}
	} else if o.Closable {
		brokers, e.CloseBroker = Broker(t)
	} else {
		brokers = kafkatest.Embedded(t)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if e.Network != nil {
		transport.DialContext = e.Network.DialContext
	}
	e.http = &http.Client{Timeout: CallTimeout, Transport: transport}
	t.Cleanup(transport.CloseIdleConnections)
	e.Kafka = platform.KafkaSettings{Brokers: brokers, ReplicationFactor: -1, Partitions: o.Partitions, ConfigEncryptionKey: o.ConfigEncryptionKey}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // after the store and the client below (cleanups run last in, first out)
	e.Ctx = ctx
	e.Client = e.NewClient()
	if err := platform.EnsureTopics(ctx, kadm.NewClient(e.Client), -1, platform.DefaultTopics(o.Partitions, o.RetrySchedule)); err != nil {
		t.Fatalf("creating topics: %v", err)
	}
	if o.Config != "" {
		e.Apply(o.Config)
	}
	store, err := platform.NewConfigStore(e.Kafka, schemas.TopicConfig, e.Logger, e.KafkaOpts...)
	if err != nil {
		t.Fatalf("creating config store: %v", err)
	}
	e.Store = store
	e.Start("config store", store.Run)
	select {
	case <-store.Ready():
	case <-time.After(o.ReadyTimeout):
		t.Fatalf("config store not ready after %v", o.ReadyTimeout)
	}
	return e
}

// NewClient returns a client of the broker with opts (after Env.KafkaOpts), closed on cleanup.
func (e *Env) NewClient(opts ...kgo.Opt) *kgo.Client {
	e.T.Helper()
	cl, err := platform.NewKafkaClient(e.Kafka, e.Logger, append(append([]kgo.Opt(nil), e.KafkaOpts...), opts...)...)
	if err != nil {
		e.T.Fatalf("creating Kafka client: %v", err)
	}
	e.T.Cleanup(cl.Close)
	return cl
}

// Apply upserts a tenant config (YAML) into the config topic (platform.ApplyConfig). It
// returns once the broker has the records; the store sees them a fetch later (Store.WaitFor).
func (e *Env) Apply(yaml string) {
	e.T.Helper()
	cfg, err := schemas.ParseConfig([]byte(yaml), schemas.ConfigFormatYAML)
	if err != nil {
		e.T.Fatalf("parsing config: %v", err)
	}
	if err := platform.ApplyConfig(e.Ctx, e.Client, schemas.TopicConfig, cfg, nil); err != nil {
		e.T.Fatal(err)
	}
}

// Produce produces recs and waits for their acknowledgement.
func (e *Env) Produce(recs ...*kgo.Record) {
	e.T.Helper()
	if err := e.Client.ProduceSync(e.Ctx, recs...).FirstErr(); err != nil {
		e.T.Fatalf("producing: %v", err)
	}
}

// Start runs run in a goroutine until the returned stop is called or the test ends. stop
// cancels run's context and waits for it to return; an error it returns is reported with
// t.Errorf as "name: err". stop may be called more than once, from the test's goroutine.
func (e *Env) Start(name string, run func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.T.Errorf("%s: %v", name, err)
			}
		})
	}
	e.T.Cleanup(stop)
	return stop
}

// PollWait is how long Reader.Poll waits for records when none are there.
const PollWait = 200 * time.Millisecond

// Reader reads one topic from the start, committed records only (read_committed: what a
// consumer of a transactional producer sees; the same as everything for other producers).
// It is not safe for concurrent use.
type Reader struct {
	// Got holds every record read so far, in the order read.
	Got []*kgo.Record
	// Settle is how long WaitFor goes on reading after the n-th record, to catch records that
	// should not be there; 0 returns at once.
	Settle time.Duration

	e     *Env
	cl    *kgo.Client
	topic string
}

// Reader returns a reader of topic; its client is closed on cleanup.
func (e *Env) Reader(topic string) *Reader {
	e.T.Helper()
	cl := e.NewClient(kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond))
	return &Reader{e: e, cl: cl, topic: topic}
}

// Poll reads what is there now, waiting at most PollWait, and returns how many records it read.
func (r *Reader) Poll() int {
	ctx, cancel := context.WithTimeout(r.e.Ctx, PollWait)
	defer cancel()
	n := len(r.Got)
	r.cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) { r.Got = append(r.Got, rec) })
	return len(r.Got) - n
}

// WaitFor reads until at least n records arrived in all, then for Settle more, and returns
// every record read (Got). It fails the test if fewer than n arrived within timeout.
func (r *Reader) WaitFor(n int, timeout time.Duration) []*kgo.Record {
	r.e.T.Helper()
	deadline := time.Now().Add(timeout)
	var settled time.Time
	for {
		if len(r.Got) >= n {
			if settled.IsZero() {
				settled = time.Now().Add(r.Settle)
			}
			if !time.Now().Before(settled) {
				return r.Got
			}
		} else if time.Now().After(deadline) {
			r.e.T.Fatalf("read %d records of %s, want %d", len(r.Got), r.topic, n)
		}
		r.Poll()
	}
}

// Header returns the value of r's first header key, "" when it has none.
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Counter returns the SUM of the counter or gauge series of the metric name whose labels
// include every k, v pair of kv (0 when none match). With the metric's every label named it
// is the one series' value.
func Counter(t testing.TB, g prometheus.Gatherer, name string, kv ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(kv); i += 2 {
				if labels[kv[i]] != kv[i+1] {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				total += c.GetValue()
			} else if gauge := m.GetGauge(); gauge != nil {
				total += gauge.GetValue()
			}
		}
	}
	return total
}
