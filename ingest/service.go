package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// Sources finds a source by the hash of its write key; *platform.Snapshot is one.
type Sources interface {
	SourceByKeyHash(hash string) (*schemas.Source, bool)
}

var _ Sources = (*platform.Snapshot)(nil)

// Deps are the service's dependencies.
type Deps struct {
	// Deps are the dependencies every service shares (docs/architecture.md#how-a-service-is-wired):
	// the Kafka settings and options of the producer and of the front door's consumer, the
	// logger, the metrics' Registerer (nil: a private registry) and Gatherer (served on
	// /metrics beside the tracking API), and the Health that gets a Kafka check and is served
	// on /healthz and /readyz (nil: a new one).
	platform.Deps
	// Sources returns the current config snapshot; it is called once per request.
	Sources func() Sources
	// ConfigReady, when set, is closed once the config is loaded (platform.ConfigStore.Ready).
	// Until then every tracking and settings request is answered 503 config_loading with
	// Retry-After: a write key cannot be told unknown before the config is read, and Segment's
	// clients drop an event on a 4xx but retry a 503.
	ConfigReady <-chan struct{}
	// Keys seals what ingest writes to tracking.events and tracking.rejected with each user's
	// data key (docs/security.md#crypto-shredding); the caller runs it. nil: the service makes
	// its own from Kafka and runs it in Run.
	Keys *shred.Keyring
}

// Service is the ingest service. Create it with New; Handler may serve before Run.
type Service struct {
	cfg      Config
	deps     Deps
	logger   zerolog.Logger
	tracer   *platform.Tracer // nil: no spans (docs/operations.md#tracing)
	producer *kgo.Client
	metrics  *metrics
	server   *platform.HTTPServer
	inFlight chan struct{} // MaxInFlight tokens; nil: no bound
	// bodyKeyInFlight is the smaller pool of requests whose write key is only in the body (it
	// cannot be checked before the body is read); nil: no bound.
	bodyKeyInFlight chan struct{}
	perIP           *ipLimit // MaxInFlightPerIP; nil: no bound
	// perPrivateIP bounds each private or loopback peer without trusted proxies
	// (Config.privatePeerBound); nil: no bound.
	perPrivateIP *ipLimit
	// publicURL is Config.PublicURL parsed; nil: settings name the request's own host.
	publicURL *url.URL
	keys      *shred.Keyring
	ownKeys   bool // keys is the service's own: Run runs it
}

// New builds the service and its Kafka producer (idempotent, acks from all in-sync replicas).
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Sources == nil {
		return nil, errors.New("ingest: Deps.Sources is required")
	}
	if deps.Registerer == nil {
		reg := prometheus.NewRegistry()
		deps.Registerer, deps.Gatherer = reg, reg
	}
	if deps.Health == nil {
		deps.Health = platform.NewHealth()
	}
	s := &Service{cfg: cfg, deps: deps, logger: deps.Logger.With().Str("service", "ingest").Logger(), tracer: deps.Tracer}
	s.publicURL, _ = parsePublicURL(cfg.PublicURL) // validated above
	if cfg.MaxInFlight > 0 {
		s.inFlight = make(chan struct{}, cfg.MaxInFlight)
		s.bodyKeyInFlight = make(chan struct{}, max(1, cfg.MaxInFlight/8))
	}
	if cfg.MaxInFlightPerIP > 0 {
		s.perIP = &ipLimit{max: cfg.MaxInFlightPerIP, n: map[string]int{}}
	}
	if n := cfg.privatePeerBound(); n > 0 {
		s.perPrivateIP = &ipLimit{max: n, n: map[string]int{}}
	}
	var err error
	if s.metrics, err = newMetrics(deps.Registerer); err != nil {
		return nil, err
	}
	if s.keys = deps.Keys; s.keys == nil {
		s.ownKeys = true
		if s.keys, err = shred.New(shred.Config{Kafka: deps.Kafka, Opts: deps.KafkaOpts, Logger: s.logger}); err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
	}
	opts := append([]kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordDeliveryTimeout(cfg.ProduceTimeout),
		kgo.ProducerBatchMaxBytes(1 << 20),
		// One info line when the producer resumed after a Kafka outage (docs/operations.md#broker-outages).
		kgo.WithHooks(platform.NewRecovery(s.logger, "ingest producer").ProducerHook()),
	}, deps.KafkaOpts...)
	if s.producer, err = platform.NewKafkaClient(deps.Kafka, s.logger, opts...); err != nil {
		return nil, fmt.Errorf("ingest producer: %w", err)
	}
	deps.Health.AddCheck("kafka", platform.KafkaCheck(s.producer))
	s.server = platform.NewHTTPServer(cfg.Addr, s.Handler(), deps.Health, deps.Gatherer, s.logger)
	s.server.ShutdownTimeout = cfg.ShutdownTimeout
	if err := s.server.AllowHosts("INGEST_ALLOWED_HOSTS", cfg.AllowedHosts); err != nil {
		return nil, err
	}
	return s, nil
}

// Listen binds the HTTP listener so Addr is known before Run (optional).
func (s *Service) Listen() error { return s.server.Listen() }

// Addr is the HTTP listen address, resolved once listening.
func (s *Service) Addr() string { return s.server.Addr() }

// Run serves HTTP and the tracking.inbound front door until ctx is done, then drains within
// ShutdownTimeout: the HTTP server stops accepting and finishes in-flight requests, the front
// door finishes and commits its batch, and the producer flushes and closes.
func (s *Service) Run(ctx context.Context) error {
	defer s.producer.Close()
	runners := []platform.Runner{s.server}
	if s.ownKeys {
		runners = append(runners, s.keys)
	}
	if !s.cfg.DisableInbound {
		in, err := s.newInbound()
		if err != nil {
			return err
		}
		runners = append(runners, in)
	}
	// The flush's deadline runs from the stop signal, or from a runner's failure.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	fctx, cancel := platform.GraceContext(runCtx, s.cfg.ShutdownTimeout)
	defer cancel()
	s.logger.Info().Str("addr", s.cfg.Addr).Msg("ingest serving")
	err := platform.RunAll(runCtx, runners...)
	stop()
	if ferr := s.producer.Flush(fctx); ferr != nil {
		err = errors.Join(err, fmt.Errorf("flushing the producer: %w", ferr))
	}
	return err
}

// produce writes recs and waits until Kafka acknowledged every one, the first error, or
// INGEST_PRODUCE_TIMEOUT — whichever comes first. The timeout holds even when the broker
// stops answering (frozen, partitioned): records already sent in a request cannot be called
// back, so franz-go's wait for them lasts as long as that request (tens of seconds); the
// request is answered 503 at the timeout instead, and the write, if it lands after all, is a
// duplicate the client's retry makes (at least once; messageId tells them apart).
func (s *Service) produce(ctx context.Context, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ProduceTimeout)
	defer cancel()
	start := time.Now()
	defer func() { s.metrics.produceSeconds.Observe(time.Since(start).Seconds()) }()
	// Each user's records are sealed with the user's data key; a new user's key is written
	// (and acknowledged) first (docs/security.md#crypto-shredding).
	if err := s.keys.SealRecordsInPlace(ctx, recs, shred.RecordKey); err != nil {
		return fmt.Errorf("sealing: %w", err)
	}
	result := make(chan error, 1)
	go func() { result <- platform.ProduceAll(ctx, s.producer, recs) }()
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		select {
		case err := <-result: // acknowledged just as the time ran out
			return err
		default:
		}
		return fmt.Errorf("no acknowledgement from Kafka within %s (INGEST_PRODUCE_TIMEOUT)", s.cfg.ProduceTimeout)
	}
}

type metrics struct {
	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	messages       *prometheus.CounterVec
	inbound        *prometheus.CounterVec
	rejected       *prometheus.CounterVec
	produceSeconds prometheus.Histogram
	inFlight       prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_ingest_requests_total", Help: "HTTP requests by endpoint and status.",
		}, []string{"endpoint", "status"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tributary_ingest_request_seconds", Help: "HTTP request latency, including Kafka's acknowledgement.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"endpoint"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_ingest_messages_total", Help: "Messages over HTTP by outcome (accepted, rejected) and source id.",
		}, []string{"outcome", "source"}),
		inbound: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tributary_ingest_inbound_messages_total", Help: "tracking.inbound records by outcome (accepted, rejected).",
		}, []string{"outcome"}),
	}
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tributary_ingest_rejected_messages_total", Help: "Messages refused (HTTP and tracking.inbound), by reason code (invalid_json, invalid_message, message_too_large, unauthorized).",
	}, []string{"reason"})
	m.produceSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "tributary_ingest_produce_seconds", Help: "From producing a request's records to Kafka's acknowledgement of all of them.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tributary_ingest_in_flight_requests", Help: "Tracking API requests being served (bounded by INGEST_MAX_IN_FLIGHT).",
	})
	for _, c := range []prometheus.Collector{m.requests, m.requestSeconds, m.messages, m.inbound, m.rejected, m.produceSeconds, m.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering ingest metrics: %w", err)
		}
	}
	return m, nil
}
