// Command tributary-init prepares a Kafka cluster for Tributary and exits: it creates every
// topic (idempotently, with the partitions of KAFKA_PARTITIONS and one retry tier per distinct
// delay of RETRY_SCHEDULE) and applies (upserts) the tenant config of CONFIG_FILE to
// tributary.config. It is the one-shot `init` service of docker-compose.yml and the init Job
// of the Helm chart; `make run` does the same in process (devstack.New).
//
// Settings (environment; docs/operations.md):
//
//	KAFKA_BROKERS and the other KAFKA_* settings   the cluster (required)
//	CONFIG_FILE      tenant config to apply (YAML or JSON); empty: topics only
//	RETRY_SCHEDULE   delivery retry delays; must be the deliverer's (default 10s,1m,5m,15m,30m,1h,1h,1h)
//	INIT_TIMEOUT     how long to keep trying while the cluster does not answer (default 5m)
//	LOG_LEVEL        zerolog level (default info)
//
// A config file that does not parse or validate fails at once, before Kafka is contacted;
// Kafka errors are retried every few seconds until INIT_TIMEOUT. It exits 0 when done.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// settings are the command's environment, validated.
type settings struct {
	kafka      platform.KafkaSettings
	configFile string
	schedule   []time.Duration
	timeout    time.Duration
	logLevel   string
}

func main() {
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
	logger, err := platform.NewLogger(s.logLevel, os.Stderr)
	if err != nil {
		return err
	}
	logger = logger.With().Str("service", "tributary-init").Logger()
	ctx, stop := platform.SignalContext(context.Background())
	defer stop()
	return initialise(ctx, s, logger)
}

// load reads and validates the settings from the environment; errors name the variable.
func load() (settings, error) {
	getenv := os.Getenv
	var errs []error
	kafka, err := platform.LoadKafkaSettings()
	if err == nil {
		err = kafka.Validate()
	}
	if err != nil {
		errs = append(errs, err)
	}
	s := settings{kafka: kafka, configFile: strings.TrimSpace(getenv("CONFIG_FILE")), logLevel: getenv("LOG_LEVEL")}
	sched := strings.TrimSpace(getenv("RETRY_SCHEDULE"))
	if sched == "" {
		sched = "10s,1m,5m,15m,30m,1h,1h,1h"
	}
	if s.schedule, err = schemas.ParseRetrySchedule(sched); err != nil {
		errs = append(errs, err)
	}
	s.timeout = 5 * time.Minute
	if v := strings.TrimSpace(getenv("INIT_TIMEOUT")); v != "" {
		if s.timeout, err = time.ParseDuration(v); err != nil || s.timeout <= 0 {
			errs = append(errs, fmt.Errorf("INIT_TIMEOUT: %q is not a positive duration", v))
		}
	}
	if s.configFile != "" {
		// Parse and validate now: a broken file is not worth retrying.
		if _, err := schemas.LoadConfigFile(s.configFile); err != nil {
			errs = append(errs, fmt.Errorf("CONFIG_FILE: %w", err))
		}
	}
	return s, errors.Join(errs...)
}

// initialise creates the topics and applies the config, retrying Kafka errors until the
// timeout.
func initialise(ctx context.Context, s settings, logger zerolog.Logger) error {
	cl, err := platform.NewKafkaClient(s.kafka, logger)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics := platform.DefaultTopics(s.kafka.Partitions, s.schedule)

	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := platform.EnsureTopics(ctx, adm, s.kafka.ReplicationFactor, topics)
		if err == nil && s.configFile != "" {
			err = platform.ApplyConfigFile(ctx, cl, schemas.TopicConfig, s.configFile)
		}
		if err == nil {
			ev := logger.Info().Int("topics", len(topics)).Int32("partitions", s.kafka.Partitions).
				Dur("took", time.Since(start))
			if s.configFile != "" {
				ev = ev.Str("config_file", s.configFile)
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
