package console

import (
	"errors"
	"fmt"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Config is the console's configuration. Start from DefaultConfig; ConfigFromEnv applies the
// environment (the fields tagged env; docs/configuration.md#run-time-settings).
type Config struct {
	// Addr is where the API, /healthz, /readyz and /metrics listen (CONSOLE_ADDR).
	Addr string `env:"CONSOLE_ADDR" doc:"listen address of the console: its web UI at '/' and admin API under '/v1/' ([console.md](console.md)), '/healthz', '/readyz', and '/metrics' unless 'METRICS_ADDR' is set; the images set '0.0.0.0:8090'"`
	// IngestURL is the tracking API's address as clients reach it, for the first event's curl
	// the UI shows (CONSOLE_INGEST_URL).
	IngestURL string `env:"CONSOLE_INGEST_URL" doc:"the tracking API's URL as clients reach it, shown in the console's 'curl' for a new source's first event; 'make run' sets its own"`
	// AudiencesURL is the audiences service's profile API as the console reaches it, for the
	// audiences pages' member counts, previews and profile lookups (CONSOLE_AUDIENCES_URL).
	AudiencesURL string `env:"CONSOLE_AUDIENCES_URL" doc:"the audiences service's profile API as the console reaches it, for the audiences pages' member counts, live previews and profile lookups; 'make run' sets its own"`
	// AudiencesToken is the profile API's bearer token (AUDIENCES_TOKEN, as the audiences
	// service reads it; documented there).
	AudiencesToken string `env:"AUDIENCES_TOKEN" docDefault:"required ('make run': generated per 'DATA_DIR')"`
	// AllowedHosts are the host names the UI and the API answer to (CONSOLE_ALLOWED_HOSTS,
	// comma-separated; docs/security.md#dns-rebinding); others get 421. Empty: the loopback
	// names when CONSOLE_ADDR is on loopback, any name otherwise.
	AllowedHosts []string `env:"CONSOLE_ALLOWED_HOSTS" doc:"comma-separated host names the console's UI and API answer to (its Ingress host, its Service name, an IP address; '*': any): a request with another 'Host' is answered 421, '/healthz', '/readyz' and '/metrics' excepted; 'localhost', '127.0.0.1' and '[::1]' are always accepted. Empty: only those when 'CONSOLE_ADDR' is on loopback, any name otherwise ([security.md](security.md#dns-rebinding))"`
	// Token is the bearer token of the API (CONSOLE_TOKEN): required.
	Token string `env:"CONSOLE_TOKEN" docDefault:"required ('make run': generated per 'DATA_DIR')" doc:"bearer token of the admin API ('Authorization: Bearer ...'); the console refuses to start without it. 'make run' uses it when set, else generates one, keeps it in 'DATA_DIR/console-token' and prints it"`

	// Topic names; tests on a shared broker override them.
	ConfigTopic, EventsTopic, RejectedTopic, DeletionsTopic, DeletionsStatusTopic string
	AttemptsTopic, DeliveriesTopic, DLQTopic, DLQReplayedTopic                    string
	// DelivererGroup is the deliverer's consumer group: its lag on the retry tiers is the
	// overview's backlog.
	DelivererGroup string

	// AttemptsPerDestination is how many attempts the delivery log keeps per destination.
	AttemptsPerDestination int
	// DLQPerDestination is how many dead letters (their headers) the DLQ lists keep per
	// destination.
	DLQPerDestination int
	// StatsWindow is how far back the per-minute delivery counters go (and how far back the
	// console reads webhooks.attempts when it starts).
	StatsWindow time.Duration
	// RecentEvents is how many events (accepted or rejected) the debugger keeps per source.
	RecentEvents int
	// EventsBackfill is how many records per partition of tracking.events and
	// tracking.rejected the console reads back when it starts, to refill the recent events.
	EventsBackfill int64
	// MaxKeyOverlap bounds the overlap of a write-key rotation.
	MaxKeyOverlap time.Duration
	// TestTimeout bounds how long a destination test waits for its attempts.
	TestTimeout time.Duration
	// ShutdownTimeout bounds the stop after SIGTERM (SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT"`
}

// DefaultConfig returns the defaults of docs/console.md.
func DefaultConfig() Config {
	return Config{
		Addr:                   "127.0.0.1:8090",
		IngestURL:              "http://127.0.0.1:8080",
		AudiencesURL:           "http://127.0.0.1:8091",
		ConfigTopic:            schemas.TopicConfig,
		EventsTopic:            schemas.TopicEvents,
		RejectedTopic:          schemas.TopicRejected,
		DeletionsTopic:         schemas.TopicDeletions,
		DeletionsStatusTopic:   schemas.TopicDeletionsStatus,
		AttemptsTopic:          schemas.TopicAttempts,
		DeliveriesTopic:        schemas.TopicDeliveries,
		DLQTopic:               schemas.TopicDLQ,
		DLQReplayedTopic:       schemas.TopicDLQReplayed,
		DelivererGroup:         "tributary-deliverer",
		AttemptsPerDestination: 1000,
		DLQPerDestination:      10000,
		StatsWindow:            24 * time.Hour,
		RecentEvents:           100,
		EventsBackfill:         2000,
		MaxKeyOverlap:          30 * 24 * time.Hour,
		TestTimeout:            15 * time.Second,
		ShutdownTimeout:        platform.DefaultShutdownGrace,
	}
}

// ConfigFromEnv returns DefaultConfig with the process environment applied, validated.
func ConfigFromEnv() (Config, error) { return ConfigFromEnviron(nil) }

// ConfigFromEnviron is ConfigFromEnv reading environ instead of the process environment; nil
// reads the process environment.
func ConfigFromEnviron(environ map[string]string) (Config, error) {
	c := DefaultConfig()
	err := platform.FromEnv(&c, environ)
	return c, errors.Join(err, c.Validate())
}

// Validate returns every unusable field, each naming its variable.
func (c *Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("CONSOLE_ADDR: must not be empty"))
	}
	switch {
	case c.Token == "":
		errs = append(errs, errors.New("CONSOLE_TOKEN: required: the bearer token of the admin API (e.g. CONSOLE_TOKEN=$(openssl rand -hex 32)); `make run` generates one"))
	case len(c.Token) < 16:
		errs = append(errs, fmt.Errorf("CONSOLE_TOKEN: must be at least 16 characters, got %d", len(c.Token)))
	}
	if err := platform.ValidateAllowedHosts("CONSOLE_ALLOWED_HOSTS", c.AllowedHosts); err != nil {
		errs = append(errs, err)
	}
	for _, t := range []string{c.ConfigTopic, c.EventsTopic, c.RejectedTopic, c.DeletionsTopic, c.DeletionsStatusTopic, c.AttemptsTopic, c.DeliveriesTopic, c.DLQTopic, c.DLQReplayedTopic} {
		if t == "" {
			errs = append(errs, errors.New("console topics: names must not be empty"))
			break
		}
	}
	if c.AttemptsPerDestination < 1 || c.DLQPerDestination < 1 || c.RecentEvents < 1 || c.EventsBackfill < 0 {
		errs = append(errs, errors.New("console view sizes: must be positive"))
	}
	if c.StatsWindow < time.Hour {
		errs = append(errs, fmt.Errorf("console stats window: must be at least 1h, got %s", c.StatsWindow))
	}
	if c.TestTimeout <= 0 || c.MaxKeyOverlap < 0 {
		errs = append(errs, errors.New("console timeouts: must be positive"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT: must be positive, got %s", c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}
