package devstack

import (
	"context"
	"errors"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/ingest"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/router"
)

// DefaultConfig is the configuration with no variable set: the defaults of every service,
// the embedded broker on port 9092 with its files in .data.
func DefaultConfig() Config {
	return Config{
		Kafka:        platform.DefaultKafkaSettings(),
		Ingest:       ingest.DefaultConfig(),
		Router:       router.DefaultConfig(),
		Deliverer:    deliverer.DefaultConfig(),
		Audiences:    audiences.DefaultConfig(),
		EmbeddedPort: 9092,
		DataDir:      ".data",
		Console:      console.DefaultConfig(),
		LogLevel:     platform.DefaultCommandSettings().LogLevel,
		Tracing:      platform.DefaultTracingSettings(),
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
	var errs [8]error
	c.Kafka, errs[0] = platform.ParseKafkaSettings(environ)
	c.Ingest, errs[1] = ingest.ConfigFromEnviron(environ)
	c.Router, errs[2] = router.ConfigFromEnviron(environ)
	c.Deliverer, errs[3] = deliverer.ConfigFromEnviron(environ)
	// The audiences service's and the console's settings, validated with the rest: an empty
	// AUDIENCES_TOKEN or CONSOLE_TOKEN is generated (New).
	errs[4] = errors.Join(platform.FromEnv(&c.Audiences, environ), c.audiencesToValidate().Validate())
	errs[6] = errors.Join(platform.FromEnv(&c.Console, environ), c.consoleToValidate().Validate())
	errs[5] = platform.FromEnv(&c, environ)
	c.Tracing, errs[7] = platform.TracingSettingsFromEnviron(environ)
	// A field that does not parse keeps its valid default: validateOwn adds only other problems.
	return c, joinDistinct(append(errs[:], c.validateOwn())...)
}

// joinDistinct joins errs, each error once: SHUTDOWN_TIMEOUT, read by every service, is wrong
// only once.
func joinDistinct(errs ...error) error {
	var out []error
	seen := map[string]bool{}
	var add func(err error)
	add = func(err error) {
		if err == nil {
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				add(e)
			}
			return
		}
		if !seen[err.Error()] {
			seen[err.Error()] = true
			out = append(out, err)
		}
	}
	for _, err := range errs {
		add(err)
	}
	return errors.Join(out...)
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
