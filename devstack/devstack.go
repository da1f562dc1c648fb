package devstack

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/embedded"
	"github.com/tributary-cdp/tributary/schemas"
)

// Config holds every run-time setting of design §4, read from the environment by
// LoadConfig. The zero value is not useful; start from LoadConfig or Defaults.
type Config struct {
	// Kafka: an empty Brokers list starts the embedded broker.
	Kafka platform.KafkaSettings
	// EmbeddedPort is the embedded broker's port (EMBEDDED_KAFKA_PORT, default 9092; 0: any
	// free port).
	EmbeddedPort int `env:"EMBEDDED_KAFKA_PORT" envDefault:"9092"`
	// ConfigFile is the tenant config applied (upserted) at start; empty applies nothing.
	ConfigFile string `env:"CONFIG_FILE"`
	// DataDir keeps the embedded broker's files.
	DataDir    string `env:"DATA_DIR" envDefault:".data"`
	IngestAddr string `env:"INGEST_ADDR" envDefault:"127.0.0.1:8080"`
	// ConsoleAddr is where the console listens once it exists.
	ConsoleAddr string `env:"CONSOLE_ADDR" envDefault:"127.0.0.1:8090"`
	// RetrySchedule is the delay before each delivery retry; each distinct delay is a tier.
	RetrySchedule        string        `env:"RETRY_SCHEDULE" envDefault:"10s,1m,5m,15m,30m,1h,1h,1h"`
	RetryWindow          time.Duration `env:"RETRY_WINDOW" envDefault:"4h"`
	DeliveryTimeout      time.Duration `env:"DELIVERY_TIMEOUT" envDefault:"5s"`
	WebhookAllowPrivate  bool          `env:"WEBHOOK_ALLOW_PRIVATE" envDefault:"false"`
	AudienceSyncInterval time.Duration `env:"AUDIENCE_SYNC_INTERVAL" envDefault:"1m"`
	LogLevel             string        `env:"LOG_LEVEL" envDefault:"info"`
}

// Validate reports the first setting that cannot work, naming its variable.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Kafka.Brokers) > 0 { // else the embedded broker starts
		if err := c.Kafka.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := schemas.ParseRetrySchedule(c.RetrySchedule); err != nil {
		errs = append(errs, err)
	}
	if c.RetryWindow <= 0 {
		errs = append(errs, fmt.Errorf("RETRY_WINDOW: must be positive, got %s", c.RetryWindow))
	}
	if c.DeliveryTimeout <= 0 {
		errs = append(errs, fmt.Errorf("DELIVERY_TIMEOUT: must be positive, got %s", c.DeliveryTimeout))
	}
	if c.AudienceSyncInterval <= 0 {
		errs = append(errs, fmt.Errorf("AUDIENCE_SYNC_INTERVAL: must be positive, got %s", c.AudienceSyncInterval))
	}
	if c.EmbeddedPort < 0 || c.EmbeddedPort > 65535 {
		errs = append(errs, fmt.Errorf("EMBEDDED_KAFKA_PORT: %d is not a port", c.EmbeddedPort))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("DATA_DIR: must not be empty"))
	}
	return errors.Join(errs...)
}

// Stack is the whole of Tributary in one process.
type Stack struct {
	cfg    Config
	logger zerolog.Logger
	reg    *prometheus.Registry

	broker  *embedded.Broker
	brokers []string
	store   *platform.ConfigStore
	// ingestAddr is the tracking API's resolved listen address.
	ingestAddr string
	// services run once the config store is ready.
	services []platform.Runner
	closers  []func()
}

// New starts the embedded broker (unless cfg.Kafka.Brokers is set), creates the topics,
// applies cfg.ConfigFile and builds every service. Run starts them; Close releases what New
// started when Run is never called.
func New(ctx context.Context, cfg Config, logger zerolog.Logger) (_ *Stack, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Stack{cfg: cfg, logger: logger, reg: prometheus.NewRegistry()}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	s.brokers = cfg.Kafka.Brokers
	if len(s.brokers) == 0 {
		dir := filepath.Join(cfg.DataDir, "kafka")
		s.broker, err = embedded.Start(embedded.Options{DataDir: dir, Port: cfg.EmbeddedPort, Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("starting the embedded broker: %w", err)
		}
		s.closers = append(s.closers, s.broker.Close)
		s.brokers = s.broker.Addrs()
		s.cfg.Kafka.Brokers = s.brokers
		if s.cfg.Kafka.ReplicationFactor <= 0 {
			s.cfg.Kafka.ReplicationFactor = 1
		}
		logger.Info().Str("kafka", strings.Join(s.brokers, ",")).Str("data_dir", dir).Msg("embedded broker listening")
	}

	admCl, err := platform.NewKafkaClient(s.cfg.Kafka, logger)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, admCl.Close)
	schedule, _ := schemas.ParseRetrySchedule(cfg.RetrySchedule)
	adm := kadm.NewClient(admCl)
	if err := platform.EnsureTopics(ctx, adm, s.cfg.Kafka.ReplicationFactor, platform.DefaultTopics(s.cfg.Kafka.Partitions, schedule)); err != nil {
		return nil, fmt.Errorf("creating topics: %w", err)
	}
	if cfg.ConfigFile != "" {
		if err := platform.ApplyConfigFile(ctx, admCl, schemas.TopicConfig, cfg.ConfigFile); err != nil {
			return nil, fmt.Errorf("applying %s: %w", cfg.ConfigFile, err)
		}
		logger.Info().Str("file", cfg.ConfigFile).Msg("config applied")
	}
	s.store, err = platform.NewConfigStore(s.cfg.Kafka, schemas.TopicConfig, logger.With().Str("service", "config-store").Logger())
	if err != nil {
		return nil, err
	}
	if err := s.addServices(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Brokers are the bootstrap servers the stack uses (the embedded broker's when it started one).
func (s *Stack) Brokers() []string { return s.brokers }

// Registry is the Prometheus registry every service of the stack registers on.
func (s *Stack) Registry() *prometheus.Registry { return s.reg }

// ConfigStore is the materialised tenant config every service of the stack reads.
func (s *Stack) ConfigStore() *platform.ConfigStore { return s.store }

// Run runs the config store and, once it has read the whole config topic, every service,
// until ctx is done or one of them fails; then it stops them all (each service stops
// accepting, finishes in-flight work and commits) and closes the broker. It returns every
// error but context cancellation.
func (s *Stack) Run(ctx context.Context) error {
	defer s.Close()
	services := platform.RunnerFunc(func(ctx context.Context) error {
		select {
		case <-s.store.Ready():
		case <-ctx.Done():
			return nil
		}
		s.logger.Info().Uint64("config_version", s.store.Snapshot().Version()).Msg("config loaded; starting services")
		if len(s.services) == 0 {
			<-ctx.Done()
			return nil
		}
		return platform.RunAll(ctx, s.services...)
	})
	return platform.RunAll(ctx, s.store, services)
}

// Close releases the broker and clients; Run calls it on return.
func (s *Stack) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}
