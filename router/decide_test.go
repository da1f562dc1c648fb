package router

import (
	"testing"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestIntegrationsAllow is the table of docs/routing.md: every case it lists.
func TestIntegrationsAllow(t *testing.T) {
	for _, c := range []struct {
		name         string
		integrations string
		want         bool
	}{
		{"no integrations object", ``, true},
		{"empty object", `{}`, true},
		{"All true", `{"All":true}`, true},
		{"All false", `{"All":false}`, false},
		{"all false (analytics-go v3 writes it lower case)", `{"all":false}`, false},
		{"all true", `{"all":true}`, true},
		{"All false, Webhooks true", `{"All":false,"Webhooks":true}`, true},
		{"all false, Webhooks true", `{"all":false,"Webhooks":true}`, true},
		{"All true, Webhooks false", `{"All":true,"Webhooks":false}`, false},
		{"Webhooks false alone", `{"Webhooks":false}`, false},
		{"Webhooks true alone", `{"Webhooks":true}`, true},
		{"Webhooks options object counts as enabled", `{"All":false,"Webhooks":{"note":"x"}}`, true},
		{"lower-case webhooks is another destination", `{"webhooks":false}`, true},
		{"lower-case webhooks does not re-enable", `{"All":false,"webhooks":true}`, false},
		{"WEBHOOKS is another destination", `{"WEBHOOKS":false}`, true},
		{"other destination switched off", `{"Mixpanel":false}`, true},
		{"other destination switched on under All false", `{"All":false,"Mixpanel":true}`, false},
		{"All wins over all when both are set", `{"All":true,"all":false}`, true},
		{"all decides when All is not a boolean", `{"All":"no","all":false}`, false},
		{"null Webhooks is no switch", `{"All":false,"Webhooks":null}`, false},
		{"string Webhooks is no switch", `{"Webhooks":"false"}`, true},
		{"number All is no switch", `{"All":0}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := IntegrationsAllow([]byte(c.integrations), schemas.IntegrationWebhooks); got != c.want {
				t.Errorf("IntegrationsAllow(%s) = %v, want %v", c.integrations, got, c.want)
			}
		})
	}
}

func TestBlockedByTrackingPlan(t *testing.T) {
	planned := &schemas.Source{ID: "web", TrackingPlan: &schemas.TrackingPlan{BlockedEvents: []string{"Debug Event", "Test"}}}
	unplanned := &schemas.Source{ID: "app"}
	for _, c := range []struct {
		name string
		src  *schemas.Source
		v    schemas.RoutingView
		want bool
	}{
		{"blocked track event", planned, schemas.RoutingView{Type: "track", Event: "Debug Event"}, true},
		{"second blocked name", planned, schemas.RoutingView{Type: "track", Event: "Test"}, true},
		{"names are case-sensitive", planned, schemas.RoutingView{Type: "track", Event: "debug event"}, false},
		{"no trailing-space match", planned, schemas.RoutingView{Type: "track", Event: "Debug Event "}, false},
		{"other event passes", planned, schemas.RoutingView{Type: "track", Event: "Order Completed"}, false},
		{"only track calls are filtered", planned, schemas.RoutingView{Type: "page", Event: "Debug Event"}, false},
		{"identify passes", planned, schemas.RoutingView{Type: "identify"}, false},
		{"source without a plan", unplanned, schemas.RoutingView{Type: "track", Event: "Debug Event"}, false},
		{"empty plan", &schemas.Source{TrackingPlan: &schemas.TrackingPlan{}}, schemas.RoutingView{Type: "track", Event: "Debug Event"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := BlockedByTrackingPlan(c.src, &c.v); got != c.want {
				t.Errorf("BlockedByTrackingPlan = %v, want %v", got, c.want)
			}
		})
	}
}
