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
			"CONSOLE_ADDR":                    "0.0.0.0:8090",
			"CONSOLE_TOKEN":                   "another-token-0123456789",
			"CONSOLE_MAX_STREAMS":             "50",
			"CONSOLE_MAX_STREAMS_PER_SESSION": "3",
			"SHUTDOWN_TIMEOUT":                "3s",
			// The console's Ingress host and its Service.
			"CONSOLE_ALLOWED_HOSTS": "console.example.com,tr-tributary-console",
		},
		Want: func(c *console.Config) {
			c.Addr, c.Token, c.ShutdownTimeout = "0.0.0.0:8090", "another-token-0123456789", 3*time.Second
			c.MaxStreams, c.MaxStreamsPerSession = 50, 3
			c.AllowedHosts = []string{"console.example.com", "tr-tributary-console"}
		},
		Bad: map[string][]string{
			"CONSOLE_ALLOWED_HOSTS":           {"https://console.example.com", "console.example.com:8090"},
			"CONSOLE_TOKEN":                   {"short", "aaaaaaaaaaaaaaaa"},
			"CONSOLE_MAX_STREAMS":             {"0", "x"},
			"CONSOLE_MAX_STREAMS_PER_SESSION": {"0", "-1"},
			"SHUTDOWN_TIMEOUT":                {"0s", "x"},
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

// TestWeakConsoleTokenRefused: a token shorter than 16 characters, or of 16 and more with too
// little entropy (one character repeated, a run of digits, a short pattern), is refused with an
// error that says how to make a good one; random tokens of the usual generators pass.
func TestWeakConsoleTokenRefused(t *testing.T) {
	for _, weak := range []string{
		"short",
		"aaaaaaaaaaaaaaaa",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"1234567890123456",
		"0123456789012345678901234567890123456789",
		"abcdefghijklmnop",
		"abababababababab",
		"qwertyuiopqwertyuiop",
		"1111111122222222",
	} {
		_, err := console.ConfigFromEnviron(map[string]string{"CONSOLE_TOKEN": weak})
		if err == nil {
			t.Errorf("CONSOLE_TOKEN=%s: accepted", weak)
			continue
		}
		if !strings.Contains(err.Error(), "CONSOLE_TOKEN:") || !strings.Contains(err.Error(), "openssl rand -hex 32") {
			t.Errorf("CONSOLE_TOKEN=%s: the error does not say how to make a token: %v", weak, err)
		}
		if strings.Contains(err.Error(), weak) {
			t.Errorf("CONSOLE_TOKEN=%s: the error shows the token: %v", weak, err)
		}
	}
	for _, good := range []string{
		"3f9c2a7be41d08c5", // openssl rand -hex 8
		"b5Jq0xY2kZr9Tw1m", // 16 of base64
		"ct_4be0c1f2d5a6e7b8c9d0a1b2c3d4e5f6a7b8c9d0e1f2a3b4",                // make run's
		"3d1f0b5e8a9c2d4f6e7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f", // openssl rand -hex 32
		"another-token-0123456789",
	} {
		if _, err := console.ConfigFromEnviron(map[string]string{"CONSOLE_TOKEN": good}); err != nil {
			t.Errorf("CONSOLE_TOKEN=%s: refused: %v", good, err)
		}
	}
}
