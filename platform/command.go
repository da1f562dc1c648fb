package platform

import (
	"context"
	"net/http"
	"os"

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
	health := NewHealth()
	health.SetReady("config", false)
	return &Command{Kafka: kafka, Logger: logger, Store: store, Registry: reg, Health: health}, nil
}

// MetricsServer serves /healthz, /readyz and /metrics (and nothing else) on METRICS_ADDR, or
// on defaultAddr when it is unset: for services that have no HTTP API of their own.
func (c *Command) MetricsServer(defaultAddr string) *HTTPServer {
	addr := os.Getenv("METRICS_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	return NewHTTPServer(addr, http.NotFoundHandler(), c.Health, c.Registry, c.Logger)
}

// Run runs the config store and runners until SIGINT or SIGTERM, and marks the service ready
// once the config is loaded.
func (c *Command) Run(runners ...Runner) error {
	ctx, stop := SignalContext(context.Background())
	defer stop()
	configReady := RunnerFunc(func(ctx context.Context) error {
		select {
		case <-c.Store.Ready():
			c.Health.SetReady("config", true)
		case <-ctx.Done():
		}
		<-ctx.Done()
		return nil
	})
	return RunAll(ctx, append([]Runner{c.Store, configReady}, runners...)...)
}
