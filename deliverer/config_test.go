package deliverer

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

func TestConfigFromEnvironWithoutVariablesIsDefaultConfig(t *testing.T) {
	c, err := ConfigFromEnviron(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if want := DefaultConfig(); !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	if want, _ := schemas.ParseRetrySchedule(schemas.DefaultRetrySchedule); !slices.Equal(c.RetrySchedule, want) {
		t.Errorf("RetrySchedule = %v, want schemas.DefaultRetrySchedule", c.RetrySchedule)
	}
}

func TestConfigFromEnvironReadsEverySetting(t *testing.T) {
	c, err := ConfigFromEnviron(map[string]string{
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
	})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.InstanceID, want.RetrySchedule, want.RetryWindow, want.Timeout = "deliverer-0", []time.Duration{time.Second, 2 * time.Second, 2 * time.Second}, time.Minute, 2*time.Second
	want.AllowPrivate, want.CAFiles = true, []string{"a.pem", "b.pem"}
	want.MaxInFlight, want.MaxPerHost, want.MaxWaitingPerHost, want.BreakerFailures, want.BreakerCooldown = 100, 4, 0, 3, time.Second
	want.ShutdownTimeout = 5 * time.Second
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	if delays, topics := c.tiers(); len(delays) != 2 || !slices.Equal(topics, []string{"webhooks.retry.1s", "webhooks.retry.2s"}) {
		t.Errorf("tiers = %v %q", delays, topics)
	}
}

func TestConfigSettingErrorsNameTheVariable(t *testing.T) {
	for _, tt := range []struct{ variable, value string }{
		{"RETRY_SCHEDULE", "1s,-2s"},
		{"RETRY_SCHEDULE", "1s,,2s"},
		{"RETRY_WINDOW", "0s"},
		{"RETRY_WINDOW", "forever"},
		{"DELIVERY_TIMEOUT", "-1s"},
		{"DELIVERY_TIMEOUT", "fast"},
		{"WEBHOOK_ALLOW_PRIVATE", "yes"},
		{"DELIVERER_MAX_IN_FLIGHT", "0"},
		{"DELIVERER_MAX_IN_FLIGHT", "lots"},
		{"DELIVERER_MAX_PER_HOST", "0"},
		{"DELIVERER_MAX_WAITING_PER_HOST", "-1"},
		{"DELIVERER_MAX_WAITING_PER_HOST", "2000"}, // 64 + 2000 > 1024
		{"DELIVERER_BREAKER_FAILURES", "0"},
		{"DELIVERER_BREAKER_COOLDOWN", "0s"},
		{"SHUTDOWN_TIMEOUT", "0s"},
	} {
		t.Run(tt.variable+"="+tt.value, func(t *testing.T) {
			_, err := ConfigFromEnviron(map[string]string{tt.variable: tt.value})
			if err == nil || !strings.Contains(err.Error(), tt.variable+": ") && !strings.Contains(err.Error(), tt.variable+" ") {
				t.Errorf("error = %v, want one naming %s", err, tt.variable)
			}
		})
	}
	c := DefaultConfig()
	c.RetrySchedule, c.RetryWindow, c.Timeout, c.MaxPerHost, c.BreakerFailures, c.ShutdownTimeout = nil, 0, 0, 0, 0, 0
	err := c.Validate()
	for _, v := range []string{"RETRY_SCHEDULE", "RETRY_WINDOW", "DELIVERY_TIMEOUT", "DELIVERER_MAX_PER_HOST", "DELIVERER_BREAKER_FAILURES", "SHUTDOWN_TIMEOUT"} {
		if err == nil || !strings.Contains(err.Error(), v+": ") {
			t.Errorf("Validate = %v, want every problem, %s among them", err, v)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "DELIVERER_MAX_PER_HOST: must be at least 1, got 0") {
		t.Errorf("Validate = %v, want DELIVERER_MAX_PER_HOST: must be at least 1, got 0", err)
	}
}
