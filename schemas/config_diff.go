package schemas

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Origins of config objects (docs/configuration.md#declarative-config).
const (
	// OriginConsole marks objects created or taken over by the console.
	OriginConsole = "console"
	// OriginFilePrefix starts the origin of objects a config file manages: "file:<name>".
	OriginFilePrefix = "file:"
)

// FileOrigin is the origin of the objects of the config file named name (its base name,
// e.g. "dev.yaml").
func FileOrigin(name string) string { return OriginFilePrefix + name }

// Origin returns who manages the object ("" for a tombstone, or an object written before
// origins existed).
func (o ConfigObject) Origin() string {
	switch {
	case o.Source != nil:
		return o.Source.Origin
	case o.Destination != nil:
		return o.Destination.Origin
	case o.Audience != nil:
		return o.Audience.Origin
	case o.ComputedTrait != nil:
		return o.ComputedTrait.Origin
	case o.TrackingPlan != nil:
		return o.TrackingPlan.Origin
	case o.ConsoleUser != nil:
		return o.ConsoleUser.Origin
	case o.APIToken != nil:
		return o.APIToken.Origin
	case o.Identity != nil:
		return o.Identity.Origin
	}
	return ""
}

// SetOrigin sets the object's origin.
func (o ConfigObject) SetOrigin(origin string) {
	switch {
	case o.Source != nil:
		o.Source.Origin = origin
	case o.Destination != nil:
		o.Destination.Origin = origin
	case o.Audience != nil:
		o.Audience.Origin = origin
	case o.ComputedTrait != nil:
		o.ComputedTrait.Origin = origin
	case o.TrackingPlan != nil:
		o.TrackingPlan.Origin = origin
	case o.ConsoleUser != nil:
		o.ConsoleUser.Origin = origin
	case o.APIToken != nil:
		o.APIToken.Origin = origin
	case o.Identity != nil:
		o.Identity.Origin = origin
	}
}

// Value is the object itself (nil for a tombstone): what its JSON is made from, as the API
// shows it and as the audit trail records it (AuditState).
func (o ConfigObject) Value() any {
	switch {
	case o.Source != nil:
		return o.Source
	case o.Destination != nil:
		return o.Destination
	case o.Audience != nil:
		return o.Audience
	case o.ComputedTrait != nil:
		return o.ComputedTrait
	case o.TrackingPlan != nil:
		return o.TrackingPlan
	case o.ConsoleUser != nil:
		return o.ConsoleUser
	case o.APIToken != nil:
		return o.APIToken
	case o.Identity != nil:
		return o.Identity
	}
	return nil
}

// ConfigChanges says what changed from old to new, two states of the object of one key (a
// zero or Deleted ConfigObject: absent): nil when nothing changed; else "created", "deleted",
// or the fields that changed, as paths ("settings.webhooks[0].url", "enabled"). It names
// fields, never values, so it is safe to log for secrets too.
func ConfigChanges(old, new ConfigObject) []string {
	ov, nv := old.Value(), new.Value()
	switch {
	case ov == nil && nv == nil:
		return nil
	case ov == nil:
		return []string{"created"}
	case nv == nil:
		return []string{"deleted"}
	}
	a, b := flatten(ov), flatten(nv)
	var changed []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if bv, ok := b[k]; !ok || bv != a[k] {
			changed = append(changed, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			changed = append(changed, k)
		}
	}
	slices.Sort(changed)
	return slices.Compact(changed)
}

// flatten maps every leaf of v's JSON to its path ("settings.webhooks[0].url") and its JSON.
func flatten(v any) map[string]string {
	raw, _ := json.Marshal(v)
	var tree any
	_ = json.Unmarshal(raw, &tree)
	out := map[string]string{}
	var walk func(path string, n any)
	walk = func(path string, n any) {
		switch t := n.(type) {
		case map[string]any:
			if len(t) == 0 {
				out[path] = "{}"
			}
			for k, c := range t {
				walk(strings.TrimPrefix(path+"."+k, "."), c)
			}
		case []any:
			if len(t) == 0 {
				out[path] = "[]"
			}
			for i, c := range t {
				walk(path+"["+strconv.Itoa(i)+"]", c)
			}
		default:
			b, _ := json.Marshal(t)
			out[path] = string(b)
		}
	}
	walk("", tree)
	return out
}
