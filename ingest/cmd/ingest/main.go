// Command ingest serves the Segment tracking API and the tracking.inbound Kafka front door
// (docs/ingest.md). Settings come from the environment: platform.NewCommand reads the KAFKA_*
// and common ones, ingest.ConfigFromEnv the service's; the table of
// docs/configuration.md#run-time-settings lists them all (service "ingest").
package main

import (
	"fmt"
	"os"

	"github.com/tributary-cdp/tributary/ingest"
	"github.com/tributary-cdp/tributary/platform"
)

func main() {
	platform.PrintVersionIfAsked("ingest")
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ingest:", err)
		os.Exit(1)
	}
}

func run() error {
	cmd, err := platform.NewCommand()
	if err != nil {
		return err
	}
	cfg, err := ingest.ConfigFromEnv()
	if err != nil {
		return err
	}
	// /metrics on the API, or on METRICS_ADDR with the health answers' details.
	gatherer, runners := cmd.APIMetrics()
	deps := ingest.Deps{
		Kafka:       cmd.Kafka,
		Sources:     func() ingest.Sources { return cmd.Store.Snapshot() },
		ConfigReady: cmd.Store.Ready(),
		Logger:      cmd.Logger,
		Registerer:  cmd.Registry,
		Gatherer:    gatherer,
		Health:      cmd.Health,
	}
	svc, err := ingest.New(cfg, deps)
	if err != nil {
		return err
	}
	return cmd.Run(append(runners, svc)...)
}
