package deliverer

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Config is the deliverer's configuration. Start from DefaultConfig; ConfigFromEnv applies the
// environment (the fields tagged env; docs/configuration.md#run-time-settings).
type Config struct {
	// Topic names; tests on a shared broker override them.
	DeliveriesTopic, DLQTopic, AttemptsTopic string
	// SuppressionsTopic and DeletionsStatusTopic are read whole (platform.Regulations): a
	// suppressed or deleted user's messages are not delivered
	// (docs/delivery.md#deleted-and-suppressed-users).
	SuppressionsTopic, DeletionsStatusTopic string
	// RetriedNowTopic holds the retry-now marks (docs/delivery.md#retry-now), read whole and
	// followed.
	RetriedNowTopic string
	// Group is the consumer group of webhooks.deliveries and the retry tiers.
	Group string
	// InstanceID is the static group-member id (DELIVERER_INSTANCE_ID, default
	// "tributary-deliverer-<hostname>"; empty: dynamic membership). Unique per running
	// deliverer and stable across its restarts, it lets a restarted deliverer take its
	// partitions back at once instead of waiting for the old session to time out.
	InstanceID string `env:"DELIVERER_INSTANCE_ID" doc:"static group-member id: unique per deliverer, stable across its restarts (a StatefulSet pod name)"`
	// RetrySchedule is the delay before each retry (RETRY_SCHEDULE, default schemas.DefaultRetrySchedule); each distinct delay is one
	// tier topic, schemas.RetryTopic(delay).
	RetrySchedule []time.Duration `env:"RETRY_SCHEDULE" doc:"comma-separated delay before each retry; one tier topic per distinct delay, so the deliverer and the topic bootstrap must have the same ([delivery.md](delivery.md#retry-tiers))"`
	// RetryWindow: no attempt starts later than this after the first (RETRY_WINDOW).
	RetryWindow time.Duration `env:"RETRY_WINDOW" doc:"no attempt starts later than this after the first; then the record goes to the dead-letter queue"`
	// Timeout is the whole of one POST (DELIVERY_TIMEOUT), connection and TLS included.
	Timeout time.Duration `env:"DELIVERY_TIMEOUT" doc:"the whole of one POST, connection and TLS included"`
	// AllowPrivate turns the address guard off (WEBHOOK_ALLOW_PRIVATE): loopback, private and
	// link-local addresses become reachable.
	AllowPrivate bool `env:"WEBHOOK_ALLOW_PRIVATE" doc:"'true' turns the address guard off: loopback, private and link-local webhook addresses become reachable ('make run' sets it)"`
	// CAFiles are PEM files of extra CA certificates to trust beside the system roots
	// (WEBHOOK_CA_FILES, comma-separated).
	CAFiles []string `env:"WEBHOOK_CA_FILES" doc:"comma-separated PEM files of extra CA certificates trusted for webhook endpoints, beside the system roots"`
	// MaxInFlight bounds concurrent deliveries in all (DELIVERER_MAX_IN_FLIGHT).
	MaxInFlight int `env:"DELIVERER_MAX_IN_FLIGHT" doc:"records in progress in all ([delivery.md](delivery.md#isolation-a-dead-endpoint-does-not-hold-back-the-others))"`
	// MaxPerHost is the ceiling of each host's adaptive concurrency limit
	// (DELIVERER_MAX_PER_HOST; docs/delivery.md#concurrency-found-per-endpoint); up to
	// MaxWaitingPerHost more wait in memory for a slot (DELIVERER_MAX_WAITING_PER_HOST), and a
	// record beyond that goes to the first tier instead of blocking its partition.
	MaxPerHost        int `env:"DELIVERER_MAX_PER_HOST" doc:"the most concurrent POSTs to one host: the ceiling of its adaptive limit, which starts at 64 and follows what the endpoint takes"`
	MaxWaitingPerHost int `env:"DELIVERER_MAX_WAITING_PER_HOST" doc:"records waiting in memory for a slot of their host (32 times as many before its first answer); beyond that the poll loop waits for a fast host, and a slow host's records go to the first retry tier"`
	// BreakerFailures consecutive failed deliveries to one host open its circuit breaker
	// (DELIVERER_BREAKER_FAILURES); while open, the host's records go to a retry tier unsent.
	BreakerFailures int `env:"DELIVERER_BREAKER_FAILURES" doc:"consecutive failed deliveries to one host that open its circuit breaker"`
	// BreakerCooldown is how long a breaker stays open before one trial request
	// (DELIVERER_BREAKER_COOLDOWN); it doubles on each failed trial, up to the last tier's delay.
	BreakerCooldown time.Duration `env:"DELIVERER_BREAKER_COOLDOWN" doc:"how long an open breaker waits before one trial request; doubles on each failed trial, up to the delay of the last tier"`
	// MaxPollRecords bounds one poll.
	MaxPollRecords int
	// CommitInterval is how often finished offsets are committed.
	CommitInterval time.Duration
	// AutoDisable are the topics and the operator webhook of auto-disable
	// (docs/delivery.md#auto-disable).
	AutoDisable AutoDisableConfig
	// ShutdownTimeout bounds the stop after SIGTERM (SHUTDOWN_TIMEOUT): deliveries in progress
	// finish and are handed on, finished offsets are committed; what is left by then stays
	// uncommitted and is delivered again after a restart.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT"`
}

// DefaultConfig returns the defaults of docs/delivery.md.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	if host == "" {
		host = "local"
	}
	return Config{
		InstanceID:        "tributary-deliverer-" + host,
		DeliveriesTopic:   schemas.TopicDeliveries,
		DLQTopic:          schemas.TopicDLQ,
		AttemptsTopic:     schemas.TopicAttempts,
		Group:             "tributary-deliverer",
		RetrySchedule:     schemas.DefaultRetryDelays(),
		RetryWindow:       4 * time.Hour,
		Timeout:           5 * time.Second,
		MaxInFlight:       12288,
		MaxPerHost:        8192,
		MaxWaitingPerHost: 256,
		BreakerFailures:   20,
		BreakerCooldown:   10 * time.Second,
		MaxPollRecords:    2000,
		CommitInterval:    100 * time.Millisecond,
		ShutdownTimeout:   platform.DefaultShutdownGrace,

		SuppressionsTopic:    schemas.TopicSuppressions,
		DeletionsStatusTopic: schemas.TopicDeletionsStatus,
		RetriedNowTopic:      schemas.TopicRetriedNow,
		AutoDisable: AutoDisableConfig{
			ConfigTopic:         schemas.TopicConfig,
			ParkedTopic:         schemas.TopicParked,
			ParkedReplayedTopic: schemas.TopicParkedReplayed,
			NoticesTopic:        schemas.TopicNotices,
		},
	}
}

// AutoDisableConfig is the deliverer's part of auto-disable (docs/delivery.md#auto-disable).
type AutoDisableConfig struct {
	// ConfigTopic is where a disabled destination is written (tributary.config); ParkedTopic
	// and ParkedReplayedTopic keep its deliveries and their replay marks; NoticesTopic gets the
	// notices. Tests on a shared broker override them.
	ConfigTopic, ParkedTopic, ParkedReplayedTopic, NoticesTopic string
	// OperatorWebhookURL, when set, gets every notice as a POST (OPERATOR_WEBHOOK_URL).
	OperatorWebhookURL string `env:"OPERATOR_WEBHOOK_URL" doc:"gets every auto-disable notice (destination.failing, destination.disabled) as a JSON POST; empty: the notices go to the log, the console and tributary.notices only ([delivery.md](delivery.md#auto-disable))"`
	// OperatorWebhookSecret, when set, signs those POSTs: X-Signature, hex HMAC-SHA1 of the
	// body, as a destination's sharedSecret signs deliveries (OPERATOR_WEBHOOK_SECRET).
	OperatorWebhookSecret string `env:"OPERATOR_WEBHOOK_SECRET" doc:"signs the operator webhook's POSTs: X-Signature, hex HMAC-SHA1 of the body, as deliveries are signed ([receivers.md](receivers.md#operator-notices))"`
}

// ConfigFromEnv returns DefaultConfig with the process environment applied
// (platform.LoadSettings: an unset or empty variable keeps the default), validated: the error
// lists every variable that does not parse or cannot work.
func ConfigFromEnv() (Config, error) { return ConfigFromEnviron(nil) }

// ConfigFromEnviron is ConfigFromEnv reading environ (variable name to value) instead of the
// process environment; nil reads the process environment.
func ConfigFromEnviron(environ map[string]string) (Config, error) {
	return platform.LoadSettings(DefaultConfig(), environ, platform.ParseWith(schemas.ParseRetrySchedule))
}

// Validate returns every unusable field, each naming its variable.
func (c *Config) Validate() error {
	var errs []error
	if c.DeliveriesTopic == "" || c.DLQTopic == "" || c.AttemptsTopic == "" || c.Group == "" ||
		c.SuppressionsTopic == "" || c.DeletionsStatusTopic == "" || c.RetriedNowTopic == "" {
		errs = append(errs, errors.New("deliverer topics and group: names must not be empty"))
	}
	errs = append(errs, schemas.ValidateRetryDelays(c.RetrySchedule))
	if c.RetryWindow <= 0 {
		errs = append(errs, fmt.Errorf("RETRY_WINDOW: must be positive, got %s", c.RetryWindow))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("DELIVERY_TIMEOUT: must be positive, got %s", c.Timeout))
	}
	if c.MaxInFlight < 1 {
		errs = append(errs, fmt.Errorf("DELIVERER_MAX_IN_FLIGHT: must be at least 1, got %d", c.MaxInFlight))
	}
	if c.MaxPerHost < 1 {
		errs = append(errs, fmt.Errorf("DELIVERER_MAX_PER_HOST: must be at least 1, got %d", c.MaxPerHost))
	}
	if c.MaxWaitingPerHost < 0 {
		errs = append(errs, fmt.Errorf("DELIVERER_MAX_WAITING_PER_HOST: must not be negative, got %d", c.MaxWaitingPerHost))
	}
	if c.MaxPerHost+c.MaxWaitingPerHost > c.MaxInFlight {
		errs = append(errs, fmt.Errorf("DELIVERER_MAX_PER_HOST + DELIVERER_MAX_WAITING_PER_HOST (%d + %d): must not exceed DELIVERER_MAX_IN_FLIGHT (%d)",
			c.MaxPerHost, c.MaxWaitingPerHost, c.MaxInFlight))
	}
	if c.BreakerFailures < 1 {
		errs = append(errs, fmt.Errorf("DELIVERER_BREAKER_FAILURES: must be at least 1, got %d", c.BreakerFailures))
	}
	if c.BreakerCooldown <= 0 {
		errs = append(errs, fmt.Errorf("DELIVERER_BREAKER_COOLDOWN: must be positive, got %s", c.BreakerCooldown))
	}
	if c.MaxPollRecords < 1 || c.CommitInterval <= 0 {
		errs = append(errs, errors.New("deliverer poll size and commit interval: must be positive"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT: must be positive, got %s", c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}

// tiers returns the distinct tier delays in schedule order, and their topics.
func (c *Config) tiers() (delays []time.Duration, topics []string) {
	for _, d := range c.RetrySchedule {
		seen := false
		for _, x := range delays {
			seen = seen || x == d
		}
		if !seen {
			delays = append(delays, d)
			topics = append(topics, schemas.RetryTopic(d))
		}
	}
	return delays, topics
}
