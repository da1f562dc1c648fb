package schemas

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Plan is a tracking plan (docs/routing.md#tracking-plans): a JSON Schema for the properties
// of each planned track event, for identify and group traits, and a common schema for every
// call. A source connects to one with trackingPlan.planId. It is one record of TopicConfig,
// key "tracking-plan/<id>".
type Plan struct {
	// ID is unique among tracking plans: lower-case letters, digits, '-' and '_'.
	ID    string    `json:"id" yaml:"id"`
	Name  string    `json:"name,omitempty" yaml:"name"`
	Rules PlanRules `json:"rules" yaml:"rules"`
	// Origin: see Source.Origin.
	Origin string `json:"origin,omitempty" yaml:"-"`

	// compiled is set by check (Validate, DecodeConfigRecord): the plan's schemas compiled
	// once per version of the plan, shared by every config snapshot that holds it.
	compiled *CompiledPlan
}

// PlanRules are the schemas of a tracking plan. Each schema is a JSON Schema (draft 2020-12
// unless it names another with $schema), given inline in YAML or JSON.
type PlanRules struct {
	// Common validates the whole of every track, identify and group call.
	Common json.RawMessage `json:"common,omitempty" yaml:"common"`
	// Events are the planned track events: a track call whose event is not among them is
	// unplanned.
	Events []PlanEvent `json:"events,omitempty" yaml:"events"`
	// Identify validates the traits of identify calls; Group those of group calls.
	Identify json.RawMessage `json:"identify,omitempty" yaml:"identify"`
	Group    json.RawMessage `json:"group,omitempty" yaml:"group"`
}

// PlanEvent is one planned track event.
type PlanEvent struct {
	// Name is the event name, case-sensitive, unique in the plan.
	Name string `json:"name" yaml:"name"`
	// Properties validates the event's properties (omitted: any properties).
	Properties json.RawMessage `json:"properties,omitempty" yaml:"properties"`
}

// Compiled returns the plan's compiled schemas: set once the plan passed Validate (a config
// file) or was decoded from its record (DecodeConfigRecord); nil before.
func (p *Plan) Compiled() *CompiledPlan { return p.compiled }

// Validate checks the plan's own rules and compiles its schemas (Compiled); error paths are
// relative to the plan.
func (p *Plan) Validate() error {
	v := &validator{}
	p.check(v, "")
	return v.errs.errOrNil()
}

func (p *Plan) check(v *validator, path string) {
	v.id(fieldPath(path, "id"), p.ID)
	rp := fieldPath(path, "rules")
	ep := fieldPath(rp, "events")
	seen := map[string]int{}
	for i, e := range p.Rules.Events {
		np := fieldPath(indexPath(ep, i), "name")
		switch first, dup := seen[e.Name]; {
		case e.Name == "":
			v.addf(np, "is required")
		case dup:
			v.addf(np, "event %q is planned twice (first at %s)", e.Name, indexPath(ep, first))
		default:
			seen[e.Name] = i
		}
	}
	c, errs := compilePlan(p)
	for _, e := range errs {
		v.addf(fieldPath(rp, e.path), "is not a valid JSON Schema: %s", e.msg)
	}
	if len(errs) == 0 {
		p.compiled = c
	}
}

func (p *Plan) objectID() string { return p.ID }

// Record returns the tracking plan's TopicConfig record after Validate.
func (p *Plan) Record() (ConfigRecord, error) {
	if err := p.Validate(); err != nil {
		return ConfigRecord{}, fmt.Errorf("tracking plan %q: %w", p.ID, err)
	}
	return marshalRecord(ConfigKeyTrackingPlan+p.ID, p)
}

// ConfigKeyTrackingPlan starts the key of a tracking plan: "tracking-plan/<id>".
const ConfigKeyTrackingPlan = "tracking-plan/"

// ConfigKindTrackingPlan is a tracking plan: key "tracking-plan/<id>".
const ConfigKindTrackingPlan ConfigKind = "tracking-plan"

// Values of TrackingPlan.Common*EventOnViolations.
const (
	PlanAllow = "ALLOW"
	PlanBlock = "BLOCK"
)

// HasSchemas reports whether the source's tracking plan connects a plan (planId), beyond the
// blocked event names.
func (t *TrackingPlan) HasSchemas() bool { return t != nil && t.PlanID != "" }

// allowed is the value of an Allow* option: omitted is true (Segment's default).
func allowed(b *bool) bool { return b == nil || *b }

// BlockUnplannedTrack reports whether unplanned track events are blocked.
func (t *TrackingPlan) BlockUnplannedTrack() bool { return !allowed(t.AllowUnplannedTrackEvents) }

// OmitUnplanned reports whether the unplanned properties (track) or traits (identify, group) of
// calls of type typ are omitted.
func (t *TrackingPlan) OmitUnplanned(typ string) bool {
	switch typ {
	case TypeTrack:
		return !allowed(t.AllowUnplannedTrackEventProperties)
	case TypeIdentify:
		return !allowed(t.AllowUnplannedIdentifyTraits)
	case TypeGroup:
		return !allowed(t.AllowUnplannedGroupTraits)
	}
	return false
}

// OmitInvalid reports whether the properties (track) or traits (identify, group) with a
// violation are omitted from calls of type typ.
func (t *TrackingPlan) OmitInvalid(typ string) bool {
	switch typ {
	case TypeTrack:
		return !allowed(t.AllowTrackPropertiesOnViolations)
	case TypeIdentify:
		return !allowed(t.AllowIdentifyTraitsOnViolations)
	case TypeGroup:
		return !allowed(t.AllowGroupTraitsOnViolations)
	}
	return false
}

// BlockOnViolations reports whether a call of type typ with a violation of its event's schema
// (track only) is blocked; common reports the same for a violation of the common schema.
func (t *TrackingPlan) BlockOnViolations(typ string) (schema, common bool) {
	switch typ {
	case TypeTrack:
		return !allowed(t.AllowTrackEventOnViolations), t.CommonTrackEventOnViolations == PlanBlock
	case TypeIdentify:
		return false, t.CommonIdentifyEventOnViolations == PlanBlock
	case TypeGroup:
		return false, t.CommonGroupEventOnViolations == PlanBlock
	}
	return false, false
}

// checkPlan checks a source's trackingPlan beyond blockedEvents; that planId names a plan and
// the forwarding sources exist is Config.Validate's job (checkPlanRefs).
func (t *TrackingPlan) checkPlan(v *validator, p string) {
	if t.PlanID != "" && !validID(t.PlanID) {
		v.addf(fieldPath(p, "planId"), "%q must contain only a-z, 0-9, '-' and '_'", t.PlanID)
	}
	for _, f := range [...]struct{ name, value string }{
		{"commonTrackEventOnViolations", t.CommonTrackEventOnViolations},
		{"commonIdentifyEventOnViolations", t.CommonIdentifyEventOnViolations},
		{"commonGroupEventOnViolations", t.CommonGroupEventOnViolations},
	} {
		if f.value != "" && f.value != PlanAllow && f.value != PlanBlock {
			v.addf(fieldPath(p, f.name), "must be %q or %q, got %q", PlanAllow, PlanBlock, f.value)
		}
	}
	if t.PlanID == "" && (t.ForwardingViolationsTo != "" || t.ForwardingBlockedEventsTo != "" || t.hasOptions()) {
		v.addf(fieldPath(p, "planId"), "is required with the tracking plan options (allow*, common*, forwarding*)")
	}
}

func (t *TrackingPlan) hasOptions() bool {
	return slices.ContainsFunc([]*bool{t.AllowUnplannedTrackEvents, t.AllowUnplannedTrackEventProperties,
		t.AllowTrackEventOnViolations, t.AllowTrackPropertiesOnViolations, t.AllowUnplannedIdentifyTraits,
		t.AllowIdentifyTraitsOnViolations, t.AllowUnplannedGroupTraits, t.AllowGroupTraitsOnViolations},
		func(b *bool) bool { return b != nil }) ||
		t.CommonTrackEventOnViolations != "" || t.CommonIdentifyEventOnViolations != "" || t.CommonGroupEventOnViolations != ""
}

// validatePlans checks the tracking plans of a config (ids unique, schemas valid) and the
// sources' references to them and to the forwarding sources.
func (c *Config) validatePlans(v *validator, sourceIDs map[string]string) {
	planIDs := map[string]string{}
	for i := range c.TrackingPlans {
		p := indexPath("trackingPlans", i)
		c.TrackingPlans[i].check(v, p)
		v.unique(planIDs, c.TrackingPlans[i].ID, fieldPath(p, "id"))
	}
	for i := range c.Sources {
		s := &c.Sources[i]
		t := s.TrackingPlan
		if t == nil {
			continue
		}
		tp := fieldPath(indexPath("sources", i), "trackingPlan")
		if _, ok := planIDs[t.PlanID]; t.PlanID != "" && validID(t.PlanID) && !ok {
			v.addf(fieldPath(tp, "planId"), "unknown tracking plan %q", t.PlanID)
		}
		for _, f := range [...]struct{ name, value string }{
			{"forwardingViolationsTo", t.ForwardingViolationsTo}, {"forwardingBlockedEventsTo", t.ForwardingBlockedEventsTo},
		} {
			switch _, ok := sourceIDs[f.value]; {
			case f.value == "":
			case f.value == s.ID:
				v.addf(fieldPath(tp, f.name), "must name another source than %q itself", s.ID)
			case !ok:
				v.addf(fieldPath(tp, f.name), "unknown source %q", f.value)
			}
		}
	}
}
