// Command console serves Tributary's admin API (docs/console.md): sources, destinations,
// audiences and computed traits over tributary.config, deletion requests, the delivery log,
// the DLQ and the live event debugger, and its web UI, with /healthz and /readyz, on
// CONSOLE_ADDR; /metrics there too, or on METRICS_ADDR when that is set (with /healthz and
// /readyz, which answer with details there), off the port the UI is published on.
// Settings come from the environment: platform.NewCommand reads the KAFKA_* and common ones,
// console.ConfigFromEnv the console's (CONSOLE_TOKEN is required); the table of
// docs/configuration.md#run-time-settings lists them all (service "console").
package main

import (
	"fmt"
	"os"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/platform"
)

func main() {
	platform.PrintVersionIfAsked("console")
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "console:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := console.ConfigFromEnv()
	if err != nil {
		return err
	}
	cmd, err := platform.NewCommand()
	if err != nil {
		return err
	}
	// /metrics on the API (cmd.Deps's Gatherer), or on METRICS_ADDR with the health answers'
	// details (the runners).
	_, runners := cmd.APIMetrics()
	deps := console.Deps{
		Deps:  cmd.Deps(),
		Store: cmd.Store,
	}
	svc, err := console.New(cfg, deps)
	if err != nil {
		return err
	}
	return cmd.Run(append(runners, svc)...)
}
