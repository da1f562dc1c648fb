// Command router fans tracking.events out to webhooks.deliveries and turns tracking.deletions
// into delete notices. Settings come from the environment (docs/routing.md,
// docs/operations.md): KAFKA_BROKERS and the other KAFKA_* settings, ROUTER_EXACTLY_ONCE,
// ROUTER_TRANSACTIONAL_ID, ROUTER_TRANSACTION_TIMEOUT, METRICS_ADDR (default 127.0.0.1:9101,
// for /healthz, /readyz and /metrics), LOG_LEVEL.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/router"
	"github.com/tributary-cdp/tributary/schemas"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "router:", err)
		os.Exit(1)
	}
}

func run() error {
	kafka, err := platform.LoadKafkaSettings()
	if err != nil {
		return err
	}
	if err := kafka.Validate(); err != nil {
		return err
	}
	cfg, err := router.ConfigFromEnv()
	if err != nil {
		return err
	}
	logger, err := platform.NewLogger(os.Getenv("LOG_LEVEL"), os.Stderr)
	if err != nil {
		return err
	}
	store, err := platform.NewConfigStore(kafka, schemas.TopicConfig, logger)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	health := platform.NewHealth()
	health.SetReady("config", false)
	svc, err := router.New(cfg, router.Deps{
		Kafka:       kafka,
		Config:      func() router.Snapshot { return store.Snapshot() },
		ConfigReady: store.Ready(),
		Logger:      logger,
		Registerer:  reg,
		Health:      health,
	})
	if err != nil {
		return err
	}
	addr := os.Getenv("METRICS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:9101"
	}
	server := platform.NewHTTPServer(addr, http.NotFoundHandler(), health, reg, logger)
	ctx, stop := platform.SignalContext(context.Background())
	defer stop()
	configReady := platform.RunnerFunc(func(ctx context.Context) error {
		select {
		case <-store.Ready():
			health.SetReady("config", true)
		case <-ctx.Done():
		}
		<-ctx.Done()
		return nil
	})
	return platform.RunAll(ctx, store, configReady, server, svc)
}
