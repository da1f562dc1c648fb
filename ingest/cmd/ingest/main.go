// Command ingest serves the Segment tracking API and the tracking.inbound Kafka front door.
// Settings come from the environment (docs/ingest.md, docs/operations.md): KAFKA_BROKERS and
// the other KAFKA_* settings, INGEST_ADDR, INGEST_TRUSTED_PROXIES, INGEST_PRODUCE_TIMEOUT,
// LOG_LEVEL.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tributary-cdp/tributary/ingest"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ingest:", err)
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
	cfg, err := ingest.ConfigFromEnv()
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
	svc, err := ingest.New(cfg, ingest.Deps{
		Kafka:      kafka,
		Sources:    func() ingest.Sources { return store.Snapshot() },
		Logger:     logger,
		Registerer: reg,
		Gatherer:   reg,
		Health:     health,
	})
	if err != nil {
		return err
	}
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
	return platform.RunAll(ctx, store, configReady, svc)
}
