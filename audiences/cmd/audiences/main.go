// Command audiences keeps user profiles, computes traits and audience membership, and sends
// their changes as identify calls (docs/audiences.md). It serves the profile API, /healthz,
// /readyz and /metrics on AUDIENCES_ADDR. Settings come from the environment:
// platform.NewCommand reads the KAFKA_* and common ones, audiences.ConfigFromEnv the
// service's; the table of docs/configuration.md#run-time-settings lists them all (service
// "audiences").
package main

import (
	"fmt"
	"os"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/platform"
)

func main() {
	platform.PrintVersionIfAsked("audiences")
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "audiences:", err)
		os.Exit(1)
	}
}

func run() error {
	cmd, err := platform.NewCommand()
	if err != nil {
		return err
	}
	if err := cmd.Trace("audiences"); err != nil { // OTEL_*: docs/operations.md#tracing
		return err
	}
	cfg, err := audiences.ConfigFromEnv()
	if err != nil {
		return err
	}
	// /metrics on the API (cmd.Deps's Gatherer), or on METRICS_ADDR with the health answers'
	// details (the runners).
	_, runners := cmd.APIMetrics()
	deps := audiences.Deps{
		Deps:        cmd.Deps(),
		Config:      func() audiences.Snapshot { return cmd.Store.Snapshot() },
		ConfigReady: cmd.Store.Ready(),
	}
	svc, err := audiences.New(cfg, deps)
	if err != nil {
		return err
	}
	return cmd.Run(append(runners, svc)...)
}
