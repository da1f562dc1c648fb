package schemas

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestTrackingPlanConfigBad holds one file per tracking-plan error of a config file
// (testdata/trackingplans), with the exact message, line included.
func TestTrackingPlanConfigBad(t *testing.T) {
	checkBadConfigFiles(t, "testdata/trackingplans", []badConfigFile{
		{"bad_unknown_plan.yaml", `5: sources[0].trackingPlan.planId: unknown tracking plan "shopp"`},
		{"bad_schema.yaml", `7: trackingPlans[0].rules.events[0].properties: is not a valid JSON Schema: at /type: value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'`},
		{"bad_schema_ref.yaml", `4: trackingPlans[0].rules.identify: is not a valid JSON Schema: failing loading "https://example.com/traits.json": no URLLoader registered for "https://example.com/traits.json"`},
		{"bad_forwarding.yaml", `6: sources[0].trackingPlan.forwardingViolationsTo: must name another source than "web" itself` + "\n" +
			`7: sources[0].trackingPlan.forwardingBlockedEventsTo: unknown source "nowhere"`},
		{"bad_options.yaml", `4: sources[0].trackingPlan.planId: is required with the tracking plan options (allow*, common*, forwarding*)` + "\n" +
			`6: sources[0].trackingPlan.commonTrackEventOnViolations: must be "ALLOW" or "BLOCK", got "block"`},
		{"bad_plan_ids.yaml", `6: trackingPlans[0].rules.events[1].name: event "Order Completed" is planned twice (first at trackingPlans[0].rules.events[0])` + "\n" +
			`7: trackingPlans[0].rules.events[2].name: is required` + "\n" +
			`8: trackingPlans[1].id: duplicate id "shop" (first used by trackingPlans[0])`},
		{"bad_plan_field.yaml", `4: trackingPlans[0].rules: unknown field "event" (did you mean "events"?)`},
	})
}

// TestTrackingPlanConfigGood: a plan written in YAML or JSON becomes the same JSON Schemas, is
// compiled by Validate, and survives its tributary.config record (compiled again on decode).
func TestTrackingPlanConfigGood(t *testing.T) {
	for _, f := range []string{"good_plan.yaml", "good_plan.json"} {
		t.Run(f, func(t *testing.T) {
			cfg, err := LoadConfigFile("testdata/trackingplans/" + f)
			if err != nil {
				t.Fatal(err)
			}
			p := &cfg.TrackingPlans[0]
			if p.Compiled() == nil {
				t.Fatal("Validate did not compile the plan")
			}
			recs, err := cfg.Records()
			if err != nil {
				t.Fatal(err)
			}
			var rec ConfigRecord
			for _, r := range recs {
				if strings.HasPrefix(r.Key, ConfigKeyTrackingPlan) {
					rec = r
				}
			}
			if rec.Key != "tracking-plan/shop" {
				t.Fatalf("records %v: no tracking-plan/shop", recs)
			}
			obj, err := DecodeConfigRecord(rec.Key, rec.Value)
			if err != nil {
				t.Fatal(err)
			}
			if obj.TrackingPlan == nil || obj.TrackingPlan.Compiled() == nil {
				t.Fatalf("decoded %+v: not compiled", obj)
			}
			if a, b := canon(t, p.Rules.Events[0].Properties), canon(t, obj.TrackingPlan.Rules.Events[0].Properties); a != b {
				t.Errorf("schema after the record %s, want %s", b, a)
			}
		})
	}
	cfg, err := LoadConfigFile("testdata/trackingplans/good_plan.json")
	if err != nil {
		t.Fatal(err)
	}
	// Numbers keep their digits (no float64 rounding).
	if s := string(cfg.TrackingPlans[0].Rules.Events[0].Properties); !strings.Contains(s, "12345678901234567890") {
		t.Errorf("schema %s lost the digits of maximum", s)
	}
}

func canon(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

const testPlanYAML = `
sources:
  - {id: web, writeKey: wk}
trackingPlans:
  - id: shop
    name: Shop
    rules:
      common:
        type: object
        properties:
          context:
            type: object
            required: [app]
      events:
        - name: Order Completed
          properties:
            type: object
            required: [total, currency]
            properties:
              total: {type: number, minimum: 0}
              currency: {type: string, enum: [USD, EUR]}
              coupon: {type: string, pattern: "^[A-Z]+$"}
              at: {type: string, format: date-time}
        - name: Signed Up
      identify:
        type: object
        properties:
          email: {type: string}
          plan: {type: string}
      group:
        type: object
        required: [name]
        properties:
          name: {type: string}
`

func testPlan(t testing.TB) *CompiledPlan {
	t.Helper()
	cfg, err := ParseConfig([]byte(testPlanYAML), ConfigFormatYAML)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	return cfg.TrackingPlans[0].Compiled()
}

func boolp(b bool) *bool { return &b }

// TestPlanCheck checks calls against a plan under each option: unplanned events, unplanned
// properties and traits omitted, violations with their type, field and description, the
// properties with violations omitted, the common schema, and what each option blocks.
func TestPlanCheck(t *testing.T) {
	c := testPlan(t)
	tests := []struct {
		name       string
		opts       TrackingPlan
		typ, event string
		msg        string
		want       PlanCheck
		blocked    bool
	}{
		{name: "valid", typ: TypeTrack, event: "Order Completed",
			msg:  `{"type":"track","event":"Order Completed","properties":{"total":10,"currency":"USD","extra":1},"context":{"app":{}}}`,
			want: PlanCheck{}},
		{name: "unplanned event allowed", typ: TypeTrack, event: "Nope",
			msg:  `{"type":"track","event":"Nope","context":{"app":{}}}`,
			want: PlanCheck{Unplanned: true}},
		{name: "unplanned event blocked", opts: TrackingPlan{AllowUnplannedTrackEvents: boolp(false)}, typ: TypeTrack, event: "Nope",
			msg:  `{"type":"track","event":"Nope"}`,
			want: PlanCheck{Unplanned: true}, blocked: true},
		{name: "planned event without a schema", typ: TypeTrack, event: "Signed Up",
			msg:  `{"type":"track","event":"Signed Up","properties":{"x":1},"context":{"app":{}}}`,
			want: PlanCheck{}},
		{name: "violations passed", typ: TypeTrack, event: "Order Completed",
			msg: `{"type":"track","event":"Order Completed","properties":{"total":"ten","currency":"GBP","coupon":"abc","at":"yesterday"},"context":{"app":{}}}`,
			want: PlanCheck{Violations: []Violation{
				{ViolationInvalidFormat, "properties.at", "properties.at must be a valid date-time"},
				{ViolationInvalidValue, "properties.coupon", "properties.coupon must match ^[A-Z]+$"},
				{ViolationInvalidValue, "properties.currency", "properties.currency must be one of the values the plan lists"},
				{ViolationInvalidType, "properties.total", "properties.total must be number, got string"},
			}}},
		{name: "violations block", opts: TrackingPlan{AllowTrackEventOnViolations: boolp(false)}, typ: TypeTrack, event: "Order Completed",
			msg:  `{"type":"track","event":"Order Completed","properties":{"total":1},"context":{"app":{}}}`,
			want: PlanCheck{Violations: []Violation{{ViolationRequired, "properties.currency", "properties.currency is required"}}}, blocked: true},
		{name: "no properties at all", typ: TypeTrack, event: "Order Completed",
			msg: `{"type":"track","event":"Order Completed","context":{"app":{}}}`,
			want: PlanCheck{Violations: []Violation{
				{ViolationRequired, "properties.total", "properties.total is required"},
				{ViolationRequired, "properties.currency", "properties.currency is required"},
			}}},
		{name: "unplanned properties omitted", opts: TrackingPlan{AllowUnplannedTrackEventProperties: boolp(false)}, typ: TypeTrack, event: "Order Completed",
			msg:  `{"type":"track","event":"Order Completed","properties":{"total":1,"currency":"EUR","zeta":1,"alpha":{"b":2}},"context":{"app":{}}}`,
			want: PlanCheck{Omit: []string{"alpha", "zeta"}}},
		{name: "properties with violations omitted", opts: TrackingPlan{AllowTrackPropertiesOnViolations: boolp(false)}, typ: TypeTrack, event: "Order Completed",
			msg: `{"type":"track","event":"Order Completed","properties":{"total":-1,"currency":"EUR"},"context":{"app":{}}}`,
			want: PlanCheck{Violations: []Violation{{ViolationInvalidValue, "properties.total", "properties.total breaks the schema's minimum"}},
				Omit: []string{"total"}}},
		{name: "unplanned traits omitted", opts: TrackingPlan{AllowUnplannedIdentifyTraits: boolp(false)}, typ: TypeIdentify,
			msg:  `{"type":"identify","traits":{"email":"a@b.c","age":3},"context":{"app":{}}}`,
			want: PlanCheck{Omit: []string{"age"}}},
		{name: "identify traits with violations omitted", opts: TrackingPlan{AllowIdentifyTraitsOnViolations: boolp(false)}, typ: TypeIdentify,
			msg:  `{"type":"identify","traits":{"email":5},"context":{"app":{}}}`,
			want: PlanCheck{Violations: []Violation{{ViolationInvalidType, "traits.email", "traits.email must be string, got number"}}, Omit: []string{"email"}}},
		{name: "group violation", typ: TypeGroup,
			msg:  `{"type":"group","traits":{},"context":{"app":{}}}`,
			want: PlanCheck{Violations: []Violation{{ViolationRequired, "traits.name", "traits.name is required"}}}},
		{name: "common violation passed", typ: TypeIdentify,
			msg:  `{"type":"identify","traits":{},"context":{}}`,
			want: PlanCheck{Common: []Violation{{ViolationRequired, "context.app", "context.app is required"}}}},
		{name: "common violation blocked", opts: TrackingPlan{CommonIdentifyEventOnViolations: PlanBlock}, typ: TypeIdentify,
			msg:  `{"type":"identify","traits":{}}`,
			want: PlanCheck{}, blocked: false},
		{name: "common violation of a track blocked", opts: TrackingPlan{CommonTrackEventOnViolations: PlanBlock}, typ: TypeTrack, event: "Signed Up",
			msg:  `{"type":"track","event":"Signed Up","context":{"library":{}}}`,
			want: PlanCheck{Common: []Violation{{ViolationRequired, "context.app", "context.app is required"}}}, blocked: true},
		{name: "page is not checked but by the common schema", typ: TypePage,
			msg:  `{"type":"page","properties":{"x":1}}`,
			want: PlanCheck{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.PlanID = "shop"
			got, err := c.Check(&tt.opts, tt.typ, tt.event, []byte(tt.msg))
			if err != nil {
				t.Fatal(err)
			}
			sortViolations(got.Violations)
			sortViolations(tt.want.Violations)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Check = %+v\nwant    %+v", got, tt.want)
			}
			if b := got.Blocked(&tt.opts, tt.typ); b != tt.blocked {
				t.Errorf("Blocked = %v, want %v", b, tt.blocked)
			}
		})
	}
}

func sortViolations(vs []Violation) {
	slices.SortFunc(vs, func(a, b Violation) int { return strings.Compare(a.Field, b.Field) })
}

// TestAppendViolations: context.violations is Segment's shape, and escapes what JSON needs.
func TestAppendViolations(t *testing.T) {
	b := AppendViolations(nil, []Violation{{ViolationRequired, `properties."x"`, "is required"}})
	var got []map[string]string
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	want := []map[string]string{{"type": "Required", "field": `properties."x"`, "description": "is required"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestDecodeJSONValue holds the decoder the validator reads to encoding/json's: the same
// values (numbers as json.Number), and an error for what is not JSON.
func TestDecodeJSONValue(t *testing.T) {
	for _, in := range []string{`{}`, `[]`, ` {"a":[1,-2.5e3,true,false,null,"x\u00e9\n"],"b":{"c":{}}} `, `"s"`, `0`} {
		got, err := decodeJSONValue([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		dec := json.NewDecoder(strings.NewReader(in))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %#v, want %#v", in, got, want)
		}
	}
	for _, in := range []string{``, `{`, `{"a"}`, `[1,]`, `{"a":1}x`, `01`, `tru`, `"\x01"`, strings.Repeat("[", 200) + strings.Repeat("]", 200)} {
		if _, err := decodeJSONValue([]byte(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

// track1KB is a typical track call of about 1 KB, valid against bench1KBPlan's schema.
const track1KB = `{"type":"track","event":"Order Completed","userId":"user-12345","anonymousId":"a-9f8e7d","messageId":"0b3f6c1e-5b7e-4a8e-9f0c-2f1d3e4c5b6a","properties":{"orderId":"o-1","checkoutId":"c-77","affiliation":"Web Store","total":129.99,"subtotal":119.99,"revenue":110.5,"shipping":5,"tax":5,"discount":2.5,"coupon":"SPRING","currency":"USD","products":[{"productId":"p-1","sku":"s-1","name":"Blue Shirt","price":64.99,"quantity":2,"category":"Shirts","url":"https://shop.example.com/p-1"},{"productId":"p-2","sku":"s-2","name":"Red Hat","price":19.99,"quantity":1,"category":"Hats","url":"https://shop.example.com/p-2"},{"productId":"p-3","sku":"s-3","name":"Socks","price":4.99,"quantity":3,"category":"Socks","url":"https://shop.example.com/p-3"}]},"context":{"ip":"203.0.113.9","library":{"name":"analytics-go","version":"3.3.0"},"userAgent":"Mozilla/5.0 (X11; Linux x86_64)","page":{"path":"/checkout","url":"https://shop.example.com/checkout"}},"integrations":{"All":true},"timestamp":"2026-01-01T00:00:00.000Z","sentAt":"2026-01-01T00:00:00.100Z","receivedAt":"2026-01-01T00:00:00.200Z"}`

const bench1KBPlan = `
trackingPlans:
  - id: shop
    rules:
      events:
        - name: Order Completed
          properties:
            type: object
            required: [orderId, total, currency, products]
            properties:
              orderId: {type: string}
              checkoutId: {type: string}
              affiliation: {type: string}
              total: {type: number, minimum: 0}
              subtotal: {type: number}
              revenue: {type: number}
              shipping: {type: number}
              tax: {type: number}
              discount: {type: number}
              coupon: {type: string}
              currency: {type: string, enum: [USD, EUR, GBP]}
              products:
                type: array
                items:
                  type: object
                  required: [productId, price]
                  properties:
                    productId: {type: string}
                    sku: {type: string}
                    name: {type: string}
                    price: {type: number, minimum: 0}
                    quantity: {type: integer, minimum: 1}
                    category: {type: string}
                    url: {type: string}
`

// BenchmarkValidateTrack1KB checks a typical 1 KB track call against its event's schema (the
// target is under 5 µs): "message" finds the properties in the call (a pass over the whole
// call) and checks them; "properties" checks properties the router's one pass over the call
// has found already (RoutingView.Properties), as the router does.
func BenchmarkValidateTrack1KB(b *testing.B) {
	cfg, err := ParseConfig([]byte(bench1KBPlan), ConfigFormatYAML)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		b.Fatal(err)
	}
	c := cfg.TrackingPlans[0].Compiled()
	msg := []byte(track1KB)
	opts := &TrackingPlan{PlanID: "shop"}
	if r, err := c.Check(opts, TypeTrack, "Order Completed", msg); err != nil || len(r.Violations) > 0 || r.Unplanned {
		b.Fatalf("%+v %v", r, err)
	}
	b.Run("message", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			_, _ = c.Check(opts, TypeTrack, "Order Completed", msg)
		}
	})
	v, err := DecodeRoutingView(msg)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("properties", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			_, _ = c.CheckField(opts, TypeTrack, "Order Completed", v.Properties, msg)
		}
	})
}
