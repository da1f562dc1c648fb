// Command tributary-init prepares a Kafka cluster for Tributary and exits: it creates every
// topic (idempotently, with the partitions of KAFKA_PARTITIONS and one retry tier per distinct
// delay of RETRY_SCHEDULE) and applies (upserts) the tenant config of CONFIG_FILE to
// tributary.config, its destinations' secrets encrypted when CONFIG_ENCRYPTION_KEY is set. It is the one-shot `init` service of docker-compose.yml and the init Job
// of the Helm chart; `make run` does the same in process (devstack.New).
//
// Settings come from the environment (platform.InitSettingsFromEnv): KAFKA_* (brokers
// required), CONFIG_FILE (empty: topics only), RETRY_SCHEDULE (must be the deliverer's),
// INIT_TIMEOUT, LOG_LEVEL; the table of docs/configuration.md#run-time-settings lists them
// (service "tributary-init").
//
// A config file that does not parse or validate fails at once, before Kafka is contacted;
// Kafka errors are retried every few seconds until INIT_TIMEOUT. It exits 0 when done.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

func main() {
	platform.PrintVersionIfAsked("tributary-init")
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tributary-init:", err)
		os.Exit(1)
	}
}

func run() error {
	s, err := load()
	if err != nil {
		return err
	}
	logger, err := platform.NewLogger(s.LogLevel, os.Stderr)
	if err != nil {
		return err
	}
	logger = logger.With().Str("service", "tributary-init").Logger()
	ctx, stop := platform.SignalContext(context.Background())
	defer stop()
	return initialise(ctx, s, logger)
}

// load reads and validates the settings from the environment; errors name the variable.
func load() (platform.InitSettings, error) {
	s, err := platform.InitSettingsFromEnv()
	errs := []error{err}
	if s.ConfigFile != "" {
		// Parse and validate now: a broken file is not worth retrying.
		if _, err := schemas.LoadConfigFile(s.ConfigFile); err != nil {
			errs = append(errs, fmt.Errorf("CONFIG_FILE: %w", err))
		}
	}
	return s, errors.Join(errs...)
}

// initialise creates the topics and applies the config, retrying Kafka errors until the
// timeout.
func initialise(ctx context.Context, s platform.InitSettings, logger zerolog.Logger) error {
	cl, err := platform.NewKafkaClient(s.Kafka, logger)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics := platform.DefaultTopics(s.Kafka.Partitions, s.RetrySchedule)
	keys, err := s.Kafka.ConfigKeyring()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := platform.EnsureTopics(ctx, adm, s.Kafka.ReplicationFactor, topics)
		if err == nil && s.ConfigFile != "" {
			err = platform.ApplyConfigFile(ctx, cl, schemas.TopicConfig, s.ConfigFile, keys)
		}
		if err == nil {
			ev := logger.Info().Int("topics", len(topics)).Int32("partitions", s.Kafka.Partitions).
				Dur("took", time.Since(start))
			if s.ConfigFile != "" {
				ev = ev.Str("config_file", s.ConfigFile)
			}
			ev.Str("version", platform.Version).Msg("topics ready and config applied")
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("giving up after %d attempts in %s: %w", attempt, time.Since(start).Round(time.Second), err)
		}
		logger.Warn().Err(err).Int("attempt", attempt).Msg("kafka not ready; retrying")
		select {
		case <-ctx.Done():
			return fmt.Errorf("giving up after %d attempts in %s: %w", attempt, time.Since(start).Round(time.Second), err)
		case <-time.After(2 * time.Second):
		}
	}
}
