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
		Bad: []servicetest.Bad{
			{Variable: "ROUTER_EXACTLY_ONCE", Value: "maybe"},
			{Variable: "ROUTER_TRANSACTION_TIMEOUT", Value: "999ms"},
			{Variable: "ROUTER_TRANSACTION_TIMEOUT", Value: "long"},
			{Variable: "SHUTDOWN_TIMEOUT", Value: "0s"},
			{Variable: "SHUTDOWN_TIMEOUT", Value: "x"},
		},
		Unusable: func() error {
			c := router.DefaultConfig()
			c.TransactionalID, c.TransactionTimeout, c.ShutdownTimeout = "", 0, 0
			return c.Validate()
		},
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
