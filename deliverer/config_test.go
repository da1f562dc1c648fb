package deliverer

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

func TestConfigFromEnviron(t *testing.T) {
	every, unusable := servicetest.Settings[Config]{
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
		Bad: map[string][]string{
			"RETRY_SCHEDULE":                 {"1s,-2s", "1s,,2s"},
			"RETRY_WINDOW":                   {"0s", "forever"},
			"DELIVERY_TIMEOUT":               {"-1s", "fast"},
			"WEBHOOK_ALLOW_PRIVATE":          {"yes"},
			"DELIVERER_MAX_IN_FLIGHT":        {"0", "lots"},
			"DELIVERER_MAX_PER_HOST":         {"0"},
			"DELIVERER_MAX_WAITING_PER_HOST": {"-1"},
			"DELIVERER_BREAKER_FAILURES":     {"0"},
			"DELIVERER_BREAKER_COOLDOWN":     {"0s"},
			"SHUTDOWN_TIMEOUT":               {"0s"},
		},
		Unusable: func(c *Config) {
			c.RetrySchedule, c.RetryWindow, c.Timeout, c.MaxPerHost, c.BreakerFailures, c.ShutdownTimeout = nil, 0, 0, 0, 0, 0
		},
		Validate:      (*Config).Validate,
		UnusableNamed: []string{"RETRY_SCHEDULE", "RETRY_WINDOW", "DELIVERY_TIMEOUT", "DELIVERER_MAX_PER_HOST", "DELIVERER_BREAKER_FAILURES", "SHUTDOWN_TIMEOUT"},
	}.Run(t)
	if !strings.Contains(fmt.Sprint(unusable), "DELIVERER_MAX_PER_HOST: must be at least 1, got 0") {
		t.Errorf("Validate = %v, want DELIVERER_MAX_PER_HOST: must be at least 1, got 0", unusable)
	}
	// 8192 + 4100 > 12288: the error names the sum.
	_, err := ConfigFromEnviron(map[string]string{"DELIVERER_MAX_WAITING_PER_HOST": "4100"})
	if err == nil || !strings.Contains(err.Error(), "DELIVERER_MAX_WAITING_PER_HOST (") {
		t.Errorf("error = %v, want one naming DELIVERER_MAX_WAITING_PER_HOST", err)
	}
	if delays, topics := every.tiers(); len(delays) != 2 || !slices.Equal(topics, []string{"webhooks.retry.1s", "webhooks.retry.2s"}) {
		t.Errorf("tiers = %v %q", delays, topics)
	}
	if want, _ := schemas.ParseRetrySchedule(schemas.DefaultRetrySchedule); !slices.Equal(DefaultConfig().RetrySchedule, want) {
		t.Errorf("RetrySchedule = %v, want schemas.DefaultRetrySchedule", DefaultConfig().RetrySchedule)
	}
}
