package deliverer_test

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// newVirtualHarness is newHarness on kfake's virtual network, for tests inside a
// testing/synctest bubble: time is virtual, so a test of retry timing is exact and takes no
// real time. Its deliverers dial the webhook endpoints through the same network
// (h.env.VirtualReceiver).
func newVirtualHarness(t *testing.T, schedule string, yaml string) *harness {
	t.Helper()
	sched, err := schemas.ParseRetrySchedule(schedule)
	if err != nil {
		t.Fatal(err)
	}
	e := servicetest.New(t, servicetest.Options{Config: yaml, RetrySchedule: sched, LogLevel: zerolog.ErrorLevel, Virtual: true})
	return &harness{env: e, t: t, ctx: e.Ctx, kafka: e.Kafka, cl: e.Client, store: e.Store, logger: e.Logger, schedule: schedule,
		dial: e.Network.DialContext}
}
