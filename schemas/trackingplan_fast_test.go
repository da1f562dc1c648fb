package schemas

import (
	"bytes"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fastCases are schemas the pre-check handles and values around their edges.
var fastCases = []struct {
	schema string
	values []string
}{
	{`{"type":"number","minimum":0,"maximum":10}`, []string{`0`, `10`, `-0`, `1e1`, `10.0000000000000001`, `-1e-300`, `5`, `11`, `"5"`, `null`, `12345678901234567890`}},
	{`{"type":"integer","exclusiveMinimum":1,"exclusiveMaximum":3}`, []string{`1`, `2`, `3`, `2.0`, `2.5`, `1.0000000000000001`, `2e0`}},
	{`{"minimum":0.1}`, []string{`0.1`, `0.10000000000000001`, `0.09999999999999999`, `1`, `"x"`, `true`}},
	{`{"type":"string","minLength":2,"maxLength":3,"pattern":"^[a-z]+$"}`, []string{`"ab"`, `"a"`, `"abcd"`, `"éé"`, `"a\u0062"`, `"AB"`, `""`, `1`}},
	{`{"enum":["USD","EUR"]}`, []string{`"USD"`, `"usd"`, `"U\u0053D"`, `1`, `null`, `["USD"]`}},
	{`{"type":"object","required":["a","b"],"properties":{"a":{"type":"string"},"b":{"type":["number","null"]}},"additionalProperties":false}`,
		[]string{`{"a":"x","b":1}`, `{"a":"x","b":null}`, `{"a":"x"}`, `{"a":"x","b":1,"c":2}`, `{"a":"x","b":"1"}`, `{"\u0061":"x","b":1}`, `{"a":"x","a":1,"b":1}`, `[]`, `{}`}},
	{`{"type":"object","additionalProperties":{"type":"boolean"}}`, []string{`{"x":true}`, `{"x":1}`, `{}`}},
	{`{"type":"array","minItems":1,"maxItems":2,"items":{"type":"object","required":["sku"]}}`,
		[]string{`[]`, `[{"sku":1}]`, `[{"sku":1},{"sku":2}]`, `[{"sku":1},{"sku":2},{"sku":3}]`, `[{}]`, `[1]`, `{}`}},
	{`{"format":"email","type":"string"}`, []string{`"a@b.c"`, `"nope"`}},
	{`{"type":"boolean"}`, []string{`true`, `false`, `0`, `"true"`}},
	{`{"properties":{"n":{"type":"null"}},"required":[]}`, []string{`{"n":null}`, `{"n":0}`, `5`}},
	{`true`, []string{`1`, `{}`}},
}

// TestFastSchemaNeverMoreLenient: whatever the pre-check calls surely valid, the validator
// accepts (it may say "don't know" for valid values: the validator then decides).
func TestFastSchemaNeverMoreLenient(t *testing.T) {
	for _, c := range fastCases {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(c.schema)))
		if err != nil {
			t.Fatal(err)
		}
		f := compileFast(doc, true)
		if f == nil {
			t.Fatalf("%s: the pre-check does not handle it", c.schema)
		}
		sch := mustCompile(t, c.schema)
		for _, v := range c.values {
			inst, err := decodeJSONValue([]byte(v))
			if err != nil {
				t.Fatal(err)
			}
			if f.valid([]byte(v)) && sch.Validate(inst) != nil {
				t.Errorf("schema %s, value %s: pre-check valid, validator refuses: %v", c.schema, v, sch.Validate(inst))
			}
		}
	}
	// The common case is decided without the validator.
	f := compileFast(map[string]any{"type": "string"}, true)
	if !f.valid([]byte(`"x"`)) {
		t.Error(`{"type":"string"} and "x": the pre-check does not know`)
	}
}

// TestCompileFastDeclines: keywords the pre-check does not handle leave it out.
func TestCompileFastDeclines(t *testing.T) {
	for _, s := range []string{`{"anyOf":[{"type":"string"}]}`, `{"$ref":"#/$defs/x","$defs":{"x":{}}}`, `{"const":1}`, `{"enum":[1]}`,
		`{"properties":{"a":{"patternProperties":{"x":{}}}}}`, `{"$schema":"http://json-schema.org/draft-04/schema#"}`, `{"items":[{}]}`, `false`} {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(s)))
		if err != nil {
			t.Fatal(err)
		}
		if compileFast(doc, true) != nil {
			t.Errorf("%s: compiled", s)
		}
	}
}

func mustCompile(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(schema)))
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("t.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("t.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// FuzzFastSchema holds the pre-check to the validator on any value: never more lenient.
func FuzzFastSchema(f *testing.F) {
	for i, c := range fastCases {
		for _, v := range c.values {
			f.Add(i, v)
		}
	}
	type compiled struct {
		fast *fastSchema
		sch  *jsonschema.Schema
	}
	var cs []compiled
	for _, c := range fastCases {
		doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(c.schema)))
		cs = append(cs, compiled{compileFast(doc, true), mustCompile(f, c.schema)})
	}
	f.Fuzz(func(t *testing.T, i int, v string) {
		if i < 0 {
			i = -i
		}
		c := cs[i%len(cs)]
		inst, err := decodeJSONValue([]byte(v))
		if err != nil {
			if c.fast.valid([]byte(v)) {
				t.Fatalf("%q is not JSON, and the pre-check calls it valid", v)
			}
			return
		}
		if c.fast.valid([]byte(v)) && c.sch.Validate(inst) != nil {
			t.Fatalf("schema %d, value %s: pre-check valid, validator refuses", i%len(cs), v)
		}
	})
}
