package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestConfigFromEnviron: the console's settings, and CONSOLE_TOKEN required.
func TestConfigFromEnviron(t *testing.T) {
	def := console.DefaultConfig()
	def.Token = "a-token-of-16-chars-or-more"
	servicetest.Settings[console.Config]{
		FromEnviron: console.ConfigFromEnviron,
		Required:    map[string]string{"CONSOLE_TOKEN": def.Token},
		Default:     def,
		Every: map[string]string{
			"CONSOLE_ADDR":     "0.0.0.0:8090",
			"CONSOLE_TOKEN":    "another-token-0123456789",
			"SHUTDOWN_TIMEOUT": "3s",
			// The console's Ingress host and its Service.
			"CONSOLE_ALLOWED_HOSTS": "console.example.com,tr-tributary-console",
		},
		Want: func(c *console.Config) {
			c.Addr, c.Token, c.ShutdownTimeout = "0.0.0.0:8090", "another-token-0123456789", 3*time.Second
			c.AllowedHosts = []string{"console.example.com", "tr-tributary-console"}
		},
		Bad: map[string][]string{
			"CONSOLE_ALLOWED_HOSTS": {"https://console.example.com", "console.example.com:8090"},
			"CONSOLE_TOKEN":         {"short"},
			"SHUTDOWN_TIMEOUT":      {"0s", "x"},
		},
		Unusable:      func(c *console.Config) { c.Addr, c.Token, c.ShutdownTimeout = "", "", 0 },
		Validate:      (*console.Config).Validate,
		UnusableNamed: []string{"CONSOLE_ADDR", "CONSOLE_TOKEN", "SHUTDOWN_TIMEOUT"},
	}.Run(t)

	// Outside make run, no token: a clear error, and no console.
	_, err := console.ConfigFromEnviron(map[string]string{})
	if err == nil || !strings.Contains(err.Error(), "CONSOLE_TOKEN: required: the bearer token of the admin API") {
		t.Fatalf("without CONSOLE_TOKEN: %v", err)
	}
	if _, err := console.New(console.DefaultConfig(), console.Deps{}); err == nil {
		t.Fatal("New without a token returned no error")
	}
}
