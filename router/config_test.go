package router_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/router"
)

func TestConfigFromEnvironWithoutVariablesIsDefaultConfig(t *testing.T) {
	c, err := router.ConfigFromEnviron(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if want := router.DefaultConfig(); !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

func TestConfigFromEnvironReadsEverySetting(t *testing.T) {
	c, err := router.ConfigFromEnviron(map[string]string{
		"ROUTER_EXACTLY_ONCE":        "false",
		"ROUTER_TRANSACTIONAL_ID":    " router-0 ",
		"ROUTER_TRANSACTION_TIMEOUT": "30s",
		"SHUTDOWN_TIMEOUT":           "4s",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := router.DefaultConfig()
	want.ExactlyOnce, want.TransactionalID, want.TransactionTimeout, want.ShutdownTimeout = false, "router-0", 30*time.Second, 4*time.Second
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

func TestConfigSettingErrorsNameTheVariable(t *testing.T) {
	for _, tt := range []struct{ variable, value string }{
		{"ROUTER_EXACTLY_ONCE", "maybe"},
		{"ROUTER_TRANSACTION_TIMEOUT", "999ms"},
		{"ROUTER_TRANSACTION_TIMEOUT", "long"},
		{"SHUTDOWN_TIMEOUT", "0s"},
		{"SHUTDOWN_TIMEOUT", "x"},
	} {
		t.Run(tt.variable+"="+tt.value, func(t *testing.T) {
			_, err := router.ConfigFromEnviron(map[string]string{tt.variable: tt.value})
			if err == nil || !strings.Contains(err.Error(), tt.variable+": ") {
				t.Errorf("error = %v, want one naming %s", err, tt.variable)
			}
		})
	}
	c := router.DefaultConfig()
	c.TransactionalID, c.TransactionTimeout, c.ShutdownTimeout = "", 0, 0
	err := c.Validate()
	for _, v := range []string{"ROUTER_TRANSACTIONAL_ID", "ROUTER_TRANSACTION_TIMEOUT", "SHUTDOWN_TIMEOUT"} {
		if err == nil || !strings.Contains(err.Error(), v+": ") {
			t.Errorf("Validate = %v, want every problem, %s among them", err, v)
		}
	}
	// At least once needs neither a transactional id nor a transaction timeout.
	c = router.DefaultConfig()
	c.ExactlyOnce, c.TransactionalID, c.TransactionTimeout = false, "", 0
	if err := c.Validate(); err != nil {
		t.Errorf("at least once without a transactional id: %v", err)
	}
}
