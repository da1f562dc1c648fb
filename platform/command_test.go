package platform

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestNewCommand(t *testing.T) {
	t.Setenv("KAFKA_BROKERS", "")
	if _, err := NewCommand(); err == nil || !strings.Contains(err.Error(), "KAFKA_BROKERS") {
		t.Fatalf("no brokers: %v, want an error naming KAFKA_BROKERS", err)
	}
	t.Setenv("KAFKA_BROKERS", "127.0.0.1:1")
	t.Setenv("LOG_LEVEL", "loud")
	if _, err := NewCommand(); err == nil || !strings.Contains(err.Error(), "loud") {
		t.Fatalf("bad LOG_LEVEL: %v", err)
	}
	t.Setenv("LOG_LEVEL", "warn")
	t.Setenv("METRICS_ADDR", "")
	c, err := NewCommand()
	if err != nil {
		t.Fatal(err)
	}
	if c.Store == nil || c.Registry == nil || c.Health == nil || len(c.Kafka.Brokers) != 1 {
		t.Fatalf("command %+v", c)
	}
	if ready, _ := c.Health.Check(context.Background()); ready {
		t.Fatal("ready before the config is loaded")
	}
	// The dependencies handed to the service are the command's; /metrics on its API.
	if d := c.Deps(); len(d.Kafka.Brokers) != 1 || d.Registerer != c.Registry || d.Gatherer != c.Registry || d.Health != c.Health {
		t.Fatalf("Deps %+v, want the command's Kafka settings, registry and health", d)
	}
	if got := c.MetricsServer("127.0.0.1:9101").Addr(); got != "127.0.0.1:9101" {
		t.Fatalf("default metrics address %q", got)
	}
	t.Setenv("METRICS_ADDR", "127.0.0.1:0")
	t.Setenv("SHUTDOWN_TIMEOUT", "3s")
	if c, err = NewCommand(); err != nil {
		t.Fatal(err)
	}
	if got := c.MetricsServer("127.0.0.1:9101").Addr(); got != "127.0.0.1:0" {
		t.Fatalf("METRICS_ADDR ignored: %q", got)
	}
	if d := c.Deps(); d.Gatherer != nil || d.Registerer != c.Registry {
		t.Fatalf("METRICS_ADDR set: Deps' Gatherer %v, want none (/metrics off the API's port)", d.Gatherer)
	}
	if c.ShutdownTimeout != 3*time.Second || c.Settings.ShutdownTimeout != 3*time.Second {
		t.Fatalf("SHUTDOWN_TIMEOUT ignored: %s", c.ShutdownTimeout)
	}
	t.Setenv("SHUTDOWN_TIMEOUT", "0s")
	if _, err := NewCommand(); err == nil || !strings.Contains(err.Error(), "SHUTDOWN_TIMEOUT") {
		t.Fatalf("SHUTDOWN_TIMEOUT=0s: %v, want an error naming SHUTDOWN_TIMEOUT", err)
	}
}
