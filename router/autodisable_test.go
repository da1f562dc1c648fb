package router

import (
	"slices"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestRouteKeepsAutoDisabledDestinations (docs/delivery.md#auto-disable): an auto-disabled
// destination still gets its deliveries (the deliverer parks them until it is enabled again);
// one disabled by an operator gets none, as before.
func TestRouteKeepsAutoDisabledDestinations(t *testing.T) {
	cfg := mustConfig(t, routeYAML)
	for i := range cfg.Destinations {
		if cfg.Destinations[i].ID == "b-hooks" {
			off := false
			cfg.Destinations[i].Enabled = &off
			cfg.Destinations[i].AutoDisabled = &schemas.AutoDisabled{At: "2026-01-01T00:00:00.000Z", FailingSince: "2025-12-29T00:00:00.000Z", After: schemas.Duration(72 * time.Hour)}
		}
	}
	step := Step{DeliveriesTopic: "out", Config: testConfig{cfg}, FirstAttemptAt: []byte("2026-01-01T00:00:00.000Z")}
	rec := eventRecord(t, "web", `{"type":"track","event":"Order Completed","userId":"u1","messageId":"m1","timestamp":"2026-01-01T00:00:00Z","receivedAt":"2026-01-01T00:00:01Z"}`)
	routed, o, err := step.Route(rec, Deliveries{})
	if err != nil || o != Routed {
		t.Fatalf("outcome %s, err %v", o, err)
	}
	if want := []string{"a-hooks", "b-hooks"}; !slices.Equal(routed.DestinationIDs, want) {
		t.Fatalf("routed to %v, want %v: b-hooks is auto-disabled (parked), off-hooks disabled", routed.DestinationIDs, want)
	}
}
