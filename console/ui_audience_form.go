package console

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// The audience form (audienceForm: a rule as an event, a trait and an audience condition, or
// as its JSON; its output)
// and the computed trait form (traitForm), the two objectForms of the shared form flow
// (ui_objectform.go).

// audienceForm is the audience form.
type audienceForm struct {
	formBase
	Event, AtLeast    string
	Trait, TraitValue string
	// InAudience is the id of the audience its members must be in ("": no such condition).
	InAudience string
	// Output is identify, track or both (docs/audiences.md#outputs).
	Output                         string
	RuleJSON                       string
	Members, LastSync, Unavailable string
	Backfill                       string // backfillText
	Advanced                       bool
	// Audiences are the ids of the config's other audiences, for the audience condition.
	Audiences []string
	Outputs   []string
}

// fill opens the rule's JSON when it is the rule or wrong, and shows a saved audience's
// member count from the audiences service.
func (f *audienceForm) fill(u *ui, r *http.Request) {
	f.Advanced = f.Advanced || f.RuleJSON != "" || f.Errors["rule"] != ""
	f.Outputs = []string{schemas.OutputIdentify, schemas.OutputTrack, schemas.OutputBoth}
	if f.Output == "" {
		f.Output = schemas.OutputIdentify
	}
	f.Audiences = nil
	for _, a := range u.s.deps.Store.Snapshot().Audiences() {
		if a.ID != f.ID || f.New {
			f.Audiences = append(f.Audiences, a.ID)
		}
	}
	if f.New {
		return
	}
	if fig, err := u.aud().audiences(r.Context(), []string{f.ID}); err != nil {
		f.Unavailable = audiencesUnavailable(err)
	} else if x, ok := fig[f.ID]; ok {
		f.Members = plural(x.Members, "member")
		f.Backfill = backfillText(x.Backfill)
		if t, err := schemas.ParseTimestamp(x.LastSyncAt); err == nil {
			f.LastSync = fmtWhenAgo(t)
		}
	}
}

// load puts the saved audience into the form.
func (f *audienceForm) load(o schemas.ConfigObject) {
	a := o.Audience
	f.Name, f.Source, f.Realtime, f.Output = a.Name, a.Source, a.Realtime, a.Output
	f.fillRule(&a.Rule)
}

// simpleEvent reports whether c is an event condition the form's fields say whole.
func simpleEvent(c *schemas.Condition) bool {
	return c.Event != "" && c.AtMost == nil && len(c.Where) == 0 && len(c.Between) == 0 && !c.HasOperator() && len(c.All)+len(c.Any) == 0 && c.Not == nil
}

// simpleAudience reports whether c is an audience condition (the form's audience select).
func simpleAudience(c *schemas.Condition) bool {
	return c.Audience != "" && c.Event == "" && c.Trait == "" && c.ComputedTrait == "" && !c.HasOperator() && len(c.All)+len(c.Any) == 0 && c.Not == nil
}

// simpleTrait reports whether c is a trait condition the form's fields say whole: equals a
// value, or exists.
func simpleTrait(c *schemas.Condition) bool {
	if c.Trait == "" || len(c.All)+len(c.Any) > 0 || c.Not != nil {
		return false
	}
	cmp := c.Comparison
	eq, ex := cmp.Equals, cmp.Exists
	cmp.Equals, cmp.Exists = nil, nil
	if cmp.HasOperator() || (eq == nil) == (ex == nil) {
		return false
	}
	return ex == nil || *ex
}

// fillRule puts a rule into the form: in the fields when they can say it, else as JSON.
func (f *audienceForm) fillRule(rule *schemas.Condition) {
	setEvent := func(c *schemas.Condition) {
		f.Event, f.AtLeast = c.Event, strconv.Itoa(c.MinCount())
		if c.Within != 0 {
			f.Within = schemas.ShortDuration(time.Duration(c.Within))
		}
	}
	setTrait := func(c *schemas.Condition) {
		f.Trait = c.Trait
		if c.Equals != nil {
			f.TraitValue = formatTraitValue(c.Equals)
		}
	}
	// The fields say one condition, or an all of two or three in the order event, trait,
	// audience.
	conds := []schemas.Condition{*rule}
	if len(rule.All) >= 2 && rule.Not == nil && !rule.HasOperator() && rule.Event == "" && rule.Trait == "" && rule.Audience == "" && rule.ComputedTrait == "" {
		conds = rule.All
	}
	var sets []func()
	next := 0
	for i := range conds {
		c := &conds[i]
		switch {
		case next <= 0 && simpleEvent(c):
			sets, next = append(sets, func() { setEvent(c) }), 1
		case next <= 1 && simpleTrait(c):
			sets, next = append(sets, func() { setTrait(c) }), 2
		case next <= 2 && simpleAudience(c):
			sets, next = append(sets, func() { f.InAudience = c.Audience }), 3
		default:
			b, _ := json.MarshalIndent(rule, "", "  ")
			f.RuleJSON = string(b)
			return
		}
	}
	for _, set := range sets {
		set()
	}
}

// parseTraitValue reads a trait value field: true, false and numbers are those values, a
// quoted text is the text, anything else is text as written.
func parseTraitValue(s string) any {
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil && json.Valid([]byte(s)) {
		return n
	}
	return s
}

// formatTraitValue is parseTraitValue's inverse.
func formatTraitValue(v any) string {
	switch x := v.(type) {
	case string:
		if _, text := parseTraitValue(x).(string); !text || strings.HasPrefix(x, `"`) {
			return `"` + x + `"`
		}
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// audienceFormOf reads the posted audience form.
func audienceFormOf(r *http.Request) *audienceForm {
	v := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	return &audienceForm{formBase: formBaseOf(r), Event: v("event"), AtLeast: v("atLeast"), Trait: v("trait"),
		TraitValue: v("traitValue"), InAudience: v("inAudience"), Output: v("output"), RuleJSON: v("rule")}
}

// ruleConditions locates the form's conditions in the rule it builds: the paths of its event,
// trait and audience conditions ("" when absent).
func (f *audienceForm) ruleConditions() (event, trait, audience string) {
	var paths [3]string
	set := []bool{f.Event != "", f.Trait != "", f.InAudience != ""}
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	i := 0
	for k, s := range set {
		if !s {
			continue
		}
		paths[k] = "rule"
		if n > 1 {
			paths[k] = "rule.all[" + strconv.Itoa(i) + "]"
		}
		i++
	}
	return paths[0], paths[1], paths[2]
}

// rule is the rule the form says: its JSON when written (it wins), else the one its fields
// build. It is nil when there is none, with the reason in f.Errors.
func (f *audienceForm) rule() json.RawMessage {
	if f.RuleJSON != "" {
		var v any
		if err := json.Unmarshal([]byte(f.RuleJSON), &v); err != nil {
			f.Errors["rule"] = "This is not JSON: " + err.Error() + "."
			return nil
		}
		return json.RawMessage(f.RuleJSON)
	}
	var conds []map[string]any
	if f.Event != "" {
		c := map[string]any{"event": f.Event}
		if f.AtLeast != "" {
			n, err := strconv.Atoi(f.AtLeast)
			if err != nil {
				f.Errors["atLeast"] = "A whole number of times, such as 2."
				return nil
			}
			c["atLeast"] = n
		}
		if f.Within != "" {
			c["within"] = f.Within
		}
		conds = append(conds, c)
	}
	if f.Trait != "" {
		c := map[string]any{"trait": f.Trait}
		if f.TraitValue == "" {
			c["exists"] = true
		} else {
			c["equals"] = parseTraitValue(f.TraitValue)
		}
		conds = append(conds, c)
	} else if f.TraitValue != "" {
		f.Errors["trait"] = "Name the trait whose value this is."
		return nil
	}
	if f.InAudience != "" {
		conds = append(conds, map[string]any{"audience": f.InAudience})
	}
	var rule any
	switch len(conds) {
	case 0:
		f.Errors["rule"] = "Say who is in the audience: an event they sent, a trait they have, an audience they are in, or the rule's JSON."
		return nil
	case 1:
		rule = conds[0]
	default:
		rule = map[string]any{"all": conds}
	}
	b, _ := json.Marshal(rule)
	return b
}

// place puts the API's field errors next to the form's fields; it returns the rest.
func (f *audienceForm) place(errs map[string]string) string {
	ev, tr, au := f.ruleConditions()
	var rest []string
	for _, field := range slices.Sorted(maps.Keys(errs)) {
		msg := errs[field]
		switch {
		case commonField(field):
			f.Errors[field] = msg
		case f.RuleJSON == "" && ev != "" && slices.Contains([]string{ev + ".event", ev + ".atLeast", ev + ".within"}, field):
			f.Errors[strings.TrimPrefix(field, ev+".")] = msg
		case f.RuleJSON == "" && tr != "" && field == tr+".trait":
			f.Errors["trait"] = msg
		case f.RuleJSON == "" && tr != "" && strings.HasPrefix(field, tr+"."):
			f.Errors["traitValue"] = msg
		case f.RuleJSON == "" && au != "" && field == au+".audience":
			f.Errors["inAudience"] = msg
		case field == "output":
			f.Errors["output"] = msg
		case field == "rule" || strings.HasPrefix(field, "rule.") || strings.HasPrefix(field, "rule["):
			f.Advanced = f.Advanced || f.RuleJSON != ""
			if field != "rule" {
				msg = strings.TrimPrefix(field, "rule.") + ": " + msg
			}
			if f.Errors["rule"] == "" {
				f.Errors["rule"] = msg
			}
		default:
			rest = append(rest, field+": "+msg)
		}
	}
	sort.Strings(rest)
	return strings.Join(rest, " ")
}

// object is the form's audience as the API's body (nil when the form has no rule).
func (f *audienceForm) object() map[string]any {
	rule := f.rule()
	if rule == nil {
		return nil
	}
	m := map[string]any{"name": f.Name, "source": f.Source, "rule": rule}
	if f.Realtime {
		m["realtime"] = true
	}
	switch {
	case f.Output != "" && f.Output != schemas.OutputIdentify:
		m["output"] = f.Output
	case !f.New:
		m["output"] = nil // the default: a merge patch removes the field
	}
	return m
}

// traitForm is the computed trait form.
type traitForm struct {
	formBase
	Kind, Event, Property, Where string
	Kinds                        []string
}

// Key is the trait key the form's name gives ("" without a name).
func (f *traitForm) Key() string { return schemas.SnakeCase(f.Name) }

// fill lists the kinds of aggregate.
func (f *traitForm) fill(*ui, *http.Request) { f.Kinds = schemas.AggregateKinds }

// load puts the saved computed trait into the form.
func (f *traitForm) load(o schemas.ConfigObject) {
	t := o.ComputedTrait
	f.Name, f.Source, f.Realtime = t.Name, t.Source, t.Realtime
	kind, body := t.Aggregate()
	f.Kind = kind
	if body != nil {
		f.Event, f.Property = body.Event, body.Property
		if body.Within != 0 {
			f.Within = schemas.ShortDuration(time.Duration(body.Within))
		}
		if len(body.Where) > 0 {
			b, _ := json.MarshalIndent(body.Where, "", "  ")
			f.Where = string(b)
		}
	}
}

// object is the form's computed trait as the API's body (nil with f.Errors set when the
// form cannot make one).
func (f *traitForm) object() map[string]any {
	if !slices.Contains(schemas.AggregateKinds, f.Kind) {
		f.Errors["kind"] = "Choose what to compute."
		return nil
	}
	agg := map[string]any{"event": f.Event}
	if f.Property != "" {
		agg["property"] = f.Property
	}
	if f.Within != "" {
		agg["within"] = f.Within
	}
	if f.Where != "" {
		var where any
		if err := json.Unmarshal([]byte(f.Where), &where); err != nil {
			f.Errors["where"] = "This is not JSON: " + err.Error() + "."
			return nil
		}
		agg["where"] = where
	}
	m := map[string]any{"name": f.Name, "source": f.Source, f.Kind: agg}
	if f.Realtime {
		m["realtime"] = true
	}
	return m
}

// place puts the API's field errors next to the form's fields; it returns the rest.
func (f *traitForm) place(errs map[string]string) string {
	var rest []string
	for _, field := range slices.Sorted(maps.Keys(errs)) { // the outer field's message first
		msg := errs[field]
		sub, inKind := strings.CutPrefix(field, f.Kind+".")
		switch {
		case commonField(field):
			f.Errors[field] = msg
		case inKind && (sub == "event" || sub == "property" || sub == "within"):
			f.Errors[sub] = msg
		case inKind && strings.HasPrefix(sub, "where"):
			if sub != "where" {
				msg = sub + ": " + msg
			}
			if f.Errors["where"] == "" {
				f.Errors["where"] = msg
			}
		case field == f.Kind || slices.Contains(schemas.AggregateKinds, field):
			f.Errors["kind"] = msg
		default:
			rest = append(rest, field+": "+msg)
		}
	}
	sort.Strings(rest)
	return strings.Join(rest, " ")
}

// traitFormOf reads the posted computed trait form.
func traitFormOf(r *http.Request) *traitForm {
	v := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	return &traitForm{formBase: formBaseOf(r), Kind: v("kind"), Event: v("event"), Property: v("property"), Where: v("where")}
}
