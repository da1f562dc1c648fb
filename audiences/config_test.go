package audiences_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestConfigFromEnviron: the audiences service's settings, and AUDIENCES_TOKEN required: the
// profile API answers with personal data (traits such as email addresses).
func TestConfigFromEnviron(t *testing.T) {
	def := audiences.DefaultConfig()
	def.Token = "a-token-of-16-chars-or-more"
	servicetest.Settings[audiences.Config]{
		FromEnviron: audiences.ConfigFromEnviron,
		Required:    map[string]string{"AUDIENCES_TOKEN": def.Token},
		Default:     def,
		Every: map[string]string{
			"AUDIENCES_ADDR":                "0.0.0.0:8091",
			"AUDIENCES_TOKEN":               "another-token-0123456789",
			"AUDIENCES_ALLOWED_HOSTS":       "tr-tributary-audiences-api, *.tr-tributary-audiences.tributary.svc",
			"AUDIENCES_PEER_URL":            "http://{instance}.tr-tributary-audiences.tributary.svc:8091",
			"AUDIENCES_TRANSACTIONAL_ID":    "tr-tributary-audiences-0",
			"AUDIENCES_TRANSACTION_TIMEOUT": "30s",
			"AUDIENCE_SYNC_INTERVAL":        "5m",
			"SHUTDOWN_TIMEOUT":              "3s",
		},
		Want: func(c *audiences.Config) {
			c.Addr, c.Token, c.ShutdownTimeout = "0.0.0.0:8091", "another-token-0123456789", 3*time.Second
			c.AllowedHosts = []string{"tr-tributary-audiences-api", "*.tr-tributary-audiences.tributary.svc"}
			c.PeerURL, c.TransactionalID = "http://{instance}.tr-tributary-audiences.tributary.svc:8091", "tr-tributary-audiences-0"
			c.TransactionTimeout, c.SyncInterval = 30*time.Second, 5*time.Minute
		},
		Bad: map[string][]string{
			"AUDIENCES_TOKEN":               {"short"},
			"AUDIENCES_ALLOWED_HOSTS":       {"http://tr-tributary-audiences-api", "tr-tributary-audiences-api:8091", "a.*.svc"},
			"AUDIENCES_PEER_URL":            {"http://peer:8091"},
			"AUDIENCES_TRANSACTION_TIMEOUT": {"10ms", "x"},
			"AUDIENCE_SYNC_INTERVAL":        {"0s"},
			"SHUTDOWN_TIMEOUT":              {"0s", "x"},
		},
		Unusable:      func(c *audiences.Config) { c.Addr, c.Token, c.ShutdownTimeout = "", "", 0 },
		Validate:      (*audiences.Config).Validate,
		UnusableNamed: []string{"AUDIENCES_ADDR", "AUDIENCES_TOKEN", "SHUTDOWN_TIMEOUT"},
	}.Run(t)

	// Outside make run, no token: a clear error, and no audiences service.
	_, err := audiences.ConfigFromEnviron(map[string]string{})
	if err == nil || !strings.Contains(err.Error(), "AUDIENCES_TOKEN: required: the bearer token of the profile API") {
		t.Fatalf("without AUDIENCES_TOKEN: %v", err)
	}
	if _, err := audiences.New(audiences.DefaultConfig(), audiences.Deps{Config: func() audiences.Snapshot { return nil }}); err == nil || !strings.Contains(err.Error(), "AUDIENCES_TOKEN") {
		t.Fatalf("New without a token: %v, want an error naming AUDIENCES_TOKEN", err)
	}
}
