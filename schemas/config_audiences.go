package schemas

import "time"

// The audiences part of the config model (docs/configuration.md#audience and
// docs/audiences.md): audiences, their rules, and computed traits.

// MaxWithin is the longest window an event condition or computed trait may look back over:
// the audiences service keeps per-user event buckets for 90 days (docs/audiences.md#time-buckets).
const MaxWithin = 90 * 24 * time.Hour

// MaxRuleDepth bounds the nesting of all/any/not in one rule.
const MaxRuleDepth = 10

// Audience is a computed set of users, synced as identify calls with a boolean trait named
// SnakeCase(Name).
type Audience struct {
	ID   string `json:"id" yaml:"id"`
	Name string `json:"name" yaml:"name"`
	// Source is the source id its identify messages are routed as.
	Source string `json:"source" yaml:"source"`
	// Realtime sends a membership change within a second of the event that caused it,
	// instead of at the next sync (window expiry is still found by the sync).
	Realtime bool `json:"realtime,omitempty" yaml:"realtime"`
	Rule     Rule `json:"rule" yaml:"rule"`
	// Output is how membership changes are sent: OutputIdentify (also when empty), OutputTrack
	// or OutputBoth (docs/audiences.md#outputs).
	Output string `json:"output,omitempty" yaml:"output"`
	// Origin: see Source.Origin.
	Origin string `json:"origin,omitempty" yaml:"-"`
}

// TraitKey is the trait an audience sets on its members' identify calls: SnakeCase(Name).
func (a *Audience) TraitKey() string { return SnakeCase(a.Name) }

// Audience outputs (Audience.Output; docs/audiences.md#outputs).
const (
	// OutputIdentify sends an identify with traits {<key>: true|false} (the default).
	OutputIdentify = "identify"
	// OutputTrack sends the track events "Audience Entered" and "Audience Exited".
	OutputTrack = "track"
	// OutputBoth sends the identify and the track event.
	OutputBoth = "both"
)

// Sends reports which calls the audience's membership changes send.
func (a *Audience) Sends() (identify, track bool) {
	switch a.Output {
	case OutputTrack:
		return false, true
	case OutputBoth:
		return true, true
	}
	return true, false
}

// Rule is an audience's rule: one Condition, usually an all or any group.
type Rule = Condition

// Condition is one node of a rule. It is exactly one of:
//   - a group: All (every condition holds), Any (at least one holds) or Not (the condition
//     does not hold);
//   - an event condition: the user sent track Event between AtLeast (default 1) and AtMost
//     times (no upper bound when AtMost is nil) in the last Within (ever when 0), counting
//     only events whose properties match every Where condition;
//   - a trait condition: the user's trait Trait compares as the Comparison says;
//   - a computed-trait condition: the current value of the computed trait with the id
//     ComputedTrait compares as the Comparison says;
//   - an audience condition: the user is a member of the audience with the id Audience
//     (evaluated at the same time, for the same profile; negate it with Not).
//
// An event condition counts over Within, or over Between: [older, newer] counts the events
// between now-older and now-newer ("between 90 and 30 days ago").
type Condition struct {
	All []Condition `json:"all,omitempty" yaml:"all"`
	Any []Condition `json:"any,omitempty" yaml:"any"`
	Not *Condition  `json:"not,omitempty" yaml:"not"`

	Event   string              `json:"event,omitempty" yaml:"event"`
	AtLeast int                 `json:"atLeast,omitempty" yaml:"atLeast"`
	AtMost  *int                `json:"atMost,omitempty" yaml:"atMost"`
	Within  Duration            `json:"within,omitempty" yaml:"within"`
	Between []Duration          `json:"between,omitempty" yaml:"between"`
	Where   []PropertyCondition `json:"where,omitempty" yaml:"where"`

	Trait         string `json:"trait,omitempty" yaml:"trait"`
	ComputedTrait string `json:"computedTrait,omitempty" yaml:"computedTrait"`
	Audience      string `json:"audience,omitempty" yaml:"audience"`
	Comparison
}

// IsEvent reports whether c is an event condition (Event is set).
func (c *Condition) IsEvent() bool { return c.Event != "" }

// MinCount is how many times the event must have happened: AtLeast, or 1 when omitted (0
// when only AtMost is given: "at most 2 times" includes never).
func (c *Condition) MinCount() int {
	switch {
	case c.AtLeast > 0:
		return c.AtLeast
	case c.AtMost != nil:
		return 0
	default:
		return 1
	}
}

// Comparison holds the operators of a trait, computed-trait or property condition; every one
// that is set must hold. Values are strings, numbers (float64 once parsed) or booleans.
type Comparison struct {
	Equals    any `json:"equals,omitempty" yaml:"equals"`
	NotEquals any `json:"notEquals,omitempty" yaml:"notEquals"`
	// Exists true: the value is present and not null; false: absent or null.
	Exists *bool `json:"exists,omitempty" yaml:"exists"`
	// In: the value equals one of these.
	In []any `json:"in,omitempty" yaml:"in"`
	// Contains: a string value contains this text, or a list value has this element.
	Contains any      `json:"contains,omitempty" yaml:"contains"`
	Gt       *float64 `json:"gt,omitempty" yaml:"gt"`
	Gte      *float64 `json:"gte,omitempty" yaml:"gte"`
	Lt       *float64 `json:"lt,omitempty" yaml:"lt"`
	Lte      *float64 `json:"lte,omitempty" yaml:"lte"`
}

// HasOperator reports whether any operator is set.
func (c *Comparison) HasOperator() bool {
	return c.Equals != nil || c.NotEquals != nil || c.Exists != nil || len(c.In) > 0 ||
		c.Contains != nil || c.Gt != nil || c.Gte != nil || c.Lt != nil || c.Lte != nil
}

// PropertyCondition is one where filter of an event condition or a computed trait: the
// event's property at Property (a dotted path inside properties, e.g. "revenue" or
// "product.sku"; a leading "properties." is the same) compares as the Comparison says.
type PropertyCondition struct {
	Property string `json:"property" yaml:"property"`
	Comparison
}

// PropertyPath is Property split at its dots, without a leading "properties".
func (p *PropertyCondition) PropertyPath() []string { return SplitPropertyPath(p.Property) }

// ComputedTrait is a per-user value computed from the user's events and delivered as an
// identify whose traits hold {TraitKey(): value} when the value changed since the last sync.
// Exactly one of Count, Sum, Avg, Min, Max, First, Last, MostFrequent and UniqueList is set.
type ComputedTrait struct {
	ID     string `json:"id" yaml:"id"`
	Name   string `json:"name" yaml:"name"`
	Source string `json:"source" yaml:"source"`
	// Realtime: see Audience.Realtime.
	Realtime bool `json:"realtime,omitempty" yaml:"realtime"`

	Count        *EventAggregate `json:"count,omitempty" yaml:"count"`
	Sum          *EventAggregate `json:"sum,omitempty" yaml:"sum"`
	Avg          *EventAggregate `json:"avg,omitempty" yaml:"avg"`
	Min          *EventAggregate `json:"min,omitempty" yaml:"min"`
	Max          *EventAggregate `json:"max,omitempty" yaml:"max"`
	First        *EventAggregate `json:"first,omitempty" yaml:"first"`
	Last         *EventAggregate `json:"last,omitempty" yaml:"last"`
	MostFrequent *EventAggregate `json:"mostFrequent,omitempty" yaml:"mostFrequent"`
	UniqueList   *EventAggregate `json:"uniqueList,omitempty" yaml:"uniqueList"`

	// Origin: see Source.Origin.
	Origin string `json:"origin,omitempty" yaml:"-"`
}

// Computed-trait kinds: the field of ComputedTrait that is set.
const (
	AggCount        = "count"
	AggSum          = "sum"
	AggAvg          = "avg"
	AggMin          = "min"
	AggMax          = "max"
	AggFirst        = "first"
	AggLast         = "last"
	AggMostFrequent = "mostFrequent"
	AggUniqueList   = "uniqueList"
)

// AggregateKinds lists the computed-trait kinds in the order of the model.
var AggregateKinds = []string{AggCount, AggSum, AggAvg, AggMin, AggMax, AggFirst, AggLast, AggMostFrequent, AggUniqueList}

// UniqueListCap is the most values a uniqueList computed trait holds (the first distinct
// values seen; docs/audiences.md#computed-traits).
const UniqueListCap = 100

// TraitKey is the trait the computed trait sets: SnakeCase(Name).
func (t *ComputedTrait) TraitKey() string { return SnakeCase(t.Name) }

// Aggregate returns the kind that is set and its body ("" and nil when none is).
func (t *ComputedTrait) Aggregate() (string, *EventAggregate) {
	for _, k := range AggregateKinds {
		if a := t.aggregate(k); a != nil {
			return k, a
		}
	}
	return "", nil
}

func (t *ComputedTrait) aggregate(kind string) *EventAggregate {
	switch kind {
	case AggCount:
		return t.Count
	case AggSum:
		return t.Sum
	case AggAvg:
		return t.Avg
	case AggMin:
		return t.Min
	case AggMax:
		return t.Max
	case AggFirst:
		return t.First
	case AggLast:
		return t.Last
	case AggMostFrequent:
		return t.MostFrequent
	case AggUniqueList:
		return t.UniqueList
	}
	return nil
}

// EventAggregate is the body of a computed trait: over the user's track events named Event
// (matching every Where condition), within the last Within (count, sum, avg, min and max
// only; 0: ever), the aggregate of the property at Property (a dotted path as in
// PropertyCondition; not for count).
type EventAggregate struct {
	Event    string              `json:"event" yaml:"event"`
	Property string              `json:"property,omitempty" yaml:"property"`
	Within   Duration            `json:"within,omitempty" yaml:"within"`
	Where    []PropertyCondition `json:"where,omitempty" yaml:"where"`
}

// PropertyPath is Property split at its dots, without a leading "properties".
func (e *EventAggregate) PropertyPath() []string { return SplitPropertyPath(e.Property) }

// SplitPropertyPath splits a property path at its dots and drops a leading "properties"
// segment: "properties.product.sku" and "product.sku" are both [product sku].
func SplitPropertyPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	if len(out) > 1 && out[0] == "properties" {
		out = out[1:]
	}
	return out
}
