package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/schemas"
)

// CommandSettings are the settings every service command reads beside its own Config and
// KafkaSettings (docs/configuration.md#run-time-settings). Start from DefaultCommandSettings.
type CommandSettings struct {
	// LogLevel is the zerolog level of the logs (LOG_LEVEL).
	LogLevel string `env:"LOG_LEVEL" doc:"'trace', 'debug', 'info', 'warn', 'error' or 'disabled'; JSON lines on stderr, pretty on a terminal"`
	// MetricsAddr is where a service serves /healthz, /readyz and /metrics apart from its
	// public HTTP port, or at all when it has none (METRICS_ADDR); empty: the service's default
	// (MetricsServer).
	MetricsAddr string `env:"METRICS_ADDR" services:"ingest, router, deliverer, audiences, console" docDefault:"ingest, audiences and console unset, router '127.0.0.1:9101', deliverer '127.0.0.1:9102'" doc:"listen address of '/healthz', '/readyz' and '/metrics'; ingest, audiences and console: unset serves them on 'INGEST_ADDR', 'AUDIENCES_ADDR' or 'CONSOLE_ADDR', set moves '/metrics' off the public port (the ingest image sets '0.0.0.0:9100', the chart too for ingest and the console)"`
	// ShutdownTimeout is how long the services may take to stop after SIGTERM
	// (SHUTDOWN_TIMEOUT); each service bounds its own stop by it.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" doc:"how long a service may take to stop after SIGTERM: work in progress finishes and is committed; what is left is done again after a restart"`
}

// DefaultCommandSettings returns the defaults: level info, each service's own metrics
// address, DefaultShutdownGrace.
func DefaultCommandSettings() CommandSettings {
	return CommandSettings{LogLevel: "info", ShutdownTimeout: DefaultShutdownGrace}
}

// CommandSettingsFromEnv returns DefaultCommandSettings with the process environment applied
// (FromEnv), validated: the error lists every variable that does not parse or cannot work.
func CommandSettingsFromEnv() (CommandSettings, error) { return CommandSettingsFromEnviron(nil) }

// CommandSettingsFromEnviron is CommandSettingsFromEnv reading environ instead of the process
// environment (nil: the process environment).
func CommandSettingsFromEnviron(environ map[string]string) (CommandSettings, error) {
	return LoadSettings(DefaultCommandSettings(), environ)
}

// Validate returns every unusable setting, each naming its variable.
func (s CommandSettings) Validate() error {
	var errs []error
	if _, err := NewLogger(s.LogLevel, io.Discard); err != nil {
		errs = append(errs, err)
	}
	if s.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT: must be positive, got %s", s.ShutdownTimeout))
	}
	return errors.Join(errs...)
}

// Command is what every service command (ingest, router, deliverer, audiences, console)
// builds the same way from the environment: the Kafka settings (KAFKA_*), the
// CommandSettings (LOG_LEVEL, METRICS_ADDR, SHUTDOWN_TIMEOUT), the logger, the config store
// of tributary.config, a metrics registry with the Go and process collectors, and a Health
// that is not ready until the config store has loaded the config.
type Command struct {
	Kafka    KafkaSettings
	Settings CommandSettings
	Logger   zerolog.Logger
	Store    *ConfigStore
	Registry *prometheus.Registry
	Health   *Health
	// ShutdownTimeout is how long the services may take to stop after SIGTERM
	// (Settings.ShutdownTimeout); Run gives up waiting a second later.
	ShutdownTimeout time.Duration

	tracer *Tracer // set by Trace
}

// Trace reads the OTEL_* variables (TracingSettings) and, when they enable span export, gives
// the service named service (ingest, router...) a Tracer: Deps then carries it, and Run exports
// its last spans as the process stops. Without an endpoint it does nothing (the trace context
// is passed on all the same: docs/operations.md#tracing).
func (c *Command) Trace(service string) error {
	s, err := TracingSettingsFromEnviron(nil)
	if err != nil {
		return err
	}
	name := s.ServiceName
	if name == "" {
		name = DefaultServiceName(service)
	}
	c.tracer, err = NewTracer(s, name)
	if c.tracer != nil {
		LogTracingErrors(c.Logger)
		c.Logger.Info().Str("service_name", name).Str("sampler", s.Sampler).Msg("exporting spans over OTLP")
	}
	return err
}

// NewCommand reads the environment and builds the parts; errors name the variable at fault.
func NewCommand() (*Command, error) {
	kafka, err := LoadKafkaSettings()
	if err != nil {
		return nil, err
	}
	if err := kafka.Validate(); err != nil {
		return nil, err
	}
	settings, err := CommandSettingsFromEnv()
	if err != nil {
		return nil, err
	}
	logger, err := NewLogger(settings.LogLevel, os.Stderr)
	if err != nil {
		return nil, err
	}
	store, err := NewConfigStore(kafka, schemas.TopicConfig, logger)
	if err != nil {
		return nil, err
	}
	logger.Info().Str("version", Version).Str("go", runtime.Version()).Msg("starting")
	applyMemoryLimit(logger, memlimit.FromCgroup)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	health := NewHealth()
	health.SetReady("config", false)
	reg.MustRegister(ReadyGauge(health))
	return &Command{Kafka: kafka, Settings: settings, Logger: logger, Store: store, Registry: reg, Health: health,
		ShutdownTimeout: settings.ShutdownTimeout}, nil
}

// MetricsServer serves /healthz, /readyz and /metrics (and nothing else) on METRICS_ADDR, or
// on defaultAddr when it is unset: for services that have no HTTP API of their own.
func (c *Command) MetricsServer(defaultAddr string) *HTTPServer {
	addr := c.Settings.MetricsAddr
	if addr == "" {
		addr = defaultAddr
	}
	srv := NewHTTPServer(addr, nil, c.Health, c.Registry, c.Logger)
	srv.ShutdownTimeout = c.ShutdownTimeout
	return srv
}

// APIMetrics places /metrics for a service with an HTTP API of its own: on that API (the
// gatherer to give it, with no runner) unless METRICS_ADDR is set; then /healthz, /readyz (with
// details) and /metrics are served on METRICS_ADDR by the runner returned, and the API gets no
// gatherer, so that its public port does not show the metrics.
func (c *Command) APIMetrics() (prometheus.Gatherer, []Runner) {
	if c.Settings.MetricsAddr != "" {
		return nil, []Runner{c.MetricsServer("")} // a server built, not yet listening
	}
	return c.Registry, nil
}

// Run runs the config store and runners until SIGINT or SIGTERM, and marks the service ready
// once the config is loaded. After the signal the runners have ShutdownTimeout to stop (each
// bounds its own stop by it); if they have not returned a second after that, Run returns an
// error without waiting longer, so the process exits: what was unfinished was not committed
// and is done again after a restart.
func (c *Command) Run(runners ...Runner) error {
	ctx, stop := SignalContext(context.Background())
	defer stop()
	first := []Runner{c.configReady()}
	if c.tracer != nil {
		first = append(first, c.tracer)
	}
	return RunWithin(ctx, c.ShutdownTimeout+time.Second, append(first, runners...)...)
}

// configReady runs the config store and marks the service ready once the config is loaded.
func (c *Command) configReady() Runner {
	configReady := RunnerFunc(func(ctx context.Context) error {
		select {
		case <-c.Store.Ready():
			c.Health.SetReady("config", true)
		case <-ctx.Done():
		}
		<-ctx.Done()
		return nil
	})
	return RunnerFunc(func(ctx context.Context) error { return RunAll(ctx, c.Store, configReady) })
}
