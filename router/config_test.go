package router_test

import (
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/router"
)

func TestConfigFromEnviron(t *testing.T) {
	servicetest.Settings[router.Config]{
		FromEnviron: router.ConfigFromEnviron,
		Default:     router.DefaultConfig(),
		Every: map[string]string{
			"ROUTER_EXACTLY_ONCE":        "false",
			"ROUTER_TRANSACTIONAL_ID":    " router-0 ",
			"ROUTER_TRANSACTION_TIMEOUT": "30s",
			"SHUTDOWN_TIMEOUT":           "4s",
		},
		Want: func(c *router.Config) {
			c.ExactlyOnce, c.TransactionalID, c.TransactionTimeout, c.ShutdownTimeout = false, "router-0", 30*time.Second, 4*time.Second
		},
		Bad: map[string][]string{
			"ROUTER_EXACTLY_ONCE":        {"maybe"},
			"ROUTER_TRANSACTION_TIMEOUT": {"999ms", "long"},
			"SHUTDOWN_TIMEOUT":           {"0s", "x"},
		},
		Unusable:      func(c *router.Config) { c.TransactionalID, c.TransactionTimeout, c.ShutdownTimeout = "", 0, 0 },
		Validate:      (*router.Config).Validate,
		UnusableNamed: []string{"ROUTER_TRANSACTIONAL_ID", "ROUTER_TRANSACTION_TIMEOUT", "SHUTDOWN_TIMEOUT"},
	}.Run(t)
}

// TestConfigAtLeastOnceNeedsNoTransaction: at least once needs neither a transactional id nor
// a transaction timeout.
func TestConfigAtLeastOnceNeedsNoTransaction(t *testing.T) {
	c := router.DefaultConfig()
	c.ExactlyOnce, c.TransactionalID, c.TransactionTimeout = false, "", 0
	if err := c.Validate(); err != nil {
		t.Errorf("at least once without a transactional id: %v", err)
	}
}
