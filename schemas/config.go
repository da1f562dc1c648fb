package schemas

// The tenant config model (docs/configuration.md). A config file (YAML or JSON) holds lists of sources,
// destinations and audiences; each object is also one record of the compacted topic
// TopicConfig, keyed by ConfigKey*, with the object's JSON as value (see Config.Records).
//
// Field names are a public contract: they are exactly those of
// docs/configuration.md, which describes each field and every validation rule.

// Config is one tenant config file.
type Config struct {
	Sources      []Source      `json:"sources,omitempty" yaml:"sources"`
	Destinations []Destination `json:"destinations,omitempty" yaml:"destinations"`
	Audiences    []Audience    `json:"audiences,omitempty" yaml:"audiences"`
	// ComputedTraits are per-user values computed from events (docs/audiences.md).
	ComputedTraits []ComputedTrait `json:"computedTraits,omitempty" yaml:"computedTraits"`
	// TrackingPlans are the schemas sources are checked against (docs/routing.md#tracking-plans).
	TrackingPlans []Plan `json:"trackingPlans,omitempty" yaml:"trackingPlans"`
	// Console is the console's own config: its user list (docs/console.md#users-roles-and-tokens).
	Console *ConsoleConfig `json:"console,omitempty" yaml:"console"`
	// Identity are the audiences service's identity rules (docs/audiences.md#identity-rules).
	Identity *IdentityRules `json:"identity,omitempty" yaml:"identity"`

	// lines maps a field path ("sources[0].id") to its line in the parsed file, so that
	// Validate can say where a problem is. It is nil for a config built in code.
	lines map[string]int
}

// Source is an application or producer that sends messages with one write key.
type Source struct {
	// ID is unique among sources: lower-case letters, digits, '-' and '_'.
	ID   string `json:"id" yaml:"id"`
	Name string `json:"name,omitempty" yaml:"name"`
	// WriteKey is the secret clients send (HTTP Basic user name). It is never stored at rest:
	// the config store writes WriteKeyHash instead.
	WriteKey string `json:"writeKey,omitempty" yaml:"writeKey"`
	// WriteKeyHash is "sha256:<lower-case hex>" of the write key. A config file may give it
	// instead of WriteKey, to keep the secret out of version control.
	WriteKeyHash string `json:"writeKeyHash,omitempty" yaml:"writeKeyHash"`
	// PreviousWriteKeyHash is the hash of the write key a rotation replaced: ingest still
	// accepts that key until PreviousWriteKeyExpiresAt, so clients can move to the new key
	// without losing a message. Both are set together (the console's key rotation sets them).
	PreviousWriteKeyHash string `json:"previousWriteKeyHash,omitempty" yaml:"previousWriteKeyHash"`
	// PreviousWriteKeyExpiresAt is when the previous key stops working (ISO-8601, UTC).
	PreviousWriteKeyExpiresAt string        `json:"previousWriteKeyExpiresAt,omitempty" yaml:"previousWriteKeyExpiresAt"`
	TrackingPlan              *TrackingPlan `json:"trackingPlan,omitempty" yaml:"trackingPlan"`
	// Origin is who manages the object (docs/configuration.md#declarative-config): "file:<name>"
	// for a config file, "console" for the console. It is set when the object is written to
	// tributary.config, never read from a config file.
	Origin string `json:"origin,omitempty" yaml:"-"`
}

// TrackingPlan filters a source's track calls by event name and, with PlanID, checks its
// calls against a tracking plan (docs/routing.md#tracking-plans). The options are Segment's
// schema settings, under their Public API names; an omitted Allow* option is true.
type TrackingPlan struct {
	// BlockedEvents are track event names (case-sensitive) that reach no destination.
	BlockedEvents []string `json:"blockedEvents,omitempty" yaml:"blockedEvents"`
	// PlanID names the tracking plan (Config.TrackingPlans) the source's calls are checked against.
	PlanID                             string `json:"planId,omitempty" yaml:"planId"`
	AllowUnplannedTrackEvents          *bool  `json:"allowUnplannedTrackEvents,omitempty" yaml:"allowUnplannedTrackEvents"`
	AllowUnplannedTrackEventProperties *bool  `json:"allowUnplannedTrackEventProperties,omitempty" yaml:"allowUnplannedTrackEventProperties"`
	AllowTrackEventOnViolations        *bool  `json:"allowTrackEventOnViolations,omitempty" yaml:"allowTrackEventOnViolations"`
	AllowTrackPropertiesOnViolations   *bool  `json:"allowTrackPropertiesOnViolations,omitempty" yaml:"allowTrackPropertiesOnViolations"`
	AllowUnplannedIdentifyTraits       *bool  `json:"allowUnplannedIdentifyTraits,omitempty" yaml:"allowUnplannedIdentifyTraits"`
	AllowIdentifyTraitsOnViolations    *bool  `json:"allowIdentifyTraitsOnViolations,omitempty" yaml:"allowIdentifyTraitsOnViolations"`
	AllowUnplannedGroupTraits          *bool  `json:"allowUnplannedGroupTraits,omitempty" yaml:"allowUnplannedGroupTraits"`
	AllowGroupTraitsOnViolations       *bool  `json:"allowGroupTraitsOnViolations,omitempty" yaml:"allowGroupTraitsOnViolations"`
	// Common*EventOnViolations: PlanAllow (omitted) or PlanBlock a call that violates the
	// plan's common schema.
	CommonTrackEventOnViolations    string `json:"commonTrackEventOnViolations,omitempty" yaml:"commonTrackEventOnViolations"`
	CommonIdentifyEventOnViolations string `json:"commonIdentifyEventOnViolations,omitempty" yaml:"commonIdentifyEventOnViolations"`
	CommonGroupEventOnViolations    string `json:"commonGroupEventOnViolations,omitempty" yaml:"commonGroupEventOnViolations"`
	// ForwardingViolationsTo is a source that gets one "Violation Generated" track call per
	// violation; ForwardingBlockedEventsTo a source that gets the blocked calls.
	ForwardingViolationsTo    string `json:"forwardingViolationsTo,omitempty" yaml:"forwardingViolationsTo"`
	ForwardingBlockedEventsTo string `json:"forwardingBlockedEventsTo,omitempty" yaml:"forwardingBlockedEventsTo"`
}

// Destination receives the messages of its sources. The only type is "webhooks".
type Destination struct {
	ID   string `json:"id" yaml:"id"`
	Type string `json:"type" yaml:"type"`
	Name string `json:"name,omitempty" yaml:"name"`
	// Enabled switches delivery on; when the field is omitted the destination is enabled.
	Enabled  *bool               `json:"enabled,omitempty" yaml:"enabled"`
	Sources  []string            `json:"sources" yaml:"sources"`
	Settings DestinationSettings `json:"settings" yaml:"settings"`
	// Filters decide what the destination gets of its sources' messages
	// (docs/routing.md#destination-filters).
	Filters []DestinationFilter `json:"filters,omitempty" yaml:"filters"`
	// AutoDisabled is set, with Enabled false, by the deliverer that disabled the destination
	// after settings.autoDisable.after of failures (docs/delivery.md#auto-disable); it is never
	// read from a config file. Enabling the destination again clears it.
	AutoDisabled *AutoDisabled `json:"autoDisabled,omitempty" yaml:"-"`
	// Origin: see Source.Origin.
	Origin string `json:"origin,omitempty" yaml:"-"`
}

// IsEnabled reports whether the destination delivers: Enabled is true or omitted.
func (d *Destination) IsEnabled() bool { return d.Enabled == nil || *d.Enabled }

// IsAutoDisabled reports whether the destination is disabled by auto-disable
// (docs/delivery.md#auto-disable): its messages are still routed, and parked.
func (d *Destination) IsAutoDisabled() bool { return !d.IsEnabled() && d.AutoDisabled != nil }

// Routed reports whether the router writes deliveries for the destination: it is enabled, or
// auto-disabled (its deliveries are parked until it is enabled again).
func (d *Destination) Routed() bool { return d.IsEnabled() || d.AutoDisabled != nil }

// AutoDisabled says when and why a destination was auto-disabled.
type AutoDisabled struct {
	// At is when it was disabled (RFC 3339, milliseconds, UTC).
	At string `json:"at"`
	// FailingSince is the first failed attempt after its last delivered message.
	FailingSince string `json:"failingSince"`
	// After is the budget it used up: settings.autoDisable.after then.
	After Duration `json:"after"`
}

// AutoDisable is settings.autoDisable of a destination (docs/delivery.md#auto-disable).
type AutoDisable struct {
	// After is how long every attempt of the destination may fail, with none delivered,
	// before it is disabled; at least a second.
	After Duration `json:"after" yaml:"after"`
}

// DestinationSettings are the settings of a webhooks destination (docs/configuration.md#destination).
type DestinationSettings struct {
	// Webhooks holds 1 to MaxWebhooks entries.
	Webhooks []Webhook `json:"webhooks" yaml:"webhooks"`
	// SharedSecret, when set, signs every body: X-Signature = hex HMAC-SHA1.
	SharedSecret string `json:"sharedSecret,omitempty" yaml:"sharedSecret"`
	// StandardWebhooks also sends webhook-id, webhook-timestamp and webhook-signature
	// (HMAC-SHA256, https://www.standardwebhooks.com); it needs SharedSecret.
	StandardWebhooks bool `json:"standardWebhooks,omitempty" yaml:"standardWebhooks"`
	// PreviousSharedSecret still signs during a secret rotation.
	PreviousSharedSecret string `json:"previousSharedSecret,omitempty" yaml:"previousSharedSecret"`
	// MaxRequestsPerSecond paces this destination (0: no limit); nothing is dropped.
	MaxRequestsPerSecond float64 `json:"maxRequestsPerSecond,omitempty" yaml:"maxRequestsPerSecond"`
	// MaxConcurrency caps the requests in flight to each endpoint host of this destination
	// (0: the adaptive limit alone, up to DELIVERER_MAX_PER_HOST); the destination then has
	// its own limit and circuit breaker for the host, apart from other destinations on it.
	MaxConcurrency int `json:"maxConcurrency,omitempty" yaml:"maxConcurrency"`
	// Ordering is OrderingPerUser to deliver each user's messages in order, or empty (the
	// default): concurrently, a retried message overtaken by later ones
	// (docs/delivery.md#ordering).
	Ordering string `json:"ordering,omitempty" yaml:"ordering"`
	// AutoDisable, when set, disables the destination once its attempts have all failed for
	// AutoDisable.After (docs/delivery.md#auto-disable); nil: never (the default).
	AutoDisable *AutoDisable `json:"autoDisable,omitempty" yaml:"autoDisable"`
}

// OrderingPerUser is the DestinationSettings.Ordering that keeps each user's messages in order
// (docs/delivery.md#ordering).
const OrderingPerUser = "perUser"

// OrderedPerUser reports whether the destination delivers each user's messages in order.
func (st *DestinationSettings) OrderedPerUser() bool { return st.Ordering == OrderingPerUser }

// Webhook is one endpoint of a destination.
type Webhook struct {
	// URL is absolute, with the http or https scheme.
	URL string `json:"url" yaml:"url"`
	// Headers are static headers added to every request to URL.
	Headers map[string]string `json:"headers,omitempty" yaml:"headers"`
}

// Config record key prefixes of TopicConfig.
const (
	ConfigKeySource      = "source/"
	ConfigKeyDestination = "destination/"
	ConfigKeyAudience    = "audience/"
	// ConfigKeyComputedTrait starts the key of a computed trait: "computed-trait/<id>".
	ConfigKeyComputedTrait = "computed-trait/"
)

// MaxWebhooks is the most webhook entries one destination may have (docs/configuration.md#destination).
const MaxWebhooks = 5

// DestinationTypeWebhooks is the only destination type; IntegrationWebhooks is its key in a
// message's integrations object (docs/routing.md#integrations-switches).
const (
	DestinationTypeWebhooks = "webhooks"
	IntegrationWebhooks     = "Webhooks"
)
