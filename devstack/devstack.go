package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/ingest"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/embedded"
	"github.com/tributary-cdp/tributary/router"
	"github.com/tributary-cdp/tributary/schemas"
)

// Config is the configuration of `make run` (cmd/tributary): the settings of every service it
// runs, each read by the service's own ConfigFromEnviron, and its own (the fields tagged env
// here). Start from DefaultConfig; ConfigFromEnv reads the environment
// (docs/configuration.md#run-time-settings).
type Config struct {
	// Kafka: an empty Brokers list starts the embedded broker.
	Kafka platform.KafkaSettings `env:"-"`
	// Ingest, Router, Deliverer and Audiences are the services' own configurations (INGEST_*,
	// ROUTER_*, RETRY_*, DELIVER*, WEBHOOK_*, AUDIENCE*, SHUTDOWN_TIMEOUT); an empty
	// Audiences.Token is generated per DataDir.
	Ingest    ingest.Config    `env:"-"`
	Router    router.Config    `env:"-"`
	Deliverer deliverer.Config `env:"-"`
	Audiences audiences.Config `env:"-"`
	// Console is the console's (CONSOLE_*); an empty Token is generated per DataDir, and an
	// empty AudiencesToken is the audiences service's.
	Console console.Config `env:"-"`
	// EmbeddedPort is the embedded broker's port (EMBEDDED_KAFKA_PORT; 0: any free port).
	EmbeddedPort int `env:"EMBEDDED_KAFKA_PORT" doc:"port of the embedded broker (when 'KAFKA_BROKERS' is empty); 0: any free port"`
	// ConfigFile is the tenant config applied at start, as the whole config: objects of other
	// files go (ApplyOptions.PruneEveryFile); empty applies nothing.
	ConfigFile string `env:"CONFIG_FILE" doc:"tenant config file (YAML or JSON) applied to 'tributary.config' at start: it manages its objects, removing those it no longer lists ([configuration.md](configuration.md#declarative-config)); empty: topics only. 'make run' applies 'deploy/config/dev.yaml' unless it is set, and runs exactly that file's config"`
	// DataDir keeps the embedded broker's files.
	DataDir string `env:"DATA_DIR" doc:"directory of the files of the embedded broker"`
	// LogLevel is the level of the stack's logs (LOG_LEVEL, platform.CommandSettings).
	LogLevel string `env:"LOG_LEVEL"`
	// Tracing is the span export of the services (OTEL_*, docs/operations.md#tracing): each
	// service gets its own Tracer, named '<OTEL_SERVICE_NAME>-<service>' or 'tributary-<service>'.
	Tracing platform.TracingSettings `env:"-"`
}

// Validate returns every setting that cannot work, each naming its variable.
func (c *Config) Validate() error {
	return errors.Join(c.Ingest.Validate(), c.Router.Validate(), c.Deliverer.Validate(), c.audiencesToValidate().Validate(),
		c.consoleToValidate().Validate(), c.validateOwn())
}

// consoleToValidate is the console's config as New gives it: an empty Token stands for the one
// generated per DataDir (consoleToken).
func (c *Config) consoleToValidate() *console.Config {
	con := c.Console
	if con.Token == "" {
		con.Token = "generated-at-start-per-data-dir"
	}
	return &con
}

// audiencesToValidate is the audiences service's config as New gives it: an empty Token stands
// for the one generated per DataDir (audiencesToken).
func (c *Config) audiencesToValidate() *audiences.Config {
	aud := c.Audiences
	if aud.Token == "" {
		aud.Token = "generated-at-start-per-data-dir"
	}
	return &aud
}

// validateOwn checks the settings that Config does not hand to a service's Validate.
func (c *Config) validateOwn() error {
	var errs []error
	if len(c.Kafka.Brokers) > 0 { // else the embedded broker starts
		if err := c.Kafka.Validate(); err != nil {
			errs = append(errs, err)
		}
	} else if _, err := c.Kafka.ConfigKeyring(); err != nil { // used on the embedded broker too
		errs = append(errs, err)
	}
	if _, err := platform.NewLogger(c.LogLevel, io.Discard); err != nil {
		errs = append(errs, err)
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
	// ingestAddr is the tracking API's resolved listen address; audiencesAddr the profile
	// API's, consoleAddr the console's.
	ingestAddr, audiencesAddr, consoleAddr string
	// consoleToken is the console's bearer token; consoleTokenGenerated says make run made it.
	consoleToken          string
	consoleTokenGenerated bool
	// audiencesToken is the profile API's bearer token (AUDIENCES_TOKEN, or generated).
	audiencesToken string
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
		// One stack per data folder: a second one would write into the first one's broker
		// files.
		release, err := lockDataDir(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		s.closers = append(s.closers, release)
		dir := filepath.Join(cfg.DataDir, "kafka")
		buildAs(ctx, "broker")
		s.broker, err = embedded.Start(embedded.Options{DataDir: dir, Port: cfg.EmbeddedPort, Logger: logger})
		endBuild(ctx)
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
	adm := kadm.NewClient(admCl)
	topics := platform.DefaultTopics(s.cfg.Kafka.Partitions, cfg.Deliverer.RetrySchedule)
	if err := platform.EnsureTopics(ctx, adm, s.cfg.Kafka.ReplicationFactor, topics); err != nil {
		return nil, fmt.Errorf("creating topics: %w", err)
	}
	if cfg.ConfigFile != "" {
		// The file is the whole config of `make run`: objects of another file (the demo config
		// of an earlier run) go; the console's stay.
		changes, err := platform.ApplyConfigFile(ctx, s.cfg.Kafka, schemas.TopicConfig, cfg.ConfigFile,
			platform.ApplyOptions{PruneEveryFile: true}, logger)
		if err != nil {
			return nil, fmt.Errorf("CONFIG_FILE: %w", err) // the error names the file once
		}
		logger.Info().Str("file", cfg.ConfigFile).Int("changes", len(changes)).Msg("config applied")
	}
	buildAs(ctx, "config")
	s.store, err = platform.NewConfigStore(s.cfg.Kafka, schemas.TopicConfig, logger.With().Str("service", "config-store").Logger())
	if err != nil {
		return nil, err
	}
	endBuild(ctx)
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
	return platform.RunAll(ctx, labelled{"config", s.store}, services)
}

// Close releases the broker and clients; Run calls it on return.
func (s *Stack) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}
