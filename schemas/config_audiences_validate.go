package schemas

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// validateAudiences checks the audiences and computed traits of a config: each one's own
// rules, unique ids, sources that exist, trait keys unique across both kinds (they share the
// identify's traits), computedTrait conditions that name a computed trait of the config, and
// audience conditions that name an audience of the config without a cycle.
func (c *Config) validateAudiences(v *validator, sourceIDs map[string]string) {
	traitKeys := map[string]string{} // trait key → path of the first name with it
	names := map[string]string{}     // path → name, for the collision message
	checkKey := func(p, name, key string) {
		if key == "" {
			return
		}
		np := fieldPath(p, "name")
		if first, dup := traitKeys[key]; dup {
			v.addf(np, "%q has the trait key %q, as has %s %q", name, key, first, names[first])
			return
		}
		traitKeys[key] = np
		names[np] = name
	}
	checkSource := func(p, src string) {
		if _, ok := sourceIDs[src]; !ok && src != "" {
			v.addf(fieldPath(p, "source"), "unknown source %q", src)
		}
	}
	traitIDs := map[string]string{}
	for i := range c.ComputedTraits {
		t := &c.ComputedTraits[i]
		p := indexPath("computedTraits", i)
		t.check(v, p)
		v.unique(traitIDs, t.ID, fieldPath(p, "id"))
	}
	audIDs := map[string]string{}
	for i := range c.Audiences {
		a := &c.Audiences[i]
		p := indexPath("audiences", i)
		a.check(v, p)
		v.unique(audIDs, a.ID, fieldPath(p, "id"))
		checkSource(p, a.Source)
		checkKey(p, a.Name, a.TraitKey())
		a.Rule.walk(fieldPath(p, "rule"), func(c *Condition, cp string) {
			if c.ComputedTrait == "" {
				return
			}
			if _, ok := traitIDs[c.ComputedTrait]; !ok {
				v.addf(fieldPath(cp, "computedTrait"), "unknown computed trait %q", c.ComputedTrait)
			}
		})
	}
	for i := range c.ComputedTraits {
		t := &c.ComputedTraits[i]
		p := indexPath("computedTraits", i)
		checkSource(p, t.Source)
		checkKey(p, t.Name, t.TraitKey())
	}
	c.checkAudienceRefs(v)
}

// audienceRef is an audience condition: the audience it names and its path.
type audienceRef struct{ id, path string }

// checkAudienceRefs checks the audience conditions: each names an audience of the config, and
// no audience depends on itself through them (a → b → a). A cycle is reported once, at the
// condition that closes it, with the cycle's path.
func (c *Config) checkAudienceRefs(v *validator) {
	index := map[string]int{}
	for i := range c.Audiences {
		if _, dup := index[c.Audiences[i].ID]; !dup {
			index[c.Audiences[i].ID] = i
		}
	}
	refs := make([][]audienceRef, len(c.Audiences))
	for i := range c.Audiences {
		c.Audiences[i].Rule.walk(fieldPath(indexPath("audiences", i), "rule"), func(cond *Condition, cp string) {
			if cond.Audience == "" {
				return
			}
			ap := fieldPath(cp, "audience")
			if _, ok := index[cond.Audience]; !ok {
				v.addf(ap, "unknown audience %q", cond.Audience)
				return
			}
			refs[i] = append(refs[i], audienceRef{id: cond.Audience, path: ap})
		})
	}
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]int, len(c.Audiences))
	var path []int
	var visit func(i int)
	visit = func(i int) {
		state[i] = onPath
		path = append(path, i)
		for _, r := range refs[i] {
			j := index[r.id]
			switch state[j] {
			case unseen:
				visit(j)
			case onPath:
				var ids []string
				for _, k := range path[slices.Index(path, j):] {
					ids = append(ids, c.Audiences[k].ID)
				}
				v.addf(r.path, "%q makes a cycle of audiences: %s → %s", r.id, strings.Join(ids, " → "), r.id)
			}
		}
		path = path[:len(path)-1]
		state[i] = done
	}
	for i := range c.Audiences {
		if state[i] == unseen {
			visit(i)
		}
	}
}

// walk calls fn for c and every condition nested in it, with its path.
func (c *Condition) walk(p string, fn func(c *Condition, p string)) {
	fn(c, p)
	for i := range c.All {
		c.All[i].walk(indexPath(fieldPath(p, "all"), i), fn)
	}
	for i := range c.Any {
		c.Any[i].walk(indexPath(fieldPath(p, "any"), i), fn)
	}
	if c.Not != nil {
		c.Not.walk(fieldPath(p, "not"), fn)
	}
}

// Validate checks the computed trait's own rules (that its source exists is Config.Validate's
// job); error paths are relative to the computed trait.
func (t *ComputedTrait) Validate() error {
	v := &validator{}
	t.check(v, "")
	return v.errs.errOrNil()
}

func (a *Audience) check(v *validator, p string) {
	v.id(fieldPath(p, "id"), a.ID)
	checkName(v, p, a.Name, a.TraitKey())
	if a.Source == "" {
		v.addf(fieldPath(p, "source"), "is required")
	}
	switch a.Output {
	case "", OutputIdentify, OutputTrack, OutputBoth:
	default:
		v.addf(fieldPath(p, "output"), "must be identify, track or both, got %q", a.Output)
	}
	a.Rule.check(v, fieldPath(p, "rule"), 1)
}

func checkName(v *validator, p, name, key string) {
	np := fieldPath(p, "name")
	switch {
	case name == "":
		v.addf(np, "is required")
	case key == "":
		v.addf(np, "%q has no letters or digits, so it has no trait key", name)
	}
}

// conditionKinds names the fields that make a condition what it is, in the model's order.
const conditionKinds = "all, any, not, event, trait, computedTrait or audience"

func (c *Condition) kinds() []string {
	var ks []string
	add := func(set bool, name string) {
		if set {
			ks = append(ks, name)
		}
	}
	add(len(c.All) > 0, "all")
	add(len(c.Any) > 0, "any")
	add(c.Not != nil, "not")
	add(c.Event != "", "event")
	add(c.Trait != "", "trait")
	add(c.ComputedTrait != "", "computedTrait")
	add(c.Audience != "", "audience")
	return ks
}

// check checks a condition at depth: the number of groups it is in, plus one.
func (c *Condition) check(v *validator, p string, depth int) {
	kinds := c.kinds()
	switch {
	case len(kinds) == 0:
		v.addf(p, "needs one of %s", conditionKinds)
		return
	case len(kinds) > 1:
		v.addf(p, "has both %s and %s: a condition is exactly one of %s", kinds[0], kinds[1], conditionKinds)
		return
	}
	eventOnly := func() {
		if c.AtLeast != 0 || v.set(fieldPath(p, "atLeast")) {
			v.addf(fieldPath(p, "atLeast"), "applies to event conditions only")
		}
		if c.AtMost != nil {
			v.addf(fieldPath(p, "atMost"), "applies to event conditions only")
		}
		if c.Within != 0 || v.set(fieldPath(p, "within")) {
			v.addf(fieldPath(p, "within"), "applies to event conditions only")
		}
		if len(c.Between) > 0 {
			v.addf(fieldPath(p, "between"), "applies to event conditions only")
		}
		if len(c.Where) > 0 {
			v.addf(fieldPath(p, "where"), "applies to event conditions only")
		}
	}
	noComparison := func(what string) {
		for _, op := range c.Comparison.operators() {
			v.addf(fieldPath(p, op), "applies to trait and computedTrait conditions only, not to %s", what)
		}
	}
	if k := kinds[0]; (k == "all" || k == "any" || k == "not") && depth > MaxRuleDepth {
		// Groups count, conditions inside the deepest allowed group do not.
		v.addf(p, "nests all, any and not more than %d levels deep", MaxRuleDepth)
		return
	}
	switch kinds[0] {
	case "all", "any":
		eventOnly()
		noComparison("a group")
		for i := range c.All {
			c.All[i].check(v, indexPath(fieldPath(p, "all"), i), depth+1)
		}
		for i := range c.Any {
			c.Any[i].check(v, indexPath(fieldPath(p, "any"), i), depth+1)
		}
	case "not":
		eventOnly()
		noComparison("a group")
		c.Not.check(v, fieldPath(p, "not"), depth+1)
	case "event":
		noComparison("an event condition")
		ap := fieldPath(p, "atLeast")
		if c.AtLeast < 0 || (c.AtLeast == 0 && v.set(ap)) {
			v.addf(ap, "must be at least 1, got %d", c.AtLeast)
		}
		if c.AtMost != nil {
			mp := fieldPath(p, "atMost")
			switch {
			case *c.AtMost < 0:
				v.addf(mp, "must not be negative, got %d", *c.AtMost)
			case c.AtLeast > *c.AtMost:
				v.addf(mp, "must be at least atLeast (%d), got %d", c.AtLeast, *c.AtMost)
			}
		}
		checkWithin(v, fieldPath(p, "within"), c.Within)
		c.checkBetween(v, p)
		checkWhere(v, fieldPath(p, "where"), c.Where)
	case "audience":
		eventOnly()
		noComparison("an audience condition")
	default: // trait, computedTrait
		eventOnly()
		c.Comparison.check(v, p, kinds[0]+" condition")
	}
}

// checkBetween checks an event condition's between window: [older, newer], the older bound
// first, both within the 90 days kept, and not together with within.
func (c *Condition) checkBetween(v *validator, p string) {
	bp := fieldPath(p, "between")
	if len(c.Between) == 0 {
		return
	}
	if c.Within != 0 {
		v.addf(bp, "and within are two windows: give one of them")
		return
	}
	if len(c.Between) != 2 {
		v.addf(bp, "must be two durations, the older bound first, as in [90d, 30d]; got %d", len(c.Between))
		return
	}
	older, newer := time.Duration(c.Between[0]), time.Duration(c.Between[1])
	if older == 0 {
		v.addf(indexPath(bp, 0), "must be at least 1m (events are counted in one-minute buckets), got 0s")
	}
	checkWithin(v, indexPath(bp, 0), c.Between[0])
	switch {
	case newer < 0:
		v.addf(indexPath(bp, 1), "must not be negative, got %s", ShortDuration(newer))
	case newer > 0 && newer < time.Minute:
		v.addf(indexPath(bp, 1), "must be 0 or at least 1m (events are counted in one-minute buckets), got %s", ShortDuration(newer))
	case older > 0 && newer >= older:
		v.addf(bp, "must give the older bound first, as in [90d, 30d] (between 90 and 30 days ago): got [%s, %s]", ShortDuration(older), ShortDuration(newer))
	}
}

func checkWithin(v *validator, p string, w Duration) {
	switch d := time.Duration(w); {
	case d < 0:
		v.addf(p, "must not be negative, got %s", ShortDuration(d))
	case d > 0 && d < time.Minute:
		// Below a millisecond it would even read as 0, "ever".
		v.addf(p, "must be at least 1m (events are counted in one-minute buckets), got %s", ShortDuration(d))
	case d > MaxWithin:
		v.addf(p, "must be at most %s (90 days), got %s", ShortDuration(MaxWithin), ShortDuration(d))
	}
}

func checkWhere(v *validator, p string, where []PropertyCondition) {
	for i := range where {
		wp := indexPath(p, i)
		w := &where[i]
		switch {
		case w.Property == "":
			v.addf(fieldPath(wp, "property"), "is required")
		case strings.Contains("."+w.Property+".", ".."):
			v.addf(fieldPath(wp, "property"), "%q has an empty segment: use dots between property names, as in \"product.sku\"", w.Property)
		}
		w.Comparison.check(v, wp, "where condition")
	}
}

// operators lists the operators that are set, by field name.
func (c *Comparison) operators() []string {
	var ops []string
	add := func(set bool, name string) {
		if set {
			ops = append(ops, name)
		}
	}
	add(c.Equals != nil, "equals")
	add(c.NotEquals != nil, "notEquals")
	add(c.Exists != nil, "exists")
	add(len(c.In) > 0, "in")
	add(c.Contains != nil, "contains")
	add(c.Gt != nil, "gt")
	add(c.Gte != nil, "gte")
	add(c.Lt != nil, "lt")
	add(c.Lte != nil, "lte")
	return ops
}

func (c *Comparison) check(v *validator, p, what string) {
	if !c.HasOperator() {
		if v.set(fieldPath(p, "in")) {
			v.addf(fieldPath(p, "in"), "must list at least one value")
			return
		}
		v.addf(p, "needs an operator for the %s: equals, notEquals, exists, in, contains, gt, gte, lt or lte", what)
		return
	}
	scalar := func(name string, x any) {
		if x != nil && !validEquals(x) {
			got := fmt.Sprintf("%T", x)
			if f, ok := x.(float64); ok {
				got = fmt.Sprint(f)
			}
			v.addf(fieldPath(p, name), "must be a string, a finite number or a boolean, got %s", got)
		}
	}
	scalar("equals", c.Equals)
	scalar("notEquals", c.NotEquals)
	scalar("contains", c.Contains)
	for i, x := range c.In {
		if x == nil {
			v.addf(indexPath(fieldPath(p, "in"), i), "must be a string, a finite number or a boolean, got null")
			continue
		}
		scalar(fmt.Sprintf("in[%d]", i), x)
	}
	for i, f := range []*float64{c.Gt, c.Gte, c.Lt, c.Lte} {
		if f != nil && !finite(*f) {
			v.addf(fieldPath(p, []string{"gt", "gte", "lt", "lte"}[i]), "must be a finite number, got %v", *f)
		}
	}
}

func (t *ComputedTrait) check(v *validator, p string) {
	v.id(fieldPath(p, "id"), t.ID)
	checkName(v, p, t.Name, t.TraitKey())
	if t.Source == "" {
		v.addf(fieldPath(p, "source"), "is required")
	}
	var set []string
	for _, k := range AggregateKinds {
		if t.aggregate(k) != nil {
			set = append(set, k)
		}
	}
	const kinds = "count, sum, avg, min, max, first, last, mostFrequent or uniqueList"
	switch {
	case len(set) == 0:
		v.addf(p, "needs one of %s", kinds)
		return
	case len(set) > 1:
		v.addf(p, "has both %s and %s: a computed trait is exactly one of %s", set[0], set[1], kinds)
		return
	}
	kind, a := set[0], t.aggregate(set[0])
	ap := fieldPath(p, kind)
	if a.Event == "" {
		v.addf(fieldPath(ap, "event"), "is required")
	}
	pp := fieldPath(ap, "property")
	switch {
	case kind == AggCount && a.Property != "":
		v.addf(pp, "does not apply to count (it counts events)")
	case kind != AggCount && a.Property == "":
		v.addf(pp, "is required for %s", kind)
	case strings.Contains("."+a.Property+".", "..") && a.Property != "":
		v.addf(pp, "%q has an empty segment: use dots between property names, as in \"product.sku\"", a.Property)
	}
	windowed := kind == AggCount || kind == AggSum || kind == AggAvg || kind == AggMin || kind == AggMax
	if !windowed && (a.Within != 0 || v.set(fieldPath(ap, "within"))) {
		v.addf(fieldPath(ap, "within"), "applies to count, sum, avg, min and max only")
	} else {
		checkWithin(v, fieldPath(ap, "within"), a.Within)
	}
	checkWhere(v, fieldPath(ap, "where"), a.Where)
}
