package router_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/router"
	"github.com/tributary-cdp/tributary/schemas"
)

// harness is an embedded broker with every topic, a tenant config and a config store.
type harness struct {
	t      testing.TB
	ctx    context.Context
	kafka  platform.KafkaSettings
	cl     *kgo.Client
	store  *platform.ConfigStore
	logger zerolog.Logger
}

func newHarness(t testing.TB, yaml string) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, kafka: platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 3},
		logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)}
	var err error
	if h.cl, err = platform.NewKafkaClient(h.kafka, h.logger); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.cl.Close)
	if err := platform.EnsureTopics(ctx, kadm.NewClient(h.cl), -1, platform.DefaultTopics(3, []time.Duration{time.Second})); err != nil {
		t.Fatal(err)
	}
	h.apply(yaml)
	if h.store, err = platform.NewConfigStore(h.kafka, schemas.TopicConfig, h.logger); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = h.store.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-h.store.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("config store not ready")
	}
	return h
}

// apply upserts a YAML config.
func (h *harness) apply(yaml string) {
	h.t.Helper()
	cfg, err := schemas.ParseConfig([]byte(yaml), schemas.ConfigFormatYAML)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := platform.ApplyConfig(h.ctx, h.cl, schemas.TopicConfig, cfg); err != nil {
		h.t.Fatal(err)
	}
}

// runRouter runs a router in this process until the returned stop is called (or the test ends).
func (h *harness) runRouter(mod func(*router.Config)) (reg *prometheus.Registry, stop func()) {
	h.t.Helper()
	cfg := router.DefaultConfig()
	cfg.TransactionalID = fmt.Sprintf("test-router-%d", time.Now().UnixNano())
	if mod != nil {
		mod(&cfg)
	}
	reg = prometheus.NewRegistry()
	svc, err := router.New(cfg, router.Deps{
		Kafka:       h.kafka,
		Config:      func() router.Snapshot { return h.store.Snapshot() },
		ConfigReady: h.store.Ready(),
		Logger:      h.logger,
		Registerer:  reg,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("router: %v", err)
			}
		})
	}
	h.t.Cleanup(stop)
	return reg, stop
}

// event produces one message to tracking.events the way ingest does.
func (h *harness) event(source, msg string) {
	h.t.Helper()
	h.produce(eventRecord(h.t, source, msg))
}

func (h *harness) produce(recs ...*kgo.Record) {
	h.t.Helper()
	if err := h.cl.ProduceSync(h.ctx, recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

func eventRecord(t testing.TB, source, msg string) *kgo.Record {
	t.Helper()
	m, err := schemas.DecodeMessage([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: schemas.TopicEvents, Key: []byte(m.Key()), Value: m.AppendJSON(nil),
		Headers: []kgo.RecordHeader{
			{Key: schemas.HeaderSourceID, Value: []byte(source)},
			{Key: schemas.HeaderMessageID, Value: []byte(m.MessageID)},
			{Key: schemas.HeaderType, Value: []byte(m.Type)},
		}}
}

// deliveries reads webhooks.deliveries (committed records only) from the start.
type deliveries struct {
	h  *harness
	cl *kgo.Client
	// got holds every record read so far.
	got []*kgo.Record
}

func (h *harness) deliveries() *deliveries {
	h.t.Helper()
	cl, err := platform.NewKafkaClient(h.kafka, h.logger,
		kgo.ConsumeTopics(schemas.TopicDeliveries),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(cl.Close)
	return &deliveries{h: h, cl: cl}
}

// poll reads what is there now (waiting at most 200 ms).
func (d *deliveries) poll() {
	ctx, cancel := context.WithTimeout(d.h.ctx, 200*time.Millisecond)
	defer cancel()
	d.cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { d.got = append(d.got, r) })
}

// waitFor reads until at least n records arrived (and then a little longer, to catch extras).
func (d *deliveries) waitFor(n int, timeout time.Duration) []*kgo.Record {
	d.h.t.Helper()
	deadline := time.Now().Add(timeout)
	settle := time.Time{}
	for {
		ctx, cancel := context.WithTimeout(d.h.ctx, 200*time.Millisecond)
		fs := d.cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { d.got = append(d.got, r) })
		now := time.Now()
		if len(d.got) >= n {
			if settle.IsZero() {
				settle = now.Add(500 * time.Millisecond)
			}
			if now.After(settle) {
				return d.got
			}
		}
		if now.After(deadline) {
			d.h.t.Fatalf("read %d deliveries, want %d", len(d.got), n)
		}
	}
}

func hdr(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// counter returns the value of the metric name whose labels include the k, v pairs (0 when
// absent).
func counter(t *testing.T, reg *prometheus.Registry, name string, kv ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
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
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
