// Command router fans tracking.events out to webhooks.deliveries and turns tracking.deletions
// into delete notices (docs/routing.md). Settings come from the environment:
// platform.NewCommand reads the KAFKA_* and common ones (METRICS_ADDR defaults to
// 127.0.0.1:9101 here), router.ConfigFromEnv the service's; the table of
// docs/configuration.md#run-time-settings lists them all (service "router").
package main

import (
	"fmt"
	"os"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/router"
)

func main() {
	platform.PrintVersionIfAsked("router")
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "router:", err)
		os.Exit(1)
	}
}

func run() error {
	cmd, err := platform.NewCommand()
	if err != nil {
		return err
	}
	if err := cmd.Trace("router"); err != nil { // OTEL_*: docs/operations.md#tracing
		return err
	}
	cfg, err := router.ConfigFromEnv()
	if err != nil {
		return err
	}
	svc, err := router.New(cfg, router.Deps{
		Deps:        cmd.Deps(),
		Config:      func() router.Snapshot { return cmd.Store.Snapshot() },
		ConfigReady: cmd.Store.Ready(),
	})
	if err != nil {
		return err
	}
	return cmd.Run(cmd.MetricsServer("127.0.0.1:9101"), svc)
}
