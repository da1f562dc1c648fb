package router

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Config is the router's configuration. Start from DefaultConfig; ConfigFromEnv applies the
// environment (the fields tagged env; docs/configuration.md#run-time-settings).
type Config struct {
	// Topic names; tests on a shared broker override them.
	EventsTopic, DeletionsTopic, DeliveriesTopic, SuppressionsTopic, DedupeTopic string
	// DeletionsStatusTopic gets one schemas.DeletionStatus per deletion request processed.
	DeletionsStatusTopic string
	// AttemptsTopic gets the filtered records (FilteredRecords).
	AttemptsTopic string
	// FilteredRecords writes, for each message dropped for a destination of its source (a
	// duplicate, the tracking plan, a suppressed user, an integrations switch), one
	// webhooks.attempts record of class filtered with the reason, in the routing transaction
	// (ROUTER_FILTERED_RECORDS, default true; docs/routing.md#filtered-records).
	FilteredRecords bool `env:"ROUTER_FILTERED_RECORDS" doc:"write one 'webhooks.attempts' record of class 'filtered' (with the reason) per message dropped for a destination, so the console counts and shows it; 'false': none ([routing.md](routing.md#filtered-records))"`
	// Group is the consumer group of tracking.events; DeletionsGroup of tracking.deletions.
	Group, DeletionsGroup string
	// ExactlyOnce runs both consumers in Kafka transactions (ROUTER_EXACTLY_ONCE, default
	// true). False: at-least-once (produce, wait for acks, commit).
	ExactlyOnce bool `env:"ROUTER_EXACTLY_ONCE" doc:"route in Kafka transactions, exactly once; 'false': at least once (produce, wait for the acknowledgements, commit)"`
	// TransactionalID prefixes the transactional ids and the static group-member ids of the two
	// consumers (ROUTER_TRANSACTIONAL_ID, default "tributary-router-<hostname>"). It must be
	// unique per running router and stable across its restarts, so that a restarted router
	// fences the transaction its predecessor left open and takes its partitions back at once,
	// instead of waiting for the transaction and the group session to time out.
	TransactionalID string `env:"ROUTER_TRANSACTIONAL_ID" doc:"prefix of the transactional ids and static member ids: unique per router, stable across its restarts (a StatefulSet pod name)"`
	// TransactionTimeout bounds how long a transaction left open by a crashed router blocks
	// its partitions (ROUTER_TRANSACTION_TIMEOUT).
	TransactionTimeout time.Duration `env:"ROUTER_TRANSACTION_TIMEOUT" doc:"how long a transaction left open by a crashed router blocks its partitions; at least 1s"`
	// DedupeWindow is how long a routed (source, messageId) is remembered: a message with the
	// same pair within it is dropped (DEDUPE_WINDOW; 0 turns de-duplication off). At most
	// platform.RetentionDedupe, how long router.dedupe keeps what a restart restores.
	DedupeWindow time.Duration `env:"DEDUPE_WINDOW" doc:"drop a (source, messageId) the router routed within this window; 0: off; at most 1h"`
	// DedupeMaxEntries bounds the pairs remembered by one router (about 75 bytes each): past
	// it the oldest are forgotten early (ROUTER_DEDUPE_MAX_ENTRIES).
	DedupeMaxEntries int `env:"ROUTER_DEDUPE_MAX_ENTRIES" doc:"most (source, messageId) pairs one router remembers (about 75 bytes each); past it the oldest are forgotten before the window ends"`
	// MaxPollRecords bounds one poll, hence one transaction.
	MaxPollRecords int
	// ShutdownTimeout bounds the stop after SIGTERM (SHUTDOWN_TIMEOUT): the transaction in
	// progress is committed or aborted by then, its records read again after a restart.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT"`
}

// DefaultConfig returns the defaults of docs/routing.md.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	if host == "" {
		host = "local"
	}
	return Config{
		EventsTopic:          schemas.TopicEvents,
		DeletionsTopic:       schemas.TopicDeletions,
		DeliveriesTopic:      schemas.TopicDeliveries,
		SuppressionsTopic:    schemas.TopicSuppressions,
		DeletionsStatusTopic: schemas.TopicDeletionsStatus,
		DedupeTopic:          schemas.TopicDedupe,
		AttemptsTopic:        schemas.TopicAttempts,
		FilteredRecords:      true,
		DedupeWindow:         10 * time.Minute,
		DedupeMaxEntries:     2_000_000,
		Group:                "tributary-router",
		DeletionsGroup:       "tributary-router-deletions",
		ExactlyOnce:          true,
		TransactionalID:      "tributary-router-" + host,
		TransactionTimeout:   10 * time.Second,
		MaxPollRecords:       10000,
		ShutdownTimeout:      platform.DefaultShutdownGrace,
	}
}

// ConfigFromEnv returns DefaultConfig with the process environment applied
// (platform.LoadSettings: an unset or empty variable keeps the default), validated: the error
// lists every variable that does not parse or cannot work.
func ConfigFromEnv() (Config, error) { return ConfigFromEnviron(nil) }

// ConfigFromEnviron is ConfigFromEnv reading environ (variable name to value) instead of the
// process environment; nil reads the process environment.
func ConfigFromEnviron(environ map[string]string) (Config, error) {
	return platform.LoadSettings(DefaultConfig(), environ)
}

// Validate returns every unusable field, each naming its variable.
func (c *Config) Validate() error {
	var errs []error
	if c.EventsTopic == "" || c.DeletionsTopic == "" || c.DeliveriesTopic == "" || c.SuppressionsTopic == "" || c.DeletionsStatusTopic == "" {
		errs = append(errs, errors.New("router topics: names must not be empty"))
	}
	if c.FilteredRecords && c.AttemptsTopic == "" {
		errs = append(errs, errors.New("router attempts topic: must not be empty with ROUTER_FILTERED_RECORDS"))
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
	if c.DedupeWindow < 0 || c.DedupeWindow > platform.RetentionDedupe {
		errs = append(errs, fmt.Errorf("DEDUPE_WINDOW: must be between 0 (off) and %s (what %s keeps), got %s", platform.RetentionDedupe, schemas.TopicDedupe, c.DedupeWindow))
	}
	if c.DedupeWindow > 0 && (c.DedupeMaxEntries < 1 || c.DedupeTopic == "") {
		errs = append(errs, fmt.Errorf("ROUTER_DEDUPE_MAX_ENTRIES: must be positive, got %d", c.DedupeMaxEntries))
	}
	if c.MaxPollRecords < 1 {
		errs = append(errs, fmt.Errorf("router max poll records: must be positive, got %d", c.MaxPollRecords))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT: must be positive, got %s", c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}
