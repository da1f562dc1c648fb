package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Checking calls against a tracking plan (docs/routing.md#tracking-plans). The JSON Schemas
// are compiled once per version of a plan (Plan.Compiled) with
// github.com/santhosh-tekuri/jsonschema/v6, a maintained validator that passes the official
// JSON-Schema-Test-Suite: draft 2020-12 unless a schema says otherwise, formats asserted, and no
// $ref outside the schema itself (nothing is fetched).

// HeaderForwardedFrom, on a tracking.events record the router wrote (a call a tracking plan
// blocked, or a Violation Generated call, forwarded to another source), names the source it
// was forwarded from (docs/topics.md#trackingevents). Such a record is never forwarded again,
// so two sources that forward to each other cannot loop.
const HeaderForwardedFrom = "forwarded-from"

// Violation types: the type of a Violation (Segment's names where Segment has one).
const (
	ViolationRequired       = "Required"
	ViolationInvalidType    = "Invalid Type"
	ViolationInvalidValue   = "Invalid Value"
	ViolationInvalidFormat  = "Invalid Format"
	ViolationUnplannedField = "Unplanned Property"
)

// Violation is one way a call breaks its tracking plan, as added to the delivered call's
// context.violations: {"type": "Invalid Type", "field": "properties.total", "description":
// "properties.total must be number, got string"}. The description names types and keywords,
// never the offending value.
type Violation struct {
	Type        string `json:"type"`
	Field       string `json:"field"`
	Description string `json:"description"`
}

// MaxViolations is the most violations one call reports (the first ones found).
const MaxViolations = 20

// CompiledPlan is a tracking plan ready to check calls. It is immutable and safe for
// concurrent use.
type CompiledPlan struct {
	ID, Name string
	common   *planSchema
	identify *planSchema
	group    *planSchema
	events   map[string]*planSchema
}

// planSchema is one compiled schema with the top-level property names it plans (nil: it
// plans any; the schema has no "properties").
type planSchema struct {
	sch     *jsonschema.Schema // nil: no schema, anything goes
	fast    *fastSchema        // nil: the schema uses keywords the pre-check does not handle
	planned map[string]bool
}

type schemaError struct{ path, msg string }

// compilePlan compiles every schema of p; errs name each bad one by its path under rules.
func compilePlan(p *Plan) (*CompiledPlan, []schemaError) {
	c := &CompiledPlan{ID: p.ID, Name: p.Name, events: make(map[string]*planSchema, len(p.Rules.Events))}
	var errs []schemaError
	compile := func(path string, raw json.RawMessage) *planSchema {
		ps := &planSchema{}
		if len(raw) == 0 {
			return ps
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err == nil {
			comp := jsonschema.NewCompiler()
			comp.DefaultDraft(jsonschema.Draft2020)
			comp.AssertFormat()
			comp.UseLoader(jsonschema.SchemeURLLoader{}) // no $ref to the network or the disk
			const url = "tributary:///plan.json"
			if err = comp.AddResource(url, doc); err == nil {
				ps.sch, err = comp.Compile(url)
			}
		}
		if err != nil {
			errs = append(errs, schemaError{path, schemaErrorText(err)})
			return ps
		}
		ps.fast = compileFast(doc, true)
		if obj, ok := doc.(map[string]any); ok {
			if props, ok := obj["properties"].(map[string]any); ok {
				ps.planned = make(map[string]bool, len(props))
				for k := range props {
					ps.planned[k] = true
				}
			}
		}
		return ps
	}
	c.common = compile("common", p.Rules.Common)
	c.identify = compile("identify", p.Rules.Identify)
	c.group = compile("group", p.Rules.Group)
	for i, e := range p.Rules.Events {
		c.events[e.Name] = compile(fieldPath(indexPath("events", i), "properties"), e.Properties)
	}
	return c, errs
}

// PlanCheck is what checking one call against a plan found.
type PlanCheck struct {
	// Unplanned: a track call whose event is not in the plan (nothing else is checked).
	Unplanned bool
	// Violations of the event's properties schema (track) or the traits schema (identify,
	// group), after the unplanned properties or traits were omitted when the source omits them.
	Violations []Violation
	// Common are the violations of the plan's common schema.
	Common []Violation
	// Omit are the top-level keys of properties (track) or traits (identify, group) the
	// source's options omit: unplanned ones, and those with a violation.
	Omit []string
}

// Blocked reports whether the source's options block the call.
func (r *PlanCheck) Blocked(opts *TrackingPlan, typ string) bool {
	schema, common := opts.BlockOnViolations(typ)
	return (r.Unplanned && opts.BlockUnplannedTrack()) || (schema && len(r.Violations) > 0) || (common && len(r.Common) > 0)
}

// Field returns the member of a call the plan checks for calls of type typ: "properties" for
// track, "traits" for identify and group, "" for the others.
func PlanField(typ string) string {
	switch typ {
	case TypeTrack:
		return "properties"
	case TypeIdentify, TypeGroup:
		return "traits"
	}
	return ""
}

// Check checks one call (its JSON, the whole message) of type typ (and event, for track)
// against the plan with the source's options opts. Only track, identify and group calls are
// checked. The error is a message that is not a JSON object.
func (c *CompiledPlan) Check(opts *TrackingPlan, typ, event string, msg []byte) (PlanCheck, error) {
	var field []byte
	name := PlanField(typ)
	if err := EachMember(msg, func(k, v []byte) error {
		if name != "" && string(k) == name {
			field = v
		}
		return nil
	}); err != nil {
		return PlanCheck{}, err
	}
	return c.CheckField(opts, typ, event, field, msg)
}

// CheckField is Check for a caller that has read the call's properties (track) or traits
// (identify, group) already: their raw value is field (nil: absent). msg, the whole call, is
// read only for the plan's common schema.
func (c *CompiledPlan) CheckField(opts *TrackingPlan, typ, event string, fieldValue, msg []byte) (PlanCheck, error) {
	var r PlanCheck
	var ps *planSchema
	switch typ {
	case TypeTrack:
		var ok bool
		if ps, ok = c.events[event]; !ok {
			r.Unplanned = true
			return r, nil
		}
	case TypeIdentify:
		ps = c.identify
	case TypeGroup:
		ps = c.group
	default:
		return r, nil
	}
	field := PlanField(typ)
	omitUnplanned := opts.OmitUnplanned(typ) && ps.planned != nil
	if ps.sch != nil || omitUnplanned {
		raw := fieldValue
		if len(raw) == 0 {
			raw = emptyObject
		}
		if omitUnplanned && raw[0] == '{' {
			_ = EachMember(raw, func(k, _ []byte) error {
				if !ps.planned[string(k)] {
					r.Omit = append(r.Omit, string(k))
				}
				return nil
			})
			slices.Sort(r.Omit)
			r.Omit = slices.Compact(r.Omit)
		}
		if ps.sch != nil && (len(r.Omit) > 0 || ps.fast == nil || !ps.fast.valid(raw)) {
			inst, err := decodeInstance(raw)
			if err != nil {
				return r, err
			}
			if obj, ok := inst.(map[string]any); ok {
				for _, k := range r.Omit {
					delete(obj, k)
				}
			}
			r.Violations = violations(ps.sch.Validate(inst), field, nil)
			if opts.OmitInvalid(typ) {
				for _, v := range r.Violations {
					if k := topKey(v.Field, field); k != "" && !slices.Contains(r.Omit, k) {
						r.Omit = append(r.Omit, k)
					}
				}
			}
		}
	}
	if c.common.sch != nil && (c.common.fast == nil || !c.common.fast.valid(bytes.TrimSpace(msg))) {
		inst, err := decodeInstance(msg)
		if err != nil {
			return r, err
		}
		r.Common = violations(c.common.sch.Validate(inst), "", nil)
	}
	return r, nil
}

var emptyObject = []byte("{}")

// topKey is the first key under prefix of a violation's field ("properties.a.b" → "a"), or "".
func topKey(field, prefix string) string {
	rest, ok := strings.CutPrefix(field, prefix+".")
	if !ok {
		return ""
	}
	k, _, _ := strings.Cut(rest, ".")
	return k
}

// decodeInstance decodes a JSON value for the validator (numbers as json.Number); absent (nil)
// is an empty object.
func decodeInstance(raw []byte) (any, error) {
	if len(raw) == 0 {
		return map[string]any{}, nil
	}
	return decodeJSONValue(raw)
}

var printer = message.NewPrinter(language.English)

// schemaErrorText is one line saying why a schema does not compile: for a schema that breaks
// its metaschema, the first keyword at fault ("at /type: value must be one of ...").
func schemaErrorText(err error) string {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		for len(ve.Causes) > 0 {
			ve = ve.Causes[0]
		}
		return fmt.Sprintf("at /%s: %s", strings.Join(ve.InstanceLocation, "/"), ve.ErrorKind.LocalizedString(printer))
	}
	return strings.ReplaceAll(err.Error(), "tributary:///plan.json", "the schema")
}

// violations maps the validator's error tree to violations, leaves first, at most
// MaxViolations; prefix is the field the validated value is ("properties").
func violations(err error, prefix string, out []Violation) []Violation {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return out
	}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(out) >= MaxViolations {
			return
		}
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		field := joinField(prefix, e.InstanceLocation)
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, m := range k.Missing {
				f := joinField(field, []string{m})
				out = append(out, Violation{ViolationRequired, f, f + " is required"})
			}
		case *kind.Type:
			out = append(out, Violation{ViolationInvalidType, field, fmt.Sprintf("%s must be %s, got %s", orRoot(field), strings.Join(k.Want, " or "), k.Got)})
		case *kind.AdditionalProperties:
			for _, p := range k.Properties {
				f := joinField(field, []string{p})
				out = append(out, Violation{ViolationUnplannedField, f, f + " is not planned"})
			}
		case *kind.Format:
			out = append(out, Violation{ViolationInvalidFormat, field, fmt.Sprintf("%s must be a valid %s", orRoot(field), k.Want)})
		case *kind.Enum:
			out = append(out, Violation{ViolationInvalidValue, field, orRoot(field) + " must be one of the values the plan lists"})
		case *kind.Const:
			out = append(out, Violation{ViolationInvalidValue, field, orRoot(field) + " must be the value the plan sets"})
		case *kind.Pattern:
			out = append(out, Violation{ViolationInvalidValue, field, fmt.Sprintf("%s must match %s", orRoot(field), k.Want)})
		case *kind.FalseSchema:
			out = append(out, Violation{ViolationUnplannedField, field, orRoot(field) + " is not allowed"})
		default:
			out = append(out, Violation{ViolationInvalidValue, field, fmt.Sprintf("%s breaks the schema's %s", orRoot(field), strings.Join(k.KeywordPath(), "/"))})
		}
	}
	walk(ve)
	return out[:min(len(out), MaxViolations)]
}

func orRoot(field string) string {
	if field == "" {
		return "the call"
	}
	return field
}

// joinField is "properties.products.0.sku" for prefix "properties" and location
// ["products","0","sku"].
func joinField(prefix string, loc []string) string {
	n := len(prefix) + len(loc)
	for _, s := range loc {
		n += len(s)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(prefix)
	for _, s := range loc {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// AppendViolations appends vs as a JSON array.
func AppendViolations(dst []byte, vs []Violation) []byte {
	dst = append(dst, '[')
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, v.Type)
		dst = append(dst, `,"field":`...)
		dst = appendString(dst, v.Field)
		dst = append(dst, `,"description":`...)
		dst = appendString(dst, v.Description)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

var rawJSONType = reflect.TypeFor[json.RawMessage]()

// rawJSON decodes a JSON value written in YAML or JSON (a tracking plan's schema) into a
// json.RawMessage.
func (d *decoder) rawJSON(n *yaml.Node, path string, v reflect.Value) {
	if isNull(n) {
		v.SetZero()
		return
	}
	val, ok := d.nodeValue(n, path, 0)
	if !ok {
		return
	}
	b, err := json.Marshal(val)
	if err != nil {
		d.fail(n, path, "want a JSON value: %v", err)
		return
	}
	v.SetBytes(b)
}

// nodeValue converts a YAML node to a value encoding/json writes as the same JSON.
func (d *decoder) nodeValue(n *yaml.Node, path string, depth int) (any, bool) {
	if depth > maxSchemaDepth {
		d.fail(n, path, "nested deeper than %d levels", maxSchemaDepth)
		return nil, false
	}
	if d.budget--; d.budget < 0 {
		if d.budget == -1 {
			d.fail(n, path, "the config has more than %d values (aliases expanded)", maxConfigValues)
		}
		return nil, false
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nil, false
		}
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, ok := d.mapKey(n.Content[i], path)
			if !ok {
				return nil, false
			}
			if _, dup := m[k]; dup {
				d.fail(n.Content[i], keyPath(path, k), "repeated key")
				return nil, false
			}
			val, ok := d.nodeValue(n.Content[i+1], keyPath(path, k), depth+1)
			if !ok {
				return nil, false
			}
			m[k] = val
		}
		return m, true
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			val, ok := d.nodeValue(c, indexPath(path, i), depth+1)
			if !ok {
				return nil, false
			}
			s = append(s, val)
		}
		return s, true
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, true
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				d.fail(n, path, "want true or false, got %q", n.Value)
				return nil, false
			}
			return b, true
		case "!!int", "!!float":
			if json.Valid([]byte(n.Value)) {
				return json.Number(n.Value), true
			}
			f, ok := number(n)
			if !ok || !finite(f) {
				d.fail(n, path, "want a number, got %q", n.Value)
				return nil, false
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), true
		default:
			s, ok := d.str(n, path)
			return s, ok
		}
	}
	d.fail(n, path, "want a JSON value, got %s", describe(n))
	return nil, false
}

// maxSchemaDepth bounds the nesting of a schema in a config file.
const maxSchemaDepth = 64
