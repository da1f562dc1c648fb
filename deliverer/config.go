package deliverer

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Config is the deliverer's configuration. Start from DefaultConfig.
type Config struct {
	// Topic names; tests on a shared broker override them.
	DeliveriesTopic, DLQTopic, AttemptsTopic string
	// Group is the consumer group of webhooks.deliveries and the retry tiers.
	Group string
	// InstanceID is the static group-member id (DELIVERER_INSTANCE_ID, default
	// "tributary-deliverer-<hostname>"; empty: dynamic membership). Unique per running
	// deliverer and stable across its restarts, it lets a restarted deliverer take its
	// partitions back at once instead of waiting for the old session to time out.
	InstanceID string
	// RetrySchedule is the delay before each retry (RETRY_SCHEDULE); each distinct delay is one
	// tier topic, schemas.RetryTopic(delay).
	RetrySchedule []time.Duration
	// RetryWindow: no attempt starts later than this after the first (RETRY_WINDOW).
	RetryWindow time.Duration
	// Timeout is the whole of one POST (DELIVERY_TIMEOUT), connection and TLS included.
	Timeout time.Duration
	// AllowPrivate turns the address guard off (WEBHOOK_ALLOW_PRIVATE): loopback, private and
	// link-local addresses become reachable.
	AllowPrivate bool
	// CAFiles are PEM files of extra CA certificates to trust beside the system roots
	// (WEBHOOK_CA_FILES, comma-separated).
	CAFiles []string
	// MaxInFlight bounds concurrent deliveries in all (DELIVERER_MAX_IN_FLIGHT).
	MaxInFlight int
	// MaxPerHost bounds concurrent deliveries to one host (DELIVERER_MAX_PER_HOST); up to
	// MaxWaitingPerHost more wait in memory for a slot (DELIVERER_MAX_WAITING_PER_HOST), and a
	// record beyond that goes to the first tier instead of blocking its partition.
	MaxPerHost, MaxWaitingPerHost int
	// BreakerFailures consecutive failed deliveries to one host open its circuit breaker
	// (DELIVERER_BREAKER_FAILURES); while open, the host's records go to a retry tier unsent.
	BreakerFailures int
	// BreakerCooldown is how long a breaker stays open before one trial request
	// (DELIVERER_BREAKER_COOLDOWN); it doubles on each failed trial, up to the last tier's delay.
	BreakerCooldown time.Duration
	// MaxPollRecords bounds one poll.
	MaxPollRecords int
	// CommitInterval is how often finished offsets are committed.
	CommitInterval time.Duration
	// ShutdownTimeout bounds the stop after SIGTERM (SHUTDOWN_TIMEOUT): deliveries in progress
	// finish and are handed on, finished offsets are committed; what is left by then stays
	// uncommitted and is delivered again after a restart.
	ShutdownTimeout time.Duration
}

// DefaultConfig returns the defaults of docs/delivery.md.
func DefaultConfig() Config {
	sched, _ := schemas.ParseRetrySchedule("10s,1m,5m,15m,30m,1h,1h,1h")
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
		RetrySchedule:     sched,
		RetryWindow:       4 * time.Hour,
		Timeout:           5 * time.Second,
		MaxInFlight:       1024,
		MaxPerHost:        64,
		MaxWaitingPerHost: 256,
		BreakerFailures:   20,
		BreakerCooldown:   10 * time.Second,
		MaxPollRecords:    2000,
		CommitInterval:    100 * time.Millisecond,
		ShutdownTimeout:   platform.DefaultShutdownGrace,
	}
}

// ConfigFromEnv returns DefaultConfig with the environment applied (design §4 and the
// DELIVERER_* variables of docs/delivery.md).
func ConfigFromEnv() (Config, error) {
	c := DefaultConfig()
	var errs []error
	env := func(name string, parse func(string) error) {
		if v, ok := os.LookupEnv(name); ok && strings.TrimSpace(v) != "" {
			if err := parse(strings.TrimSpace(v)); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	}
	dur := func(dst *time.Duration) func(string) error {
		return func(v string) (err error) { *dst, err = time.ParseDuration(v); return err }
	}
	num := func(dst *int) func(string) error {
		return func(v string) (err error) { *dst, err = strconv.Atoi(v); return err }
	}
	env("RETRY_SCHEDULE", func(v string) (err error) { c.RetrySchedule, err = schemas.ParseRetrySchedule(v); return err })
	env("RETRY_WINDOW", dur(&c.RetryWindow))
	env("DELIVERER_INSTANCE_ID", func(v string) error { c.InstanceID = v; return nil })
	env("DELIVERY_TIMEOUT", dur(&c.Timeout))
	env("WEBHOOK_ALLOW_PRIVATE", func(v string) (err error) { c.AllowPrivate, err = strconv.ParseBool(v); return err })
	env("WEBHOOK_CA_FILES", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				c.CAFiles = append(c.CAFiles, f)
			}
		}
		return nil
	})
	env("DELIVERER_MAX_IN_FLIGHT", num(&c.MaxInFlight))
	env("DELIVERER_MAX_PER_HOST", num(&c.MaxPerHost))
	env("DELIVERER_MAX_WAITING_PER_HOST", num(&c.MaxWaitingPerHost))
	env("DELIVERER_BREAKER_FAILURES", num(&c.BreakerFailures))
	env("DELIVERER_BREAKER_COOLDOWN", dur(&c.BreakerCooldown))
	env("SHUTDOWN_TIMEOUT", dur(&c.ShutdownTimeout))
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate names every unusable field.
func (c *Config) Validate() error {
	var errs []error
	if c.DeliveriesTopic == "" || c.DLQTopic == "" || c.AttemptsTopic == "" || c.Group == "" {
		errs = append(errs, errors.New("deliverer topics and group: names must not be empty"))
	}
	if len(c.RetrySchedule) == 0 {
		errs = append(errs, errors.New("RETRY_SCHEDULE: at least one delay"))
	}
	for i, d := range c.RetrySchedule {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("RETRY_SCHEDULE: entry %d must be positive", i+1))
		}
	}
	if c.RetryWindow <= 0 {
		errs = append(errs, fmt.Errorf("RETRY_WINDOW: must be positive, got %s", c.RetryWindow))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("DELIVERY_TIMEOUT: must be positive, got %s", c.Timeout))
	}
	if c.MaxInFlight < 1 || c.MaxPerHost < 1 || c.MaxWaitingPerHost < 0 || c.MaxPerHost+c.MaxWaitingPerHost > c.MaxInFlight {
		errs = append(errs, fmt.Errorf("DELIVERER_MAX_IN_FLIGHT (%d), DELIVERER_MAX_PER_HOST (%d), DELIVERER_MAX_WAITING_PER_HOST (%d): need per host >= 1 and per host + waiting <= in flight",
			c.MaxInFlight, c.MaxPerHost, c.MaxWaitingPerHost))
	}
	if c.BreakerFailures < 1 || c.BreakerCooldown <= 0 {
		errs = append(errs, errors.New("DELIVERER_BREAKER_FAILURES and DELIVERER_BREAKER_COOLDOWN: must be positive"))
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
