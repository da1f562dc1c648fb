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

// TestIdentitySettings: the identity rules' settings (docs/audiences.md#identity-resolution),
// each bad value refused with an error naming its variable.
func TestIdentitySettings(t *testing.T) {
	base := map[string]string{"AUDIENCES_TOKEN": "a-token-of-16-chars-or-more"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for bk, bv := range base {
			m[bk] = bv
		}
		return m
	}
	c, err := audiences.ConfigFromEnviron(with("AUDIENCES_IDENTITY_LIMITS", "user_id:1, email:2, *:3"))
	if err != nil || c.IdentityLimits != "user_id:1, email:2, *:3" || !c.IdentityExternalIDs || c.IdentityMaxMerges != 100 {
		t.Fatalf("limits: %v %+v", err, c)
	}
	for _, bad := range []struct{ name, value, want string }{
		{"AUDIENCES_IDENTITY_BLOCKED", "^(null", "AUDIENCES_IDENTITY_BLOCKED: error parsing regexp"},
		{"AUDIENCES_IDENTITY_LIMITS", "email", "AUDIENCES_IDENTITY_LIMITS: want type:limit"},
		{"AUDIENCES_IDENTITY_LIMITS", "email:0", "AUDIENCES_IDENTITY_LIMITS: want type:limit"},
		{"AUDIENCES_IDENTITY_LIMITS", "user_id:2", "AUDIENCES_IDENTITY_LIMITS: user_id: a profile has one user id"},
		{"AUDIENCES_IDENTITY_PRIORITY", "email,email", "AUDIENCES_IDENTITY_PRIORITY: \"email\" is empty or listed twice"},
		{"AUDIENCES_IDENTITY_MAX_MERGES", "0", "AUDIENCES_IDENTITY_MAX_MERGES: must be at least 1"},
		{"AUDIENCES_IDENTITY_WINDOW", "-1h", "AUDIENCES_IDENTITY_WINDOW: must be 0 (ever) or more"},
	} {
		if _, err := audiences.ConfigFromEnviron(with(bad.name, bad.value)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s=%s: %v, want %q", bad.name, bad.value, err, bad.want)
		}
	}
}
