package schemas

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// IdentityRules are the audiences service's identity rules, the config file's `identity`
// section (docs/configuration.md#identity; what they do: docs/audiences.md#identity-rules).
// A field left out keeps the value of the audiences service's run-time setting of the same
// rule (AUDIENCES_IDENTITY_*), whose defaults are Segment's; a change applies from the next
// message on, as Segment's rule changes do (merges already made stay).
type IdentityRules struct {
	// Blocked are regular expressions (Go syntax) of id values that never link or merge
	// profiles. Left out: AUDIENCES_IDENTITY_BLOCKED. An empty list blocks nothing.
	Blocked *[]string `json:"blocked,omitempty" yaml:"blocked"`
	// Limits are the most ids of each type a profile holds, and the window they count in.
	Limits *IdentityLimits `json:"limits,omitempty" yaml:"limits"`
	// Priority lists id types, highest priority first: when a merge would put a profile over
	// a limit, the id of lower priority is dropped.
	Priority []string `json:"priority,omitempty" yaml:"priority"`
	// MaxMerges is the most profiles merged into one (0: left out).
	MaxMerges int `json:"maxMerges,omitempty" yaml:"maxMerges"`
	// Origin is who manages the rules (docs/configuration.md#declarative-config), as for the
	// other objects.
	Origin string `json:"origin,omitempty" yaml:"-"`
}

// IdentityLimits is the `limits` mapping of IdentityRules: `{user_id: 1, email: 5, "*": 5,
// window: 720h}`, an id type ("*": every other type) to its limit, and the window.
type IdentityLimits struct {
	// PerType is the limit of each id type; "*" is every type not listed.
	PerType map[string]int
	// Window: ids linked longer ago do not count towards the limits; 0: ever. Left out: 0
	// when limits are given (AUDIENCES_IDENTITY_WINDOW only when limits are left out).
	Window Duration
}

// IdentityWindowKey is the key of IdentityLimits.Window in the limits mapping.
const IdentityWindowKey = "window"

// MarshalJSON writes the limits as the mapping a config file has.
func (l IdentityLimits) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(l.PerType)+1)
	for k, v := range l.PerType {
		m[k] = v
	}
	if l.Window != 0 {
		m[IdentityWindowKey] = l.Window
	}
	return json.Marshal(m)
}

// ConfigKindIdentity is the identity rules: key "identity/rules", the only one of its kind.
const ConfigKindIdentity ConfigKind = "identity"

// IdentityRulesID is the id of the identity rules' record.
const IdentityRulesID = "rules"

// ConfigKeyIdentity is the key of the identity rules' record.
const ConfigKeyIdentity = string(ConfigKindIdentity) + "/" + IdentityRulesID

// Record returns the identity rules' TopicConfig record after their check.
func (r *IdentityRules) Record() (ConfigRecord, error) {
	v := &validator{}
	r.check(v, "")
	if err := v.errs.errOrNil(); err != nil {
		return ConfigRecord{}, fmt.Errorf("identity: %w", err)
	}
	if r.Blocked != nil && *r.Blocked == nil { // an empty list is written [], never null
		c := *r
		c.Blocked = &[]string{}
		r = &c
	}
	return marshalRecord(ConfigKeyIdentity, r)
}

func (r *IdentityRules) objectID() string { return IdentityRulesID }

// IdentityLimitUserID is the type whose limit is always 1: a profile has one user id.
const IdentityLimitUserID = "user_id"

// check validates the rules: every expression compiles, every limit is at least 1 (user_id's
// exactly 1), the window is not negative, no priority type is empty or listed twice, and
// maxMerges is not negative.
func (r *IdentityRules) check(v *validator, p string) {
	if r.Blocked != nil {
		for i, expr := range *r.Blocked {
			if _, err := regexp.Compile(expr); err != nil {
				v.addf(indexPath(fieldPath(p, "blocked"), i), "not a regular expression: %v", err)
			}
		}
	}
	if r.Limits != nil {
		lp := fieldPath(p, "limits")
		for _, typ := range slices.Sorted(maps.Keys(r.Limits.PerType)) {
			n := r.Limits.PerType[typ]
			switch {
			case strings.TrimSpace(typ) == "" || strings.Contains(typ, ","):
				v.addf(keyPath(lp, typ), "not an id type")
			case n < 1:
				v.addf(keyPath(lp, typ), "must be at least 1, got %d", n)
			case typ == IdentityLimitUserID && n != 1:
				v.addf(keyPath(lp, typ), "a profile has one user id (its key): the limit is 1, got %d", n)
			}
		}
		if r.Limits.Window < 0 {
			v.addf(keyPath(lp, IdentityWindowKey), "must be 0 (ever) or more, got %s", time.Duration(r.Limits.Window))
		}
	}
	seen := map[string]bool{}
	for i, typ := range r.Priority {
		if strings.TrimSpace(typ) == "" || strings.Contains(typ, ",") || seen[typ] {
			v.addf(indexPath(fieldPath(p, "priority"), i), "%q is empty, not an id type or listed twice", typ)
		}
		seen[typ] = true
	}
	if r.MaxMerges < 0 {
		v.addf(fieldPath(p, "maxMerges"), "must be at least 1, got %d", r.MaxMerges)
	}
}

// BlockedExpression is the one regular expression that matches what any of the Blocked
// expressions matches, and whether Blocked was given. An empty list gives an expression that
// matches nothing.
func (r *IdentityRules) BlockedExpression() (string, bool) {
	if r == nil || r.Blocked == nil {
		return "", false
	}
	if len(*r.Blocked) == 0 {
		return `[^\x00-\x{10FFFF}]`, true // no character is outside every character
	}
	if len(*r.Blocked) == 1 {
		return (*r.Blocked)[0], true
	}
	parts := make([]string, len(*r.Blocked))
	for i, e := range *r.Blocked {
		parts[i] = "(?:" + e + ")"
	}
	return strings.Join(parts, "|"), true
}

var identityLimitsType = reflect.TypeFor[IdentityLimits]()

// identityLimits decodes the limits mapping: "window" a duration, every other key an integer.
func (d *decoder) identityLimits(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping such as {user_id: 1, email: 5, window: 720h}, got %s", describe(n))
		return
	}
	l := IdentityLimits{PerType: map[string]int{}}
	d.eachKey(n, path, func(key, kp string, value *yaml.Node) {
		if key == IdentityWindowKey {
			d.decode(value, kp, reflect.ValueOf(&l.Window).Elem())
			return
		}
		var limit int
		d.decode(value, kp, reflect.ValueOf(&limit).Elem())
		l.PerType[key] = limit
	})
	v.Set(reflect.ValueOf(l))
}
