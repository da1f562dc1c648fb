// Command tributary-init prepares a Kafka cluster for Tributary and exits: it creates every
// topic (idempotently, with the partitions of KAFKA_PARTITIONS and one retry tier per distinct
// delay of RETRY_SCHEDULE) and applies the tenant config of CONFIG_FILE to
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
//
// The config is declarative: the file's objects are written with its origin, and the objects
// of that origin the file no longer lists are deleted. `tributary-init validate FILE` checks a
// file without a broker; `diff FILE` prints what applying it would change; `apply FILE`
// applies it (topics must exist) and prints the changes. `reencrypt` writes again, with the
// first key of CONFIG_ENCRYPTION_KEY, every destination whose secrets are still in clear or
// under an older key, whatever manages it (`reencrypt --dry-run` lists them):
// docs/configuration.md#secrets-at-rest.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

func main() {
	platform.PrintVersionIfAsked("tributary-init")
	var err error
	if len(os.Args) > 1 {
		err = configCommand(os.Args[1:], os.Stdout)
	} else {
		err = run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tributary-init:", err)
		os.Exit(1)
	}
}

// usage is the error of a command line tributary-init does not know.
const usage = "usage: tributary-init [validate|diff|apply FILE | reencrypt [--dry-run]] (no argument: create the topics and apply CONFIG_FILE)"

// configCommand runs `tributary-init validate|diff|apply FILE`: validate needs no broker; diff
// prints what applying the file would change; apply applies it and prints what changed
// (docs/configuration.md#declarative-config). `reencrypt [--dry-run]` re-encrypts the config
// (reencrypt).
func configCommand(args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "reencrypt" {
		if len(args) > 2 || (len(args) == 2 && args[1] != "--dry-run") {
			return errors.New(usage)
		}
		return reencrypt(len(args) == 2, out)
	}
	if len(args) != 2 || !slices.Contains([]string{"validate", "diff", "apply"}, args[0]) {
		return errors.New(usage)
	}
	verb, file := args[0], args[1]
	cfg, err := schemas.LoadConfigFile(file)
	if err != nil {
		return err
	}
	if verb == "validate" {
		fmt.Fprintf(out, "%s: valid: %d sources, %d destinations, %d audiences, %d computed traits, %d tracking plans\n", file, len(cfg.Sources), len(cfg.Destinations), len(cfg.Audiences), len(cfg.ComputedTraits), len(cfg.TrackingPlans))
		return nil
	}
	s, logger, ctx, done, err := command()
	if err != nil {
		return err
	}
	defer done()
	changes, err := platform.ApplyConfigFile(ctx, s.Kafka, schemas.TopicConfig, file, platform.ApplyOptions{DryRun: verb == "diff"}, logger)
	if err != nil {
		return err
	}
	for _, c := range changes {
		fmt.Fprintln(out, c.String())
	}
	switch {
	case len(changes) == 0:
		fmt.Fprintf(out, "%s: no changes\n", file)
	case verb == "diff":
		fmt.Fprintf(out, "%s: %d changes to apply (tributary-init apply %s)\n", file, len(changes), file)
	default:
		fmt.Fprintf(out, "%s: %d changes applied\n", file, len(changes))
	}
	return nil
}

// reencrypt runs platform.ReencryptConfig on tributary.config and prints what it changed (or,
// with dryRun, would change).
func reencrypt(dryRun bool, out io.Writer) error {
	s, logger, ctx, done, err := command()
	if err != nil {
		return err
	}
	defer done()
	keys, err := s.Kafka.ConfigKeyring()
	if err != nil {
		return err
	}
	changes, err := platform.ReencryptConfig(ctx, s.Kafka, schemas.TopicConfig, dryRun, logger)
	if err != nil {
		return err
	}
	for _, c := range changes {
		fmt.Fprintln(out, c.String())
	}
	switch {
	case len(changes) == 0:
		fmt.Fprintf(out, "nothing to re-encrypt: every secret is encrypted with key %s\n", keys.KeyIDs()[0])
	case dryRun:
		fmt.Fprintf(out, "%d objects to re-encrypt (tributary-init reencrypt)\n", len(changes))
	default:
		fmt.Fprintf(out, "%d objects re-encrypted with key %s; the records they replace stay in %s until compaction (docs/configuration.md#secrets-at-rest)\n", len(changes), keys.KeyIDs()[0], schemas.TopicConfig)
	}
	return nil
}

// command is what a one-shot verb (apply, diff, reencrypt) needs: the settings, a logger of
// warnings on stderr, and a context ended by a signal or after INIT_TIMEOUT; done releases it.
func command() (s platform.InitSettings, logger zerolog.Logger, ctx context.Context, done func(), err error) {
	if s, err = platform.InitSettingsFromEnv(); err != nil {
		return s, logger, nil, nil, err
	}
	if logger, err = platform.NewLogger("warn", os.Stderr); err != nil {
		return s, logger, nil, nil, err
	}
	ctx, stop := platform.SignalContext(context.Background())
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	return s, logger, ctx, func() { cancel(); stop() }, nil
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
	topics := platform.WithAuditRetention(platform.DefaultTopics(s.Kafka.Partitions, s.RetrySchedule), s.AuditRetention)

	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := platform.EnsureTopics(ctx, adm, s.Kafka.ReplicationFactor, topics)
		if err == nil && s.ConfigFile != "" {
			var changes []platform.ConfigChange
			changes, err = platform.ApplyConfigFile(ctx, s.Kafka, schemas.TopicConfig, s.ConfigFile, platform.ApplyOptions{}, logger)
			for _, c := range changes {
				logger.Info().Str("config_file", s.ConfigFile).Msg("config: " + c.String())
			}
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
