// Command ingest serves the Segment tracking API and the tracking.inbound Kafka front door.
// Settings come from the environment (docs/ingest.md, docs/operations.md): KAFKA_BROKERS and
// the other KAFKA_* settings, INGEST_ADDR, INGEST_TRUSTED_PROXIES, INGEST_PRODUCE_TIMEOUT,
// LOG_LEVEL.
package main

import (
	"fmt"
	"os"

	"github.com/tributary-cdp/tributary/ingest"
	"github.com/tributary-cdp/tributary/platform"
)

func main() {
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
	svc, err := ingest.New(cfg, ingest.Deps{
		Kafka:      cmd.Kafka,
		Sources:    func() ingest.Sources { return cmd.Store.Snapshot() },
		Logger:     cmd.Logger,
		Registerer: cmd.Registry,
		Gatherer:   cmd.Registry,
		Health:     cmd.Health,
	})
	if err != nil {
		return err
	}
	return cmd.Run(svc)
}
