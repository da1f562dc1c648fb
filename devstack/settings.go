package devstack

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/ingest"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/router"
)

// DefaultConfig is the configuration with no variable set: the defaults of every service,
// the embedded broker on port 9092 with its files in .data.
func DefaultConfig() Config {
	return Config{
		Kafka:                platform.DefaultKafkaSettings(),
		Ingest:               ingest.DefaultConfig(),
		Router:               router.DefaultConfig(),
		Deliverer:            deliverer.DefaultConfig(),
		EmbeddedPort:         9092,
		DataDir:              ".data",
		ConsoleAddr:          "127.0.0.1:8090",
		AudienceSyncInterval: time.Minute,
		LogLevel:             platform.DefaultCommandSettings().LogLevel,
	}
}

// ConfigFromEnv returns DefaultConfig with the process environment applied, validated: each
// service's settings as its own ConfigFromEnv reads them, the KAFKA_* settings, and those of
// Config itself (platform.FromEnv: an unset or empty variable keeps the default).
func ConfigFromEnv() (Config, error) { return ConfigFromEnviron(nil) }

// ConfigFromEnviron is ConfigFromEnv reading environ (variable name to value) instead of the
// process environment; nil reads the process environment. It returns every problem.
func ConfigFromEnviron(environ map[string]string) (Config, error) {
	c := DefaultConfig()
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	c.Kafka, err = platform.ParseKafkaSettings(environ)
	add(err)
	c.Ingest, err = ingest.ConfigFromEnviron(environ)
	add(err)
	c.Router, err = router.ConfigFromEnviron(environ)
	add(err)
	c.Deliverer, err = deliverer.ConfigFromEnviron(environ)
	add(err)
	if err := platform.FromEnv(&c, environ); err != nil {
		add(fmt.Errorf("reading settings: %w", err))
	} else {
		add(c.validateOwn())
	}
	return c, errors.Join(errs...)
}

// WaitReady returns once the config store has read the whole config topic, so the services
// that Run starts are serving (or ctx is done). Call it after Run has started.
func (s *Stack) WaitReady(ctx context.Context) error {
	select {
	case <-s.store.Ready():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
