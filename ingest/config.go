package ingest

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

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
	// AllowedOrigins for CORS; empty allows every origin ("*"), as Segment's API does.
	AllowedOrigins []string
}

// DefaultConfig returns the defaults of docs/ingest.md.
func DefaultConfig() Config {
	return Config{
		Addr:           "127.0.0.1:8080",
		ProduceTimeout: 5 * time.Second,
		EventsTopic:    schemas.TopicEvents,
		RejectedTopic:  schemas.TopicRejected,
		InboundTopic:   schemas.TopicInbound,
		InboundGroup:   "tributary-ingest-inbound",
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
	return errors.Join(errs...)
}
