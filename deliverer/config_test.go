package deliverer

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

func TestConfigFromEnviron(t *testing.T) {
	every := servicetest.Settings[Config]{
		FromEnviron: ConfigFromEnviron,
		Default:     DefaultConfig(),
		Every: map[string]string{
			"DELIVERER_INSTANCE_ID":          "deliverer-0",
			"RETRY_SCHEDULE":                 "1s, 2s,2s",
			"RETRY_WINDOW":                   "1m",
			"DELIVERY_TIMEOUT":               "2s",
			"WEBHOOK_ALLOW_PRIVATE":          "true",
			"WEBHOOK_CA_FILES":               " a.pem, ,b.pem",
			"DELIVERER_MAX_IN_FLIGHT":        "100",
			"DELIVERER_MAX_PER_HOST":         "4",
			"DELIVERER_MAX_WAITING_PER_HOST": "0",
			"DELIVERER_BREAKER_FAILURES":     "3",
			"DELIVERER_BREAKER_COOLDOWN":     "1s",
			"SHUTDOWN_TIMEOUT":               "5s",
		},
		Want: func(c *Config) {
			c.InstanceID, c.RetrySchedule, c.RetryWindow, c.Timeout = "deliverer-0", []time.Duration{time.Second, 2 * time.Second, 2 * time.Second}, time.Minute, 2*time.Second
			c.AllowPrivate, c.CAFiles = true, []string{"a.pem", "b.pem"}
			c.MaxInFlight, c.MaxPerHost, c.MaxWaitingPerHost, c.BreakerFailures, c.BreakerCooldown = 100, 4, 0, 3, time.Second
			c.ShutdownTimeout = 5 * time.Second
		},
		Bad: []servicetest.Bad{
			{Variable: "RETRY_SCHEDULE", Value: "1s,-2s"},
			{Variable: "RETRY_SCHEDULE", Value: "1s,,2s"},
			{Variable: "RETRY_WINDOW", Value: "0s"},
			{Variable: "RETRY_WINDOW", Value: "forever"},
			{Variable: "DELIVERY_TIMEOUT", Value: "-1s"},
			{Variable: "DELIVERY_TIMEOUT", Value: "fast"},
			{Variable: "WEBHOOK_ALLOW_PRIVATE", Value: "yes"},
			{Variable: "DELIVERER_MAX_IN_FLIGHT", Value: "0"},
			{Variable: "DELIVERER_MAX_IN_FLIGHT", Value: "lots"},
			{Variable: "DELIVERER_MAX_PER_HOST", Value: "0"},
			{Variable: "DELIVERER_MAX_WAITING_PER_HOST", Value: "-1"},
			// 64 + 2000 > 1024: the error names the sum.
			{Variable: "DELIVERER_MAX_WAITING_PER_HOST", Value: "2000", Says: "DELIVERER_MAX_WAITING_PER_HOST ("},
			{Variable: "DELIVERER_BREAKER_FAILURES", Value: "0"},
			{Variable: "DELIVERER_BREAKER_COOLDOWN", Value: "0s"},
			{Variable: "SHUTDOWN_TIMEOUT", Value: "0s"},
		},
		Unusable: func() error {
			c := DefaultConfig()
			c.RetrySchedule, c.RetryWindow, c.Timeout, c.MaxPerHost, c.BreakerFailures, c.ShutdownTimeout = nil, 0, 0, 0, 0, 0
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), "DELIVERER_MAX_PER_HOST: must be at least 1, got 0") {
				t.Errorf("Validate = %v, want DELIVERER_MAX_PER_HOST: must be at least 1, got 0", err)
			}
			return err
		},
		UnusableNamed: []string{"RETRY_SCHEDULE", "RETRY_WINDOW", "DELIVERY_TIMEOUT", "DELIVERER_MAX_PER_HOST", "DELIVERER_BREAKER_FAILURES", "SHUTDOWN_TIMEOUT"},
	}.Run(t)
	if delays, topics := every.tiers(); len(delays) != 2 || !slices.Equal(topics, []string{"webhooks.retry.1s", "webhooks.retry.2s"}) {
		t.Errorf("tiers = %v %q", delays, topics)
	}
	if want, _ := schemas.ParseRetrySchedule(schemas.DefaultRetrySchedule); !slices.Equal(DefaultConfig().RetrySchedule, want) {
		t.Errorf("RetrySchedule = %v, want schemas.DefaultRetrySchedule", DefaultConfig().RetrySchedule)
	}
}
