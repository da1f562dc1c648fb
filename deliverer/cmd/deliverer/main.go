// Command deliverer POSTs webhooks.deliveries to the destinations' URLs, with retry tiers, a
// dead-letter queue and an attempt log (docs/delivery.md). Settings come from the environment:
// platform.NewCommand reads the KAFKA_* and common ones (METRICS_ADDR defaults to
// 127.0.0.1:9102 here), deliverer.ConfigFromEnv the service's; the table of
// docs/configuration.md#run-time-settings lists them all (service "deliverer"). GOMEMLIMIT,
// the Go runtime's, defaults to 160MiB here.
//
// `deliverer replay [-destination ID] [-since RFC3339] [-until RFC3339]` re-enqueues dead
// letters into webhooks.deliveries with a fresh retry window, and prints how many.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

func main() {
	platform.PrintVersionIfAsked("deliverer")
	var err error
	if len(os.Args) > 1 && os.Args[1] == "replay" {
		err = replay(os.Args[2:])
	} else {
		err = serve()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "deliverer:", err)
		os.Exit(1)
	}
}

func settings() (platform.KafkaSettings, error) {
	kafka, err := platform.LoadKafkaSettings()
	if err == nil {
		err = kafka.Validate()
	}
	return kafka, err
}

func replay(args []string) error {
	fs := flag.NewFlagSet("deliverer replay", flag.ContinueOnError)
	dest := fs.String("destination", "", "replay only this destination's dead letters")
	since := fs.String("since", "", "replay only dead letters written at or after this time (RFC 3339)")
	until := fs.String("until", "", "replay only dead letters written at or before this time (RFC 3339)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f := deliverer.ReplayFilter{DestinationID: *dest}
	for _, t := range []struct {
		s   string
		dst *time.Time
	}{{*since, &f.Since}, {*until, &f.Until}} {
		if t.s == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, t.s)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		*t.dst = v
	}
	kafka, err := settings()
	if err != nil {
		return err
	}
	common, err := platform.CommandSettingsFromEnv()
	if err != nil {
		return err
	}
	logger, err := platform.NewLogger(common.LogLevel, os.Stderr)
	if err != nil {
		return err
	}
	ctx, stop := platform.SignalContext(context.Background())
	defer stop()
	n, err := deliverer.Replay(ctx, kafka, logger, schemas.TopicDLQ, schemas.TopicDeliveries, f)
	fmt.Printf("replayed %d dead letters\n", n)
	return err
}

// defaultMemoryLimit is the Go runtime's soft memory limit unless GOMEMLIMIT is set: a burst
// (a backlog handed to the retry tiers) then makes the collector run sooner instead of letting
// the heap double. It is soft: a deliverer that needs more still gets it.
const defaultMemoryLimit = 160 << 20

func serve() error {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	cmd, err := platform.NewCommand()
	if err != nil {
		return err
	}
	cfg, err := deliverer.ConfigFromEnv()
	if err != nil {
		return err
	}
	svc, err := deliverer.New(cfg, deliverer.Deps{
		Kafka:       cmd.Kafka,
		Config:      func() deliverer.Destinations { return cmd.Store.Snapshot() },
		ConfigReady: cmd.Store.Ready(),
		Logger:      cmd.Logger,
		Registerer:  cmd.Registry,
		Health:      cmd.Health,
	})
	if err != nil {
		return err
	}
	return cmd.Run(cmd.MetricsServer("127.0.0.1:9102"), svc)
}
