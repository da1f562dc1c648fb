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
	if err := cmd.Trace("ingest"); err != nil { // OTEL_*: docs/operations.md#tracing
		return err
	}
	cfg, err := ingest.ConfigFromEnv()
	if err != nil {
		return err
	}
	// /metrics on the API (cmd.Deps's Gatherer), or on METRICS_ADDR with the health answers'
	// details (the runners).
	_, runners := cmd.APIMetrics()
	deps := ingest.Deps{
		Deps:        cmd.Deps(),
		Sources:     func() ingest.Sources { return cmd.Store.Snapshot() },
		ConfigReady: cmd.Store.Ready(),
	}
	svc, err := ingest.New(cfg, deps)
	if err != nil {
		return err
	}
	return cmd.Run(append(runners, svc)...)
}
