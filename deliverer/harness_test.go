package deliverer_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// raceDetector is true under -race (race_test.go). Timing tests skip themselves then:
// scripts/test.sh runs them again without the race detector, which slows the code 5-10x and
// would make them measure the detector.
//
// The deliverer's tests cannot run inside a testing/synctest bubble (virtual time, as the
// router's do): the broker could (servicetest.Options.Virtual; Deps.KafkaOpts takes its
// dialer), but the webhooks go over real TCP, and a goroutine in real network I/O (an idle
// keep-alive connection's reader) is never durably blocked, so the bubble's clock would never
// advance. That needs a way for a test to give the deliverer's HTTP transport a dialer (the
// virtual network's, under the address guard), which the deliverer does not have; with it the
// timing tests here (retry punctuality, Retry-After, the waits for a retry that must not
// come) would become exact and fast.
var raceDetector bool

// skipUnderRace skips a timing test under -race.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceDetector {
		t.Skip("timing test: scripts/test.sh runs it without -race (see TIMING_TESTS there)")
	}
}

// harness: an embedded broker with every topic (for the compressed retry schedule), a tenant
// config and a config store: a servicetest.Env under the names the deliverer's tests use.
type harness struct {
	env      *servicetest.Env
	t        testing.TB
	ctx      context.Context
	kafka    platform.KafkaSettings
	cl       *kgo.Client
	store    *platform.ConfigStore
	logger   zerolog.Logger
	schedule string
	// dial, when set, is the deliverers' dialer of webhook endpoints (newVirtualHarness).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func newHarness(t testing.TB, schedule string, yaml string) *harness {
	t.Helper()
	sched, err := schemas.ParseRetrySchedule(schedule)
	if err != nil {
		t.Fatal(err)
	}
	e := servicetest.New(t, servicetest.Options{Config: yaml, RetrySchedule: sched, LogLevel: zerolog.ErrorLevel})
	return &harness{env: e, t: t, ctx: e.Ctx, kafka: e.Kafka, cl: e.Client, store: e.Store, logger: e.Logger, schedule: schedule}
}

// apply upserts a YAML config.
//
//lint:ignore U1000 the harness's API, kept for tests that change the config
func (h *harness) apply(yaml string) {
	h.t.Helper()
	h.env.Apply(yaml)
}

// config returns the deliverer config of the harness, loopback allowed.
func (h *harness) config() deliverer.Config {
	cfg := deliverer.DefaultConfig()
	cfg.RetrySchedule, _ = schemas.ParseRetrySchedule(h.schedule)
	cfg.AllowPrivate = true
	cfg.CommitInterval = 100 * time.Millisecond
	cfg.InstanceID = ""
	return cfg
}

// newDeliverer builds a deliverer of this harness's broker and config store, its clients
// with opts too, and its metrics registry.
func (h *harness) newDeliverer(cfg deliverer.Config, opts ...kgo.Opt) (*deliverer.Service, *prometheus.Registry) {
	h.t.Helper()
	reg := prometheus.NewRegistry()
	svc, err := deliverer.New(cfg, deliverer.Deps{
		Deps: platform.Deps{
			Kafka:      h.kafka,
			KafkaOpts:  append(append([]kgo.Opt(nil), h.env.KafkaOpts...), opts...),
			Logger:     h.logger,
			Registerer: reg,
		}, Config: func() deliverer.Destinations { return h.store.Snapshot() }, ConfigReady: h.store.Ready(),
		DialContext: h.dial,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return svc, reg
}

// run runs a deliverer until the test ends (or stop).
func (h *harness) run(cfg deliverer.Config) (*prometheus.Registry, func()) {
	h.t.Helper()
	svc, reg := h.newDeliverer(cfg)
	return reg, h.env.Start("deliverer", svc.Run)
}

// send produces delivery records the way the router does.
func (h *harness) send(destID string, ids ...string) {
	h.t.Helper()
	h.env.Produce(deliveryRecords(destID, ids...)...)
}

// messageIDs are the message ids "m<i>" for i in [from, to).
func messageIDs(from, to int) []string {
	ids := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		ids = append(ids, "m"+strconv.Itoa(i))
	}
	return ids
}

// deliveryRecords are webhooks.deliveries records as the router writes them, one per id.
func deliveryRecords(destID string, ids ...string) []*kgo.Record {
	var recs []*kgo.Record
	now := schemas.FormatTimestamp(time.Now())
	for _, id := range ids {
		recs = append(recs, &kgo.Record{Topic: schemas.TopicDeliveries, Key: []byte(destID + ":u-" + id),
			Value: body(id),
			Headers: []kgo.RecordHeader{
				{Key: schemas.HeaderDestinationID, Value: []byte(destID)},
				{Key: schemas.HeaderMessageID, Value: []byte(id)},
				{Key: schemas.HeaderAttempt, Value: []byte("1")},
				{Key: schemas.HeaderFirstAttemptAt, Value: []byte(now)},
				{Key: schemas.HeaderType, Value: []byte("track")},
			}})
	}
	return recs
}

func body(id string) []byte {
	return []byte(`{"version":1,"type":"track","messageId":"` + id + `","userId":"u-` + id + `","event":"Order Completed","properties":{"total":12345678901234567890},"timestamp":"2026-01-02T03:04:05.678Z"}`)
}

// topicReader reads one topic from the start (servicetest.Reader: committed records only; the
// deliverer writes no transactions, so that is every record).
type topicReader struct {
	*servicetest.Reader
	t testing.TB
}

func (h *harness) reader(topic string) *topicReader {
	h.t.Helper()
	return &topicReader{Reader: h.env.Reader(topic), t: h.t}
}

// poll reads what is there now.
//
//lint:ignore U1000 the harness's API, kept for tests that read without waiting
func (r *topicReader) poll() { r.Poll() }

// waitFor reads until n records arrived.
func (r *topicReader) waitFor(n int, timeout time.Duration) []*kgo.Record {
	r.t.Helper()
	return r.WaitFor(n, timeout)
}

func hdr(r *kgo.Record, key string) string { return servicetest.Header(r, key) }

// receiver is a webhook endpoint that records every request and answers with respond
// (servicetest.Receiver).
type receiver struct {
	*servicetest.Receiver
}

type received struct {
	at     time.Time
	header http.Header
	body   []byte
	path   string
}

func newReceiver(t testing.TB, respond func(n int, r *http.Request, w http.ResponseWriter)) *receiver {
	return &receiver{servicetest.NewReceiver(t, respond)}
}

func (rc *receiver) requests() []received { return convert(rc.Requests()) }

// waitRequests waits until the receiver has at least n requests.
func (rc *receiver) waitRequests(t testing.TB, n int, timeout time.Duration) []received {
	t.Helper()
	return convert(rc.WaitRequests(t, n, timeout))
}

func convert(reqs []servicetest.Request) []received {
	out := make([]received, len(reqs))
	for i, r := range reqs {
		out[i] = received{at: r.At, header: r.Header, body: r.Body, path: r.Path}
	}
	return out
}

// destYAML is a config with source web and one destination per (id, urls, extra settings).
func destYAML(dests ...string) string {
	return "sources: [{id: web, writeKey: wk}]\ndestinations:\n" + strings.Join(dests, "")
}

func dest(id string, urls []string, extra string) string {
	var hooks []string
	for _, u := range urls {
		hooks = append(hooks, fmt.Sprintf("{url: %q, headers: {X-Team: growth, X-Env: test}}", u))
	}
	return fmt.Sprintf("  - id: %s\n    type: webhooks\n    sources: [web]\n    settings: {webhooks: [%s]%s}\n", id, strings.Join(hooks, ", "), extra)
}

// counter returns the sum of the series of the metric name whose labels include the k, v pairs
// (servicetest.Counter).
func counter(t testing.TB, reg *prometheus.Registry, name string, kv ...string) float64 {
	t.Helper()
	return servicetest.Counter(t, reg, name, kv...)
}
