// Command router fans tracking.events out to webhooks.deliveries and turns tracking.deletions
// into delete notices. Settings come from the environment (docs/routing.md,
// docs/operations.md): KAFKA_BROKERS and the other KAFKA_* settings, ROUTER_EXACTLY_ONCE,
// ROUTER_TRANSACTIONAL_ID, ROUTER_TRANSACTION_TIMEOUT, METRICS_ADDR (default 127.0.0.1:9101,
// for /healthz, /readyz and /metrics), LOG_LEVEL.
package main

import (
	"fmt"
	"os"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/router"
)

func main() {
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
	cfg, err := router.ConfigFromEnv()
	if err != nil {
		return err
	}
	svc, err := router.New(cfg, router.Deps{
		Kafka:       cmd.Kafka,
		Config:      func() router.Snapshot { return cmd.Store.Snapshot() },
		ConfigReady: cmd.Store.Ready(),
		Logger:      cmd.Logger,
		Registerer:  cmd.Registry,
		Health:      cmd.Health,
	})
	if err != nil {
		return err
	}
	return cmd.Run(cmd.MetricsServer("127.0.0.1:9101"), svc)
}
