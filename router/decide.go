package router

import (
	"slices"

	"github.com/tributary-cdp/tributary/schemas"
)

// Outcome is what the router did with one message, for one destination or for all of them.
// Its string is the "outcome" label of tributary_router_messages_total.
type Outcome string

// Outcomes of routing one message.
const (
	// Routed: at least one delivery record was written.
	Routed Outcome = "routed"
	// NoDestination: no destination of the source took the message (none connected or
	// enabled, or every one switched off by the integrations object).
	NoDestination Outcome = "no_destination"
	// BlockedByPlan: a track event named in the source's trackingPlan.blockedEvents.
	BlockedByPlan Outcome = "blocked_tracking_plan"
	// Suppressed: the user is on the suppression list.
	Suppressed Outcome = "suppressed"
	// Duplicate: the router routed a message with the same source and messageId within
	// DEDUPE_WINDOW; this one is dropped.
	Duplicate Outcome = "duplicate"
	// UnknownSource: the source-id header names no source of the current config.
	UnknownSource Outcome = "unknown_source"
	// Invalid: the record is not a tracking.events message (no source-id header, or a body
	// that is not a JSON object). It is logged by offset and skipped.
	Invalid Outcome = "invalid"
	// Deleted: the message is sealed with a data key that was shredded (its user was
	// deleted, docs/security.md#crypto-shredding): it is dropped.
	Deleted Outcome = "deleted"
)

// Integrations keys the router honours (docs/routing.md#integrations-switches).
const (
	// keyAll is the catch-all switch; keyAllLower is the same, as analytics-go v3 writes it.
	keyAll      = "All"
	keyAllLower = "all"
)

// IntegrationsAllow applies the integrations switches of docs/routing.md#integrations-switches to a destination whose
// integrations key is destKey ("Webhooks"):
//
//   - no integrations object, or no switch that concerns the destination: enabled;
//   - destKey true (or an object of options): enabled, whatever "All" says;
//   - destKey false: disabled;
//   - otherwise "All" (or "all", when "All" is absent) decides.
//
// Keys are case-sensitive except the catch-all: "webhooks" does not switch "Webhooks".
func IntegrationsAllow(integrations []byte, destKey string) bool {
	if len(integrations) == 0 {
		return true
	}
	if on, set := schemas.IntegrationSetting(integrations, destKey); set {
		return on
	}
	if on, set := schemas.IntegrationSetting(integrations, keyAll); set {
		return on
	}
	if on, set := schemas.IntegrationSetting(integrations, keyAllLower); set {
		return on
	}
	return true
}

// BlockedByTrackingPlan reports whether the source's tracking plan stops this message: a
// track call whose event name (case-sensitive) is in trackingPlan.blockedEvents.
func BlockedByTrackingPlan(src *schemas.Source, v *schemas.RoutingView) bool {
	if src.TrackingPlan == nil || v.Type != schemas.TypeTrack {
		return false
	}
	return slices.Contains(src.TrackingPlan.BlockedEvents, v.Event)
}

// integrationsKey is the integrations key of a destination type: "Webhooks" for webhooks.
func integrationsKey(destType string) string {
	if destType == schemas.DestinationTypeWebhooks {
		return schemas.IntegrationWebhooks
	}
	return destType
}
