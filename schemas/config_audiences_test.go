package schemas

import (
	"strings"
	"testing"
	"time"
)

// TestLoadConfigFileBadAudiences holds one file per audience or computed-trait rule, under
// testdata/audiences (testdata/config's bad_* files are TestLoadConfigFileBad's), with the
// exact message(s) LoadConfigFile returns, one per line. The valid conditions some files hold
// beside the bad ones (the edges: exactly 90 days, 1m, 10 levels) must give no message.
func TestLoadConfigFileBadAudiences(t *testing.T) {
	tests := []badConfigFile{
		// Parsing.
		{"bad_unknown_field.yaml", `10: audiences[0].rule.all[0]: unknown field "atleast" (did you mean "atLeast"?)` + "\n" +
			`15: computedTraits[0]: unknown field "counts" (did you mean "count"?)` + "\n" +
			`19: computedTraits[1].sum: unknown field "filter"`},
		{"bad_gt_string.yaml", `9: audiences[0].rule.all[0].gt: want a number, got a string "18"` + "\n" +
			`10: audiences[0].rule.all[1].lte: want a number, got a list`},
		{"bad_gt_string.json", `6: audiences[0].rule.all[0].gt: want a number, got a string "18"` + "\n" +
			`7: audiences[0].rule.all[1].atLeast: want an integer, got a number "1.5"`},
		// References across the config.
		{"bad_unknown_source.yaml", `6: audiences[0].source: unknown source "mobile"` + "\n" +
			`11: computedTraits[0].source: unknown source "crm"`},
		{"bad_unknown_computed_trait.yaml", `17: audiences[0].rule.all[1].not.any[0].computedTrait: unknown computed trait "LTV"`},
		{"bad_trait_key_collision.yaml", `10: computedTraits[0].name: "power-users!" has the trait key "power_users", as has audiences[0].name "Power Users"` + "\n" +
			`18: computedTraits[2].name: "orders_30_d" has the trait key "orders_30_d", as has computedTraits[1].name "Orders 30d"`},
		// Audience conditions: an unknown id, and cycles (reported once each, with their path).
		{"bad_audience_refs.yaml", `10: audiences[0].rule.all[1].audience: unknown audience "nope"` + "\n" +
			`17: audiences[1].rule.any[1].not.audience: "a" makes a cycle of audiences: a → b → a` + "\n" +
			`21: audiences[2].rule.audience: "self" makes a cycle of audiences: self → self` + "\n" +
			`35: audiences[5].rule.all[0].audience: "c" makes a cycle of audiences: c → d → e → c`},
		{"bad_duplicate_computed_trait_id.yaml", `8: computedTraits[1].id: duplicate id "ltv" (first used by computedTraits[0])`},
		// Rules.
		{"bad_within_too_long.yaml", `13: audiences[2].rule.all[1].within: must be at most 2160h (90 days), got 2184h` + "\n" +
			`18: computedTraits[0].sum.within: must be at most 2160h (90 days), got 2160h1m`},
		{"bad_within_too_short.yaml", `10: audiences[0].rule.any[1].within: must be at least 1m (events are counted in one-minute buckets), got 30s` + "\n" +
			`11: audiences[0].rule.any[2].within: must be at least 1m (events are counted in one-minute buckets), got 1ns` + "\n" +
			`16: computedTraits[0].count.within: must be at least 1m (events are counted in one-minute buckets), got 59s`},
		// between windows and outputs; the last conditions are valid edges (90d, 0, 1d12h).
		{"bad_between.yaml", strings.Join([]string{
			`7: audiences[0].output: must be identify, track or both, got "tracks"`,
			`10: audiences[0].rule.all[0].between: must give the older bound first, as in [90d, 30d] (between 90 and 30 days ago): got [720h, 2160h]`,
			`11: audiences[0].rule.all[1].between: and within are two windows: give one of them`,
			`12: audiences[0].rule.all[2].between: must be two durations, the older bound first, as in [90d, 30d]; got 1`,
			`13: audiences[0].rule.all[3].between[0]: must be at most 2160h (90 days), got 2184h`,
			`14: audiences[0].rule.all[4].between[1]: must be 0 or at least 1m (events are counted in one-minute buckets), got 30s`,
			`15: audiences[0].rule.all[5].between[0]: must be at least 1m (events are counted in one-minute buckets), got 0s`,
			`16: audiences[0].rule.all[6].between: applies to event conditions only`,
			`17: audiences[0].rule.all[7].equals: applies to trait and computedTrait conditions only, not to an audience condition`,
		}, "\n")},
		{"bad_at_least_nested.yaml", `11: audiences[0].rule.not.any[0].atLeast: must be at least 1, got -1`},
		{"bad_at_most.yaml", `9: audiences[0].rule.all[0].atMost: must be at least atLeast (3), got 2` + "\n" +
			`10: audiences[0].rule.all[1].atMost: must not be negative, got -1`},
		{"bad_condition_two_kinds.yaml", `11: audiences[0].rule.all[0]: has both trait and computedTrait: a condition is exactly one of all, any, not, event, trait, computedTrait or audience` + "\n" +
			`12: audiences[0].rule.all[1]: has both any and event: a condition is exactly one of all, any, not, event, trait, computedTrait or audience` + "\n" +
			`15: audiences[0].rule.all[2]: has both all and not: a condition is exactly one of all, any, not, event, trait, computedTrait or audience`},
		// An empty group is no condition (docs/configuration.md#validation-rules).
		{"bad_empty_group.yaml", `9: audiences[0].rule.any[0]: needs one of all, any, not, event, trait, computedTrait or audience` + "\n" +
			`10: audiences[0].rule.any[1].not: needs one of all, any, not, event, trait, computedTrait or audience` + "\n" +
			`11: audiences[0].rule.any[2]: needs one of all, any, not, event, trait, computedTrait or audience`},
		{"bad_no_operator.yaml", `11: audiences[0].rule.all[0]: needs an operator for the computedTrait condition: equals, notEquals, exists, in, contains, gt, gte, lt or lte` + "\n" +
			`14: audiences[0].rule.all[1].where[0]: needs an operator for the where condition: equals, notEquals, exists, in, contains, gt, gte, lt or lte` + "\n" +
			`15: audiences[0].rule.all[2].in: must list at least one value`},
		{"bad_comparison_values.yaml", `9: audiences[0].rule.all[0].gte: must be a finite number, got +Inf` + "\n" +
			`10: audiences[0].rule.all[1].in[1]: must be a string, a finite number or a boolean, got null` + "\n" +
			`13: audiences[0].rule.all[2].where[0].lt: must be a finite number, got NaN`},
		{"bad_group_with_fields.yaml", `8: audiences[0].rule.within: applies to event conditions only` + "\n" +
			`9: audiences[0].rule.equals: applies to trait and computedTrait conditions only, not to a group` + "\n" +
			`11: audiences[0].rule.any[0].atMost: applies to event conditions only` + "\n" +
			`13: audiences[0].rule.any[1].exists: applies to trait and computedTrait conditions only, not to an event condition`},
		{"bad_where.yaml", `10: audiences[0].rule.where[0].property: is required` + "\n" +
			`11: audiences[0].rule.where[1].property: "product..sku" has an empty segment: use dots between property names, as in "product.sku"` + "\n" +
			`12: audiences[0].rule.where[2].property: "properties." has an empty segment: use dots between property names, as in "product.sku"`},
		{"bad_rule_too_deep.yaml", `11: audiences[1].rule.not.not.all[0].any[0].not.not.all[0].any[0].not.not: nests all, any and not more than 10 levels deep`},
		// Computed traits.
		{"bad_computed_trait_kinds.yaml", `4: computedTraits[0]: needs one of count, sum, avg, min, max, first, last, mostFrequent or uniqueList` + "\n" +
			`7: computedTraits[1]: has both count and sum: a computed trait is exactly one of count, sum, avg, min, max, first, last, mostFrequent or uniqueList`},
		{"bad_computed_trait_property_missing.yaml", strings.Join([]string{
			`4: computedTraits[0].sum.property: is required for sum`,
			`5: computedTraits[1].avg.property: is required for avg`,
			`6: computedTraits[2].min.property: is required for min`,
			`7: computedTraits[3].max.property: is required for max`,
			`8: computedTraits[4].first.property: is required for first`,
			`9: computedTraits[5].last.property: is required for last`,
			`10: computedTraits[6].mostFrequent.property: is required for mostFrequent`,
			`11: computedTraits[7].uniqueList.property: is required for uniqueList`,
		}, "\n")},
		{"bad_computed_trait_body.yaml", `7: computedTraits[0].count.property: does not apply to count (it counts events)` + "\n" +
			`11: computedTraits[1].sum.event: is required` + "\n" +
			`15: computedTraits[2].first.property: ".coupon" has an empty segment: use dots between property names, as in "product.sku"`},
		{"bad_computed_trait_within.yaml", strings.Join([]string{
			`4: computedTraits[0].first.within: applies to count, sum, avg, min and max only`,
			`5: computedTraits[1].last.within: applies to count, sum, avg, min and max only`,
			`6: computedTraits[2].mostFrequent.within: applies to count, sum, avg, min and max only`,
			`7: computedTraits[3].uniqueList.within: applies to count, sum, avg, min and max only`,
			`8: computedTraits[4].max.within: must not be negative, got -1h`,
		}, "\n")},
		{"bad_computed_trait_fields.yaml", `4: computedTraits[0].id: "Bad Id" must contain only a-z, 0-9, '-' and '_'` + "\n" +
			`4: computedTraits[0].name: is required` + "\n" +
			`7: computedTraits[1].source: is required` + "\n" +
			`8: computedTraits[1].name: "???" has no letters or digits, so it has no trait key`},
	}
	checkBadConfigFiles(t, "testdata/audiences", tests)
}

func TestLoadConfigFileGoodAudiences(t *testing.T) {
	cfg, err := LoadConfigFile("testdata/audiences/good_rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.ComputedTraits) != len(AggregateKinds) {
		t.Fatalf("%d computed traits, want one per kind (%d)", len(cfg.ComputedTraits), len(AggregateKinds))
	}
	for i, ct := range cfg.ComputedTraits {
		if kind, body := ct.Aggregate(); kind != AggregateKinds[i] || body == nil || body.Event == "" {
			t.Errorf("computedTraits[%d].Aggregate() = %q, %+v; want %q", i, kind, body, AggregateKinds[i])
		}
	}
	a := cfg.Audiences[0]
	if got := a.TraitKey(); got != "ltv" {
		t.Errorf("TraitKey of %q = %q, want ltv", a.Name, got)
	}
	rule := a.Rule.All
	if c := rule[10]; c.MinCount() != 0 || c.AtMost == nil || *c.AtMost != 0 || time.Duration(c.Within) != time.Minute {
		t.Errorf("atMost 0 within 1m: %+v (MinCount %d)", c, c.MinCount())
	}
	if got := rule[12].Where[0].PropertyPath(); strings.Join(got, "|") != "product|sku" {
		t.Errorf("where[0] path = %q", got)
	}
	if got := rule[12].Where[1].PropertyPath(); strings.Join(got, "|") != "coupon" {
		t.Errorf("where[1] path = %q: a leading properties. is dropped", got)
	}
	if got := cfg.ComputedTraits[4].Max.PropertyPath(); strings.Join(got, "|") != "product|price" {
		t.Errorf("max path = %q", got)
	}
}

// deepRule is n nested groups (all, any and not in turn) around a trait condition.
func deepRule(n int) Rule {
	c := Condition{Trait: "plan", Comparison: Comparison{Equals: "pro"}}
	for i := range n {
		inner := c
		switch i % 3 {
		case 0:
			c = Condition{All: []Condition{inner}}
		case 1:
			c = Condition{Any: []Condition{inner}}
		default:
			c = Condition{Not: &inner}
		}
	}
	return c
}

// TestAudienceValidateInCode: Validate of audiences and computed traits built in code (the
// console's path): no lines, paths relative to the object.
func TestAudienceValidateInCode(t *testing.T) {
	neg, two := -1, 2
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"MaxRuleDepth groups", (&Audience{ID: "a", Name: "A", Source: "s", Rule: deepRule(MaxRuleDepth)}).Validate(), ""},
		{"one group more", (&Audience{ID: "a", Name: "A", Source: "s", Rule: deepRule(MaxRuleDepth + 1)}).Validate(),
			"rule.any[0].all[0].not.any[0].all[0].not.any[0].all[0].not.any[0]: nests all, any and not more than 10 levels deep"},
		{"an empty all in code is no condition", (&Audience{ID: "a", Name: "A", Source: "s", Rule: Rule{All: []Condition{}}}).Validate(),
			"rule: needs one of all, any, not, event, trait, computedTrait or audience"},
		{"atMost negative", (&Audience{ID: "a", Name: "A", Source: "s", Rule: Rule{Event: "E", AtMost: &neg}}).Validate(),
			"rule.atMost: must not be negative, got -1"},
		{"atMost below atLeast", (&Audience{ID: "a", Name: "A", Source: "s", Rule: Rule{Event: "E", AtLeast: 3, AtMost: &two}}).Validate(),
			"rule.atMost: must be at least atLeast (3), got 2"},
		{"within under a millisecond", (&Audience{ID: "a", Name: "A", Source: "s", Rule: Rule{Event: "E", Within: Duration(time.Microsecond)}}).Validate(),
			"rule.within: must be at least 1m (events are counted in one-minute buckets), got 1µs"},
		{"computed trait", (&ComputedTrait{ID: "t", Name: "T", Source: "s", Avg: &EventAggregate{Event: "E"}}).Validate(),
			"avg.property: is required for avg"},
		{"computed trait without a kind", (&ComputedTrait{ID: "t", Name: "T", Source: "s"}).Validate(),
			"needs one of count, sum, avg, min, max, first, last, mostFrequent or uniqueList"},
		{"computed trait, within on last", (&ComputedTrait{ID: "t", Name: "T", Source: "s", Last: &EventAggregate{Event: "E", Property: "p", Within: Duration(time.Hour)}}).Validate(),
			"last.within: applies to count, sum, avg, min and max only"},
		{"computed trait, good", (&ComputedTrait{ID: "t", Name: "T", Source: "s", Count: &EventAggregate{Event: "E", Within: Duration(MaxWithin)}}).Validate(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if tt.err != nil {
				got = tt.err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDurationDays: durations take a leading number of days ("90d", "1d12h"); other forms
// are Go's.
func TestDurationDays(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "90d", want: 90 * 24 * time.Hour},
		{in: "30d", want: 720 * time.Hour},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "0d", want: 0},
		{in: "720h", want: 720 * time.Hour},
		{in: "d", bad: true},
		{in: "1d-1h", bad: true},
		{in: "1dx", bad: true},
		{in: "1.5d", bad: true},
		{in: "9999999d", bad: true},
	}
	for _, tt := range tests {
		var d Duration
		err := d.UnmarshalText([]byte(tt.in))
		if (err != nil) != tt.bad || (!tt.bad && time.Duration(d) != tt.want) {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v (error: %v)", tt.in, time.Duration(d), err, tt.want, tt.bad)
		}
	}
}

func TestSplitPropertyPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"revenue", "revenue"},
		{"properties.revenue", "revenue"},
		{"product.sku", "product|sku"},
		{"properties.product.sku", "product|sku"},
		{"properties", "properties"}, // a property named properties
		{"properties.properties", "properties"},
		{"product.properties.x", "product|properties|x"},
	}
	for _, tt := range tests {
		if got := strings.Join(SplitPropertyPath(tt.in), "|"); got != tt.want {
			t.Errorf("SplitPropertyPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
