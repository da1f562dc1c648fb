package ingest

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Config is the ingest service's configuration. Start from DefaultConfig.
type Config struct {
	// Addr is the HTTP listen address (INGEST_ADDR).
	Addr string
	// TrustedProxies are the peers whose X-Forwarded-For is believed (INGEST_TRUSTED_PROXIES,
	// comma-separated CIDRs). Empty: context.ip is always the TCP peer.
	TrustedProxies []netip.Prefix
	// ProduceTimeout bounds how long a request waits for Kafka's acknowledgement before it
	// answers 503 (INGEST_PRODUCE_TIMEOUT).
	ProduceTimeout time.Duration
	// Topic names; tests on a shared broker override them.
	EventsTopic, RejectedTopic, InboundTopic string
	// InboundGroup is the consumer group of the tracking.inbound front door.
	InboundGroup string
	// DisableInbound turns the Kafka front door off.
	DisableInbound bool
	// MaxInFlight bounds the requests served at once (INGEST_MAX_IN_FLIGHT); a request beyond
	// it is answered 503 with Retry-After at once, so an overload sheds load instead of queueing
	// memory. 0: no bound.
	MaxInFlight int
	// AllowedOrigins for CORS; empty allows every origin, as Segment's API does. An allowed
	// Origin is echoed in Access-Control-Allow-Origin with Allow-Credentials (browsers refuse
	// "*" with credentials, and analytics.js sends the write key as Basic auth).
	AllowedOrigins []string
	// ShutdownTimeout bounds the stop after SIGTERM (SHUTDOWN_TIMEOUT): requests in flight and
	// the front door's batch finish, the producer flushes; what is left by then is answered 503
	// or left uncommitted, to be read again.
	ShutdownTimeout time.Duration
}

// DefaultConfig returns the defaults of docs/ingest.md.
func DefaultConfig() Config {
	return Config{
		Addr:            "127.0.0.1:8080",
		ProduceTimeout:  5 * time.Second,
		EventsTopic:     schemas.TopicEvents,
		RejectedTopic:   schemas.TopicRejected,
		InboundTopic:    schemas.TopicInbound,
		InboundGroup:    "tributary-ingest-inbound",
		MaxInFlight:     1024,
		ShutdownTimeout: platform.DefaultShutdownGrace,
	}
}

// Validate names the first unusable field.
func (c *Config) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("INGEST_ADDR: required"))
	}
	if c.ProduceTimeout <= 0 {
		errs = append(errs, fmt.Errorf("INGEST_PRODUCE_TIMEOUT: must be positive, got %s", c.ProduceTimeout))
	}
	if c.EventsTopic == "" || c.RejectedTopic == "" || c.InboundTopic == "" {
		errs = append(errs, errors.New("ingest topics: names must not be empty"))
	}
	if !c.DisableInbound && c.InboundGroup == "" {
		errs = append(errs, errors.New("ingest inbound group: required"))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("INGEST_MAX_IN_FLIGHT: must not be negative, got %d", c.MaxInFlight))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT: must be positive, got %s", c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}
