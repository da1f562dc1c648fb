package devstack

import (
	"context"
	"fmt"

	"github.com/caarlos0/env/v11"

	"github.com/tributary-cdp/tributary/platform"
)

// LoadConfig reads every setting of design §4 from the environment (docs/operations.md).
func LoadConfig() (Config, error) {
	return loadConfig(nil)
}

// Defaults is the configuration with no environment variable set.
func Defaults() Config {
	cfg, err := loadConfig(map[string]string{})
	if err != nil {
		panic(fmt.Sprintf("devstack defaults do not parse: %v", err)) // a bug in the tags above
	}
	return cfg
}

// loadConfig reads environ, or the process environment when environ is nil.
func loadConfig(environ map[string]string) (Config, error) {
	var cfg Config
	opts := env.Options{}
	if environ != nil {
		opts.Environment = environ
	}
	if err := env.ParseWithOptions(&cfg, opts); err != nil {
		return Config{}, fmt.Errorf("reading settings: %w", err)
	}
	kafka, err := platform.ParseKafkaSettings(environ)
	if err != nil {
		return Config{}, err
	}
	cfg.Kafka = kafka
	return cfg, nil
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
