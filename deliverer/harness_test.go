package deliverer_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/schemas"
)

// raceDetector is true under -race (race_test.go). Timing tests skip themselves then:
// scripts/test.sh runs them again without the race detector, which slows the code 5-10x and
// would make them measure the detector.
var raceDetector bool

// skipUnderRace skips a timing test under -race.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceDetector {
		t.Skip("timing test: scripts/test.sh runs it without -race (see TIMING_TESTS there)")
	}
}

// harness: an embedded broker with every topic (for the compressed retry schedule), a tenant
// config and a config store.
type harness struct {
	t        testing.TB
	ctx      context.Context
	kafka    platform.KafkaSettings
	cl       *kgo.Client
	store    *platform.ConfigStore
	logger   zerolog.Logger
	schedule string
}

func newHarness(t testing.TB, schedule string, yaml string) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, schedule: schedule,
		kafka:  platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 3},
		logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)}
	var err error
	if h.cl, err = platform.NewKafkaClient(h.kafka, h.logger); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.cl.Close)
	sched, err := schemas.ParseRetrySchedule(schedule)
	if err != nil {
		t.Fatal(err)
	}
	if err := platform.EnsureTopics(ctx, kadm.NewClient(h.cl), -1, platform.DefaultTopics(3, sched)); err != nil {
		t.Fatal(err)
	}
	h.apply(yaml)
	if h.store, err = platform.NewConfigStore(h.kafka, schemas.TopicConfig, h.logger); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = h.store.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-h.store.Ready()
	return h
}

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

// config returns the deliverer config of the harness, loopback allowed.
func (h *harness) config() deliverer.Config {
	cfg := deliverer.DefaultConfig()
	cfg.RetrySchedule, _ = schemas.ParseRetrySchedule(h.schedule)
	cfg.AllowPrivate = true
	cfg.CommitInterval = 100 * time.Millisecond
	cfg.InstanceID = ""
	return cfg
}

// run runs a deliverer until the test ends (or stop).
func (h *harness) run(cfg deliverer.Config) (*prometheus.Registry, func()) {
	h.t.Helper()
	reg := prometheus.NewRegistry()
	svc, err := deliverer.New(cfg, deliverer.Deps{
		Kafka:       h.kafka,
		Config:      func() deliverer.Destinations { return h.store.Snapshot() },
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
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("deliverer: %v", err)
			}
		})
	}
	h.t.Cleanup(stop)
	return reg, stop
}

// send produces delivery records the way the router does.
func (h *harness) send(destID string, ids ...string) {
	h.t.Helper()
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
	if err := h.cl.ProduceSync(h.ctx, recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

func body(id string) []byte {
	return []byte(`{"version":1,"type":"track","messageId":"` + id + `","userId":"u-` + id + `","event":"Order Completed","properties":{"total":12345678901234567890},"timestamp":"2026-01-02T03:04:05.678Z"}`)
}

// topicReader reads one topic from the start (committed records only).
type topicReader struct {
	h   *harness
	cl  *kgo.Client
	got []*kgo.Record
}

func (h *harness) reader(topic string) *topicReader {
	cl, err := platform.NewKafkaClient(h.kafka, h.logger, kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(cl.Close)
	return &topicReader{h: h, cl: cl}
}

func (r *topicReader) poll() {
	ctx, cancel := context.WithTimeout(r.h.ctx, 100*time.Millisecond)
	defer cancel()
	r.cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) { r.got = append(r.got, rec) })
}

// waitFor reads until n records arrived.
func (r *topicReader) waitFor(n int, timeout time.Duration) []*kgo.Record {
	r.h.t.Helper()
	deadline := time.Now().Add(timeout)
	for len(r.got) < n {
		if time.Now().After(deadline) {
			r.h.t.Fatalf("read %d records, want %d", len(r.got), n)
		}
		r.poll()
	}
	return r.got
}

func hdr(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// receiver is a webhook endpoint that records every request and answers with respond.
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []received
	respond func(n int, r *http.Request, w http.ResponseWriter) // n counts requests from 1
}

type received struct {
	at     time.Time
	header http.Header
	body   []byte
	path   string
}

func newReceiver(t testing.TB, respond func(n int, r *http.Request, w http.ResponseWriter)) *receiver {
	rc := &receiver{respond: respond}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, received{at: time.Now(), header: r.Header.Clone(), body: b, path: r.URL.Path})
	n := len(rc.reqs)
	rc.mu.Unlock()
	if rc.respond != nil {
		rc.respond(n, r, w)
	}
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.reqs...)
}

// waitRequests waits until the receiver has at least n requests.
func (rc *receiver) waitRequests(t testing.TB, n int, timeout time.Duration) []received {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := rc.requests()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver got %d requests, want %d", len(got), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
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

func counter(t testing.TB, reg *prometheus.Registry, name string, kv ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
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
			} else if g := m.GetGauge(); g != nil {
				total += g.GetValue()
			}
		}
	}
	return total
}
