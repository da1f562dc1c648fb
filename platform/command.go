package platform

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/schemas"
)

// Command is what every service command (ingest, router, deliverer) builds the same way from
// the environment: the Kafka settings (KAFKA_*), the logger (LOG_LEVEL), the config store of
// tributary.config, a metrics registry with the Go and process collectors, and a Health that
// is not ready until the config store has loaded the config.
type Command struct {
	Kafka    KafkaSettings
	Logger   zerolog.Logger
	Store    *ConfigStore
	Registry *prometheus.Registry
	Health   *Health
	// ShutdownTimeout is how long the services may take to stop after SIGTERM
	// (SHUTDOWN_TIMEOUT, default DefaultShutdownGrace); Run gives up waiting a second later.
	ShutdownTimeout time.Duration
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
	logger, err := NewLogger(os.Getenv("LOG_LEVEL"), os.Stderr)
	if err != nil {
		return nil, err
	}
	store, err := NewConfigStore(kafka, schemas.TopicConfig, logger)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	grace := DefaultShutdownGrace
	if v := os.Getenv("SHUTDOWN_TIMEOUT"); v != "" {
		if grace, err = time.ParseDuration(v); err != nil || grace <= 0 {
			return nil, fmt.Errorf("SHUTDOWN_TIMEOUT: %q is not a positive duration", v)
		}
	}
	health := NewHealth()
	health.SetReady("config", false)
	return &Command{Kafka: kafka, Logger: logger, Store: store, Registry: reg, Health: health, ShutdownTimeout: grace}, nil
}

// MetricsServer serves /healthz, /readyz and /metrics (and nothing else) on METRICS_ADDR, or
// on defaultAddr when it is unset: for services that have no HTTP API of their own.
func (c *Command) MetricsServer(defaultAddr string) *HTTPServer {
	addr := os.Getenv("METRICS_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	srv := NewHTTPServer(addr, http.NotFoundHandler(), c.Health, c.Registry, c.Logger)
	srv.ShutdownTimeout = c.ShutdownTimeout
	return srv
}

// Run runs the config store and runners until SIGINT or SIGTERM, and marks the service ready
// once the config is loaded. After the signal the runners have ShutdownTimeout to stop (each
// bounds its own stop by it); if they have not returned a second after that, Run returns an
// error without waiting longer, so the process exits: what was unfinished was not committed
// and is done again after a restart.
func (c *Command) Run(runners ...Runner) error {
	ctx, stop := SignalContext(context.Background())
	defer stop()
	return RunWithin(ctx, c.ShutdownTimeout+time.Second, append([]Runner{c.configReady()}, runners...)...)
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
