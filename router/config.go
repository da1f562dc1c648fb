package router

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

// Config is the router's configuration. Start from DefaultConfig.
type Config struct {
	// Topic names; tests on a shared broker override them.
	EventsTopic, DeletionsTopic, DeliveriesTopic, SuppressionsTopic string
	// Group is the consumer group of tracking.events; DeletionsGroup of tracking.deletions.
	Group, DeletionsGroup string
	// ExactlyOnce runs both consumers in Kafka transactions (ROUTER_EXACTLY_ONCE, default
	// true). False: at-least-once (produce, wait for acks, commit).
	ExactlyOnce bool
	// TransactionalID prefixes the transactional ids and the static group-member ids of the two
	// consumers (ROUTER_TRANSACTIONAL_ID, default "tributary-router-<hostname>"). It must be
	// unique per running router and stable across its restarts, so that a restarted router
	// fences the transaction its predecessor left open and takes its partitions back at once,
	// instead of waiting for the transaction and the group session to time out.
	TransactionalID string
	// TransactionTimeout bounds how long a transaction left open by a crashed router blocks
	// its partitions (ROUTER_TRANSACTION_TIMEOUT).
	TransactionTimeout time.Duration
	// MaxPollRecords bounds one poll, hence one transaction.
	MaxPollRecords int
	// ShutdownTimeout bounds the stop after SIGTERM (SHUTDOWN_TIMEOUT): the transaction in
	// progress is committed or aborted by then, its records read again after a restart.
	ShutdownTimeout time.Duration
}

// DefaultConfig returns the defaults of docs/routing.md.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	if host == "" {
		host = "local"
	}
	return Config{
		EventsTopic:        schemas.TopicEvents,
		DeletionsTopic:     schemas.TopicDeletions,
		DeliveriesTopic:    schemas.TopicDeliveries,
		SuppressionsTopic:  schemas.TopicSuppressions,
		Group:              "tributary-router",
		DeletionsGroup:     "tributary-router-deletions",
		ExactlyOnce:        true,
		TransactionalID:    "tributary-router-" + host,
		TransactionTimeout: 10 * time.Second,
		MaxPollRecords:     10000,
		ShutdownTimeout:    platform.DefaultShutdownGrace,
	}
}

// ConfigFromEnv returns DefaultConfig with the ROUTER_* environment variables applied.
func ConfigFromEnv() (Config, error) {
	c := DefaultConfig()
	var errs []error
	if v, ok := os.LookupEnv("ROUTER_EXACTLY_ONCE"); ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("ROUTER_EXACTLY_ONCE: %q is not true or false", v))
		}
		c.ExactlyOnce = b
	}
	if v := strings.TrimSpace(os.Getenv("ROUTER_TRANSACTIONAL_ID")); v != "" {
		c.TransactionalID = v
	}
	if v, ok := os.LookupEnv("ROUTER_TRANSACTION_TIMEOUT"); ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("ROUTER_TRANSACTION_TIMEOUT: %w", err))
		}
		c.TransactionTimeout = d
	}
	if v, ok := os.LookupEnv("SHUTDOWN_TIMEOUT"); ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT: %w", err))
		}
		c.ShutdownTimeout = d
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate names the first unusable field.
func (c *Config) Validate() error {
	var errs []error
	if c.EventsTopic == "" || c.DeletionsTopic == "" || c.DeliveriesTopic == "" || c.SuppressionsTopic == "" {
		errs = append(errs, errors.New("router topics: names must not be empty"))
	}
	if c.Group == "" || c.DeletionsGroup == "" {
		errs = append(errs, errors.New("router groups: names must not be empty"))
	}
	if c.ExactlyOnce && c.TransactionalID == "" {
		errs = append(errs, errors.New("ROUTER_TRANSACTIONAL_ID: required in exactly-once mode"))
	}
	if c.ExactlyOnce && c.TransactionTimeout < time.Second {
		errs = append(errs, fmt.Errorf("ROUTER_TRANSACTION_TIMEOUT: must be at least 1s, got %s", c.TransactionTimeout))
	}
	if c.MaxPollRecords < 1 {
		errs = append(errs, fmt.Errorf("router max poll records: must be positive, got %d", c.MaxPollRecords))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT: must be positive, got %s", c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}
