package router_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/router"
	"github.com/tributary-cdp/tributary/schemas"
)

// harness is an embedded broker with every topic, a tenant config and a config store: a
// servicetest.Env under the names the router's tests use.
type harness struct {
	env    *servicetest.Env
	t      testing.TB
	ctx    context.Context
	kafka  platform.KafkaSettings
	cl     *kgo.Client
	store  *platform.ConfigStore
	logger zerolog.Logger
}

func newHarness(t testing.TB, yaml string) *harness {
	t.Helper()
	return wrap(servicetest.New(t, servicetest.Options{Config: yaml}))
}

// newVirtualHarness is newHarness on kfake's virtual network, for a test inside a
// testing/synctest bubble (synctest.Test): every wait of the test, the router's and the
// broker's is then on the bubble's fake clock. A separate process cannot reach its broker.
func newVirtualHarness(t *testing.T, yaml string) *harness {
	t.Helper()
	return wrap(servicetest.New(t, servicetest.Options{Config: yaml, Virtual: true}))
}

func wrap(e *servicetest.Env) *harness {
	return &harness{env: e, t: e.T, ctx: e.Ctx, kafka: e.Kafka, cl: e.Client, store: e.Store, logger: e.Logger}
}

// apply upserts a YAML config.
func (h *harness) apply(yaml string) {
	h.t.Helper()
	h.env.Apply(yaml)
}

// newRouter builds a router of this harness's broker and config store, with the test's
// transactional id unless mod sets one, and its metrics registry.
func (h *harness) newRouter(mod func(*router.Config)) (*router.Service, *prometheus.Registry) {
	h.t.Helper()
	cfg := router.DefaultConfig()
	cfg.TransactionalID = fmt.Sprintf("test-router-%d", time.Now().UnixNano())
	if mod != nil {
		mod(&cfg)
	}
	reg := prometheus.NewRegistry()
	svc, err := router.New(cfg, router.Deps{
		Deps: platform.Deps{
			Kafka:      h.kafka,
			KafkaOpts:  h.env.KafkaOpts,
			Logger:     h.logger,
			Registerer: reg,
		},
		Config: func() router.Snapshot { return h.store.Snapshot() }, ConfigReady: h.store.Ready(),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return svc, reg
}

// runRouter runs a router in this process until the returned stop is called (or the test ends).
func (h *harness) runRouter(mod func(*router.Config)) (reg *prometheus.Registry, stop func()) {
	h.t.Helper()
	svc, reg := h.newRouter(mod)
	return reg, h.env.Start("router", svc.Run)
}

// event produces one message to tracking.events the way ingest does.
func (h *harness) event(source, msg string) {
	h.t.Helper()
	h.produce(eventRecord(h.t, source, msg))
}

func (h *harness) produce(recs ...*kgo.Record) {
	h.t.Helper()
	h.env.Produce(recs...)
}

// eventRecord is a tracking.events record the way ingest writes it (servicetest.EventRecord).
func eventRecord(t testing.TB, source, msg string) *kgo.Record {
	t.Helper()
	return servicetest.EventRecord(t, source, msg)
}

// deliveries reads webhooks.deliveries (committed records only) from the start.
type deliveries struct {
	t testing.TB
	r *servicetest.Reader
	// got holds every record read so far.
	got []*kgo.Record
}

// settle is how long waitFor reads on after the records it waits for, to catch extras.
const settle = 500 * time.Millisecond

func (h *harness) deliveries() *deliveries {
	h.t.Helper()
	r := h.env.Reader(schemas.TopicDeliveries)
	r.Settle = settle
	return &deliveries{t: h.t, r: r}
}

// poll reads what is there now (waiting at most 200 ms).
func (d *deliveries) poll() {
	d.r.Poll()
	d.got = d.r.Got
}

// waitFor reads until at least n records arrived (and then a little longer, to catch extras).
func (d *deliveries) waitFor(n int, timeout time.Duration) []*kgo.Record {
	d.t.Helper()
	d.r.Got = d.got
	d.got = d.r.WaitFor(n, timeout)
	return d.got
}

func hdr(r *kgo.Record, key string) string { return servicetest.Header(r, key) }

// counter returns the value of the metric name whose labels include the k, v pairs (0 when
// absent): the sum of the matching series (servicetest.Counter); every call in this package
// names labels that match one series.
func counter(t *testing.T, reg *prometheus.Registry, name string, kv ...string) float64 {
	t.Helper()
	return servicetest.Counter(t, reg, name, kv...)
}
