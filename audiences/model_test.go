package audiences

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// testNow is the evaluation time of most tests: minute-aligned but not hour-aligned, so that
// the hour buckets of windows longer than 24 hours show their documented error.
var testNow = time.Date(2025, 6, 15, 12, 30, 0, 0, time.UTC).UnixMilli()

const (
	minute = int64(time.Minute / time.Millisecond)
	hour   = 60 * minute
	day    = 24 * hour
)

// compileYAML parses and validates a config whose audiences and computed traits are given in
// YAML (the source "engage" exists), and compiles it as the service does.
func compileYAML(t testing.TB, yaml string) *model {
	t.Helper()
	cfg, err := schemas.ParseConfig([]byte("sources: [{id: engage, writeKey: wk_engage}]\n"+yaml), schemas.ConfigFormatYAML)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatalf("config:\n%s\n%v", yaml, err)
	}
	auds := make([]*schemas.Audience, len(cfg.Audiences))
	for i := range cfg.Audiences {
		auds[i] = &cfg.Audiences[i]
	}
	cts := make([]*schemas.ComputedTrait, len(cfg.ComputedTraits))
	for i := range cfg.ComputedTraits {
		cts[i] = &cfg.ComputedTraits[i]
	}
	return compile(auds, cts)
}

// ruleModel compiles one audience whose rule is the YAML flow mapping rule, plus the
// computed traits of the YAML list traits (may be "").
func ruleModel(t testing.TB, rule, traits string) *model {
	t.Helper()
	y := "audiences: [{id: a, name: A, source: engage, rule: " + rule + "}]\n"
	if traits != "" {
		y += "computedTraits: " + traits + "\n"
	}
	return compileYAML(t, y)
}

// track applies a track event at `at` to p as handleMessage does, processed at now.
func track(m *model, p *profile, event, props string, at, now int64) {
	p.seen(at)
	if s := p.eventSeries(event, true); s != nil {
		s.add(at, now, 0, false)
	}
	m.apply(p, event, json.RawMessage(props), at, now)
}

func newProfile() *profile { return newUserProfile("u1") }

func TestTraitConditions(t *testing.T) {
	tests := []struct {
		name   string
		rule   string
		traits string // identify calls' traits, applied in order
		want   bool
	}{
		// equals
		{"equals string", `{trait: plan, equals: pro}`, `{"plan":"pro"}`, true},
		{"equals other string", `{trait: plan, equals: pro}`, `{"plan":"free"}`, false},
		{"equals is case-sensitive", `{trait: plan, equals: pro}`, `{"plan":"Pro"}`, false},
		{"equals number", `{trait: age, equals: 30}`, `{"age":30.0}`, true},
		{"equals number is not the string", `{trait: age, equals: 30}`, `{"age":"30"}`, false},
		{"equals quoted string is not the number", `{trait: age, equals: "30"}`, `{"age":30}`, false},
		{"equals true", `{trait: vip, equals: true}`, `{"vip":true}`, true},
		{"equals true is not 1", `{trait: vip, equals: true}`, `{"vip":1}`, false},
		{"equals false", `{trait: vip, equals: false}`, `{"vip":false}`, true},
		{"equals absent", `{trait: plan, equals: pro}`, `{}`, false},
		{"equals on an object", `{trait: address, equals: x}`, `{"address":{"city":"x"}}`, false},
		// notEquals
		{"notEquals other", `{trait: plan, notEquals: free}`, `{"plan":"pro"}`, true},
		{"notEquals same", `{trait: plan, notEquals: free}`, `{"plan":"free"}`, false},
		{"notEquals absent holds", `{trait: plan, notEquals: free}`, `{}`, true},
		{"notEquals number vs string", `{trait: age, notEquals: 30}`, `{"age":"30"}`, true},
		// exists
		{"exists true, present", `{trait: email, exists: true}`, `{"email":"a@example.com"}`, true},
		{"exists true, absent", `{trait: email, exists: true}`, `{"name":"x"}`, false},
		{"exists true, false value is present", `{trait: vip, exists: true}`, `{"vip":false}`, true},
		{"exists true, removed by null", `{trait: email, exists: true}`, `{"email":"a@example.com"}` + "\n" + `{"email":null}`, false},
		{"exists false, absent", `{trait: email, exists: false}`, `{}`, true},
		{"exists false, present", `{trait: email, exists: false}`, `{"email":""}`, false},
		{"exists false, removed by null", `{trait: email, exists: false}`, `{"email":"a"}` + "\n" + `{"email":null}`, true},
		// in
		{"in, listed", `{trait: plan, in: [pro, team]}`, `{"plan":"team"}`, true},
		{"in, not listed", `{trait: plan, in: [pro, team]}`, `{"plan":"free"}`, false},
		{"in, number", `{trait: tier, in: [1, 2]}`, `{"tier":2}`, true},
		{"in, string is not the number", `{trait: tier, in: [1, 2]}`, `{"tier":"2"}`, false},
		{"in, absent", `{trait: plan, in: [pro]}`, `{}`, false},
		// contains
		{"contains, string holds text", `{trait: email, contains: "@example."}`, `{"email":"a@example.com"}`, true},
		{"contains, string lacks text", `{trait: email, contains: "@example."}`, `{"email":"a@corp.com"}`, false},
		{"contains is case-sensitive", `{trait: name, contains: ada}`, `{"name":"Ada"}`, false},
		{"contains, list holds string", `{trait: tags, contains: beta}`, `{"tags":["alpha", "beta"]}`, true},
		{"contains, list lacks string", `{trait: tags, contains: gamma}`, `{"tags":["alpha","beta"]}`, false},
		{"contains, list holds number", `{trait: ids, contains: 2}`, `{"ids":[1,2,3]}`, true},
		{"contains, list of strings lacks number", `{trait: ids, contains: 2}`, `{"ids":["2"]}`, false},
		{"contains, list holds bool", `{trait: flags, contains: true}`, `{"flags":[false,true]}`, true},
		{"contains, object is not a list", `{trait: address, contains: city}`, `{"address":{"city":"x"}}`, false},
		{"contains, number is not a string", `{trait: zip, contains: "12"}`, `{"zip":12345}`, false},
		{"contains, absent", `{trait: tags, contains: beta}`, `{}`, false},
		// gt, gte, lt, lte
		{"gt above", `{trait: age, gt: 18}`, `{"age":19}`, true},
		{"gt equal", `{trait: age, gt: 18}`, `{"age":18}`, false},
		{"gte equal", `{trait: age, gte: 18}`, `{"age":18}`, true},
		{"gte below", `{trait: age, gte: 18}`, `{"age":17.9}`, false},
		{"lt below", `{trait: age, lt: 18}`, `{"age":-1}`, true},
		{"lt equal", `{trait: age, lt: 18}`, `{"age":18}`, false},
		{"lte equal", `{trait: age, lte: 18}`, `{"age":18}`, true},
		{"lte above", `{trait: age, lte: 18}`, `{"age":18.5}`, false},
		{"gte and lt range, inside", `{trait: age, gte: 18, lt: 65}`, `{"age":40}`, true},
		{"gte and lt range, at the top", `{trait: age, gte: 18, lt: 65}`, `{"age":65}`, false},
		{"gt on a numeric string never matches", `{trait: age, gt: 18}`, `{"age":"30"}`, false},
		{"lt on a string never matches", `{trait: age, lt: 18}`, `{"age":"abc"}`, false},
		{"gte 0 on false never matches", `{trait: vip, gte: 0}`, `{"vip":false}`, false},
		{"lte on a list never matches", `{trait: ids, lte: 100}`, `{"ids":[1]}`, false},
		{"gt on absent never matches", `{trait: age, gt: -1000}`, `{}`, false},
		// several operators: every one must hold
		{"exists and notEquals", `{trait: plan, exists: true, notEquals: free}`, `{}`, false},
		// later identify wins
		{"later identify wins", `{trait: plan, equals: pro}`, `{"plan":"pro"}` + "\n" + `{"plan":"free"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ruleModel(t, tt.rule, "")
			p := newProfile()
			for _, tr := range strings.Split(tt.traits, "\n") {
				p.mergeTraits(json.RawMessage(tr), nil)
			}
			if got := m.audiences[0].root.eval(p, testNow); got != tt.want {
				t.Errorf("rule %s with traits %s: member = %v, want %v", tt.rule, tt.traits, got, tt.want)
			}
		})
	}
}

func TestGroups(t *testing.T) {
	// The profile: plan pro, country FR, no email.
	traits := `{"plan":"pro","country":"FR"}`
	tests := []struct {
		name string
		rule string
		want bool
	}{
		{"all, every one holds", `{all: [{trait: plan, equals: pro}, {trait: country, equals: FR}]}`, true},
		{"all, one fails", `{all: [{trait: plan, equals: pro}, {trait: country, equals: DE}]}`, false},
		{"any, one holds", `{any: [{trait: plan, equals: free}, {trait: country, equals: FR}]}`, true},
		{"any, none holds", `{any: [{trait: plan, equals: free}, {trait: country, equals: DE}]}`, false},
		{"not of a holding condition", `{not: {trait: plan, equals: pro}}`, false},
		{"not of a failing condition", `{not: {trait: email, exists: true}}`, true},
		{"not not", `{not: {not: {trait: plan, equals: pro}}}`, true},
		{"all with a not", `{all: [{trait: plan, equals: pro}, {not: {trait: country, in: [DE, IT]}}]}`, true},
		{"any of alls", `{any: [{all: [{trait: plan, equals: free}, {trait: country, equals: FR}]}, {all: [{trait: plan, equals: pro}, {trait: country, equals: FR}]}]}`, true},
		{"all of anys, one any fails", `{all: [{any: [{trait: plan, equals: pro}]}, {any: [{trait: email, exists: true}, {trait: country, equals: DE}]}]}`, false},
		{"not of any", `{not: {any: [{trait: plan, equals: free}, {trait: country, equals: DE}]}}`, true},
		{"deep nesting", `{all: [{any: [{not: {all: [{trait: plan, equals: free}]}}]}]}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ruleModel(t, tt.rule, "")
			p := newProfile()
			p.mergeTraits(json.RawMessage(traits), nil)
			if got := m.audiences[0].root.eval(p, testNow); got != tt.want {
				t.Errorf("rule %s: member = %v, want %v", tt.rule, got, tt.want)
			}
		})
	}
}

// ev is one track event of a test: when (relative to testNow) and its properties.
type ev struct {
	ago   int64 // ms before testNow
	props string
}

func TestEventConditions(t *testing.T) {
	n := func(k int) []ev { // k events of the last hour, without properties
		out := make([]ev, k)
		for i := range out {
			out[i] = ev{ago: int64(i+1) * minute, props: `{}`}
		}
		return out
	}
	tests := []struct {
		name   string
		rule   string
		events []ev // "Order Completed", each processed when it happened
		want   bool
	}{
		{"ever, once", `{event: Order Completed}`, n(1), true},
		{"ever, never", `{event: Order Completed}`, nil, false},
		{"other event names do not count", `{event: Signed Up}`, n(3), false},
		{"atLeast reached", `{event: Order Completed, atLeast: 3}`, n(3), true},
		{"atLeast not reached", `{event: Order Completed, atLeast: 3}`, n(2), false},
		{"atMost alone, never", `{event: Order Completed, atMost: 2}`, nil, true},
		{"atMost alone, at the bound", `{event: Order Completed, atMost: 2}`, n(2), true},
		{"atMost alone, above", `{event: Order Completed, atMost: 2}`, n(3), false},
		{"atMost 0: never did it", `{event: Order Completed, atMost: 0}`, n(1), false},
		{"atLeast and atMost, below", `{event: Order Completed, atLeast: 2, atMost: 3}`, n(1), false},
		{"atLeast and atMost, inside", `{event: Order Completed, atLeast: 2, atMost: 3}`, n(3), true},
		{"atLeast and atMost, above", `{event: Order Completed, atLeast: 2, atMost: 3}`, n(4), false},
		{"atLeast equals atMost", `{event: Order Completed, atLeast: 2, atMost: 2}`, n(2), true},
		{"not of an event", `{not: {event: Order Completed}}`, nil, true},
		{"ever counts events older than 90 days", `{event: Order Completed, atLeast: 2}`, []ev{{ago: 100 * day, props: `{}`}, {ago: minute, props: `{}`}}, true},
		{"within counts only the window", `{event: Order Completed, within: 1h, atLeast: 2}`, []ev{{ago: 2 * hour, props: `{}`}, {ago: 30 * minute, props: `{}`}}, false},
		{"atMost within ignores older events", `{event: Order Completed, within: 1h, atMost: 1}`, []ev{{ago: 2 * hour}, {ago: 3 * hour}, {ago: 30 * minute}}, true},
		// where
		{"where gte, enough matching", `{event: Order Completed, atLeast: 2, where: [{property: revenue, gte: 100}]}`,
			[]ev{{1 * minute, `{"revenue":150}`}, {2 * minute, `{"revenue":50}`}, {3 * minute, `{"revenue":100}`}}, true},
		{"where gte, too few matching", `{event: Order Completed, atLeast: 2, where: [{property: revenue, gte: 100}]}`,
			[]ev{{1 * minute, `{"revenue":150}`}, {2 * minute, `{"revenue":50}`}, {3 * minute, `{"revenue":"200"}`}, {4 * minute, `{}`}}, false},
		{"where with properties. prefix", `{event: Order Completed, atLeast: 2, where: [{property: properties.revenue, gte: 100}]}`,
			[]ev{{1 * minute, `{"revenue":150}`}, {2 * minute, `{"revenue":100}`}}, true},
		{"where on a nested path", `{event: Order Completed, where: [{property: product.sku, equals: SKU-1}]}`,
			[]ev{{1 * minute, `{"product":{"sku":"SKU-1","price":5}}`}}, true},
		{"where on a nested path, other value", `{event: Order Completed, where: [{property: properties.product.sku, equals: SKU-1}]}`,
			[]ev{{1 * minute, `{"product":{"sku":"SKU-2"}}`}, {2 * minute, `{"product":"SKU-1"}`}, {3 * minute, `{"sku":"SKU-1"}`}}, false},
		{"where, every condition must hold", `{event: Order Completed, where: [{property: revenue, gte: 100}, {property: currency, equals: EUR}]}`,
			[]ev{{1 * minute, `{"revenue":150,"currency":"USD"}`}, {2 * minute, `{"revenue":50,"currency":"EUR"}`}}, false},
		{"where exists false counts events without it", `{event: Order Completed, where: [{property: coupon, exists: false}]}`,
			[]ev{{1 * minute, `{}`}}, true},
		{"where and within", `{event: Order Completed, within: 1h, where: [{property: revenue, gte: 100}]}`,
			[]ev{{2 * hour, `{"revenue":500}`}, {1 * minute, `{"revenue":5}`}}, false},
		{"where and atMost alone, no matching event", `{event: Order Completed, atMost: 0, where: [{property: revenue, gte: 100}]}`,
			[]ev{{1 * minute, `{"revenue":5}`}}, true},
		{"where on non-object properties", `{event: Order Completed, where: [{property: revenue, exists: true}]}`,
			[]ev{{1 * minute, `[1,2]`}, {2 * minute, `null`}, {3 * minute, ``}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ruleModel(t, tt.rule, "")
			p := newProfile()
			for _, e := range tt.events {
				at := testNow - e.ago
				track(m, p, "Order Completed", e.props, at, at) // "": a track without properties
			}
			if got := m.audiences[0].root.eval(p, testNow); got != tt.want {
				t.Errorf("rule %s: member = %v, want %v", tt.rule, got, tt.want)
			}
		})
	}
}

// TestWithinEdges checks windows at their edges, with the error bound of series.go: a window
// that ends less than 24 hours back counts an event when its minute starts inside the window;
// a longer one counts an event when its hour starts inside (up to 59 minutes of its oldest
// events are missed), and never counts an event from before the window.
func TestWithinEdges(t *testing.T) {
	hourAligned := time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC).UnixMilli()
	tests := []struct {
		name   string
		within string
		now    int64
		at     int64 // the event's time, relative to now
		want   bool
	}{
		// Minute buckets (windows up to 24 hours).
		{"1h, exactly at the start", "1h", testNow, -hour, true},
		{"1h, a minute before the start", "1h", testNow, -hour - minute, false},
		{"1h, a millisecond before the start", "1h", testNow, -hour - 1, false},
		{"1h, a minute after the start", "1h", testNow, -hour + minute, true},
		{"1h, just now", "1h", testNow, 0, true},
		{"24h, exactly at the start", "24h", testNow, -day, true},
		{"24h, a minute before the start", "24h", testNow, -day - minute, false},
		{"24h, a minute after the start", "24h", testNow, -day + minute, true},
		// now inside a minute: the start's minute counts whole (an error under a minute).
		{"1h, now at :30s, 20s before the start", "1h", testNow + 30_000, -hour - 20_000, true},
		{"1h, now at :30s, 31s before the start", "1h", testNow + 30_000, -hour - 31_000, false},
		// Hour buckets (windows over 24 hours); now on the hour: exact to the hour.
		{"48h on the hour, exactly at the start", "48h", hourAligned, -2 * day, true},
		{"48h on the hour, a minute before the start", "48h", hourAligned, -2*day - minute, false},
		{"48h on the hour, a minute after the start", "48h", hourAligned, -2*day + minute, true},
		// now at 12:30: the window starts at 12:30 two days ago, inside the hour bucket 12:00,
		// which is not counted: events of its first 30 minutes are missed.
		{"48h at :30, exactly at the start (missed, documented)", "48h", testNow, -2 * day, false},
		{"48h at :30, 29 minutes after the start (missed, documented)", "48h", testNow, -2*day + 29*minute, false},
		{"48h at :30, 30 minutes after the start (next hour)", "48h", testNow, -2*day + 30*minute, true},
		{"48h at :30, a minute before the start", "48h", testNow, -2*day - minute, false},
		{"48h at :30, 59 minutes after the start is within the bound", "48h", testNow, -2*day + 59*minute, true},
		{"90 days on the hour, exactly at the start", "2160h", hourAligned, -90 * day, true},
		{"90 days on the hour, a minute before the start", "2160h", hourAligned, -90*day - minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The event is processed when it happened; a second one, now, compacts the series
			// (minute buckets older than 24 hours become hour buckets) and makes atLeast 2
			// hold exactly when the first one counts.
			m := ruleModel(t, "{event: Order Completed, atLeast: 2, within: "+tt.within+"}", "")
			p := newProfile()
			at := tt.now + tt.at
			track(m, p, "Order Completed", `{}`, at, at)
			track(m, p, "Order Completed", `{}`, tt.now, tt.now)
			if got := m.audiences[0].root.eval(p, tt.now); got != tt.want {
				t.Errorf("event at now%+dms, within %s: counted = %v, want %v (buckets %+v)", tt.at, tt.within, got, tt.want, p.events()[0].Buckets)
			}
			// The same holds when the old event arrives late (processed now).
			q := newProfile()
			track(m, q, "Order Completed", `{}`, tt.now, tt.now)
			track(m, q, "Order Completed", `{}`, at, tt.now)
			if got := m.audiences[0].root.eval(q, tt.now); got != tt.want {
				t.Errorf("late event at now%+dms, within %s: counted = %v, want %v (buckets %+v)", tt.at, tt.within, got, tt.want, q.events()[0].Buckets)
			}
		})
	}
}

func TestComputedTraitConditions(t *testing.T) {
	traits := `[{id: ltv, name: LTV, source: engage, sum: {event: Order Completed, property: revenue}},
	  {id: fav, name: Favourite, source: engage, mostFrequent: {event: Viewed, property: category}}]`
	tests := []struct {
		name string
		rule string
		want bool
	}{
		{"sum gte, reached", `{computedTrait: ltv, gte: 500}`, true},
		{"sum gt, not reached", `{computedTrait: ltv, gt: 500}`, false},
		{"mostFrequent equals", `{computedTrait: fav, equals: shoes}`, true},
		{"mostFrequent gt never matches a string", `{computedTrait: fav, gt: 0}`, false},
		{"not of a computed trait", `{not: {computedTrait: fav, equals: hats}}`, true},
		{"in an all", `{all: [{computedTrait: ltv, lt: 1000}, {computedTrait: fav, in: [shoes, hats]}]}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ruleModel(t, tt.rule, traits)
			p := newProfile()
			for i, r := range []int{200, 300} {
				at := testNow - int64(i+1)*hour
				track(m, p, "Order Completed", fmt.Sprintf(`{"revenue":%d}`, r), at, at)
			}
			for i, c := range []string{"shoes", "hats", "shoes"} {
				at := testNow - int64(i+1)*minute
				track(m, p, "Viewed", `{"category":"`+c+`"}`, at, at)
			}
			if got := m.audiences[0].root.eval(p, testNow); got != tt.want {
				t.Errorf("rule %s: member = %v, want %v", tt.rule, got, tt.want)
			}
		})
	}
	t.Run("empty values", func(t *testing.T) {
		// Without events: sum is 0 (gte 0 holds), mostFrequent is null (exists false holds).
		m := ruleModel(t, `{all: [{computedTrait: ltv, lte: 0}, {computedTrait: fav, exists: false}]}`, traits)
		if !m.audiences[0].root.eval(newProfile(), testNow) {
			t.Error("a profile without events is not in the audience of the empty values")
		}
	})
}

func TestComputedTraitValues(t *testing.T) {
	orders := func(revenues ...any) []ev { // one order a day, the first one the oldest
		out := make([]ev, len(revenues))
		for i, r := range revenues {
			b, _ := json.Marshal(r)
			out[i] = ev{ago: int64(len(revenues)-i) * day, props: `{"revenue":` + string(b) + `}`}
		}
		return out
	}
	// props builds events from (days ago, properties) pairs, in the order given.
	props := func(pairs ...any) []ev {
		var out []ev
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, ev{ago: int64(pairs[i].(int)) * day, props: pairs[i+1].(string)})
		}
		return out
	}
	var hundredFifty []ev
	for i := range schemas.UniqueListCap + 50 {
		hundredFifty = append(hundredFifty, ev{ago: int64(150-i) * minute, props: fmt.Sprintf(`{"sku":"S%03d"}`, i)})
	}
	var first100 []string
	for i := range schemas.UniqueListCap {
		first100 = append(first100, fmt.Sprintf(`"S%03d"`, i))
	}
	tests := []struct {
		name   string
		agg    string // the computed trait's kind and body, YAML
		events []ev   // "Order Completed", applied in this order, each processed when it happened
		want   string // the value as JSON
	}{
		// count
		{"count, ever", `count: {event: Order Completed}`, orders(1, 2, 3), `3`},
		{"count, within", `count: {event: Order Completed, within: 36h}`, orders(1, 2, 3), `1`},
		{"count, where", `count: {event: Order Completed, where: [{property: revenue, gte: 2}]}`, orders(1, 2, 3, "9"), `2`},
		{"count, empty", `count: {event: Order Completed}`, nil, `0`},
		{"count, nothing matches where", `count: {event: Order Completed, where: [{property: revenue, gt: 100}]}`, orders(1), `0`},
		// sum
		{"sum, ever", `sum: {event: Order Completed, property: revenue}`, orders(10, 20.5, 30), `60.5`},
		{"sum, within", `sum: {event: Order Completed, property: properties.revenue, within: 60h}`, orders(10, 20, 30, 40), `70`},
		{"sum, non-numbers skipped", `sum: {event: Order Completed, property: revenue}`, orders(10, "20", true, nil, 5), `15`},
		{"sum, where", `sum: {event: Order Completed, property: revenue, where: [{property: revenue, lt: 25}]}`, orders(10, 20, 30), `30`},
		{"sum, empty", `sum: {event: Order Completed, property: revenue}`, nil, `0`},
		{"sum, no numeric value", `sum: {event: Order Completed, property: revenue}`, orders("x"), `0`},
		// avg, min, max
		{"avg, ever", `avg: {event: Order Completed, property: revenue}`, orders(10, 20, 60), `30`},
		{"avg, within", `avg: {event: Order Completed, property: revenue, within: 60h}`, orders(100, 10, 20), `15`},
		{"avg, empty", `avg: {event: Order Completed, property: revenue}`, nil, `null`},
		{"avg, nothing in the window", `avg: {event: Order Completed, property: revenue, within: 1h}`, orders(10), `null`},
		{"min, ever", `min: {event: Order Completed, property: revenue}`, orders(10, -5, 20), `-5`},
		{"min, within", `min: {event: Order Completed, property: revenue, within: 60h}`, orders(1, 10, 5, 20), `5`},
		{"min, zero", `min: {event: Order Completed, property: revenue}`, orders(3, 0, 2), `0`},
		{"min, empty", `min: {event: Order Completed, property: revenue}`, nil, `null`},
		{"max, ever", `max: {event: Order Completed, property: revenue}`, orders(-10, -5, -20), `-5`},
		{"max, within", `max: {event: Order Completed, property: revenue, within: 60h}`, orders(99, 10, 5, 20), `20`},
		{"max, nested property", `max: {event: Order Completed, property: order.total}`,
			props(3, `{"order":{"total":7}}`, 2, `{"order":{"total":9}}`, 1, `{"order":"9"}`), `9`},
		{"max, empty", `max: {event: Order Completed, property: revenue}`, nil, `null`},
		// first, last: by event time, whatever the order of arrival
		{"first", `first: {event: Order Completed, property: coupon}`,
			props(2, `{"coupon":"B"}`, 3, `{"coupon":"A"}`, 1, `{"coupon":"C"}`), `"A"`},
		{"last", `last: {event: Order Completed, property: coupon}`,
			props(2, `{"coupon":"B"}`, 1, `{"coupon":"C"}`, 3, `{"coupon":"A"}`), `"C"`},
		{"first skips events without the property", `first: {event: Order Completed, property: coupon}`,
			props(3, `{}`, 2, `{"coupon":null}`, 1, `{"coupon":{"code":"X", "pct": 10}}`), `{"code":"X","pct":10}`},
		{"last, where", `last: {event: Order Completed, property: coupon, where: [{property: revenue, gt: 0}]}`,
			props(2, `{"coupon":"A","revenue":5}`, 1, `{"coupon":"B","revenue":0}`), `"A"`},
		{"first, empty", `first: {event: Order Completed, property: coupon}`, nil, `null`},
		{"last, empty", `last: {event: Order Completed, property: coupon}`, nil, `null`},
		// mostFrequent
		{"mostFrequent", `mostFrequent: {event: Order Completed, property: category}`,
			props(5, `{"category":"a"}`, 4, `{"category":"b"}`, 3, `{"category":"b"}`, 2, `{"category":"a"}`, 1, `{"category":"b"}`), `"b"`},
		{"mostFrequent tie: earliest first seen", `mostFrequent: {event: Order Completed, property: category}`,
			props(3, `{"category":"b"}`, 1, `{"category":"b"}`, 2, `{"category":"a"}`, 4, `{"category":"a"}`), `"a"`},
		{"mostFrequent, numbers and strings differ", `mostFrequent: {event: Order Completed, property: size}`,
			props(3, `{"size":1}`, 2, `{"size":"1"}`, 1, `{"size":"1"}`), `"1"`},
		{"mostFrequent, empty", `mostFrequent: {event: Order Completed, property: category}`, nil, `null`},
		// uniqueList
		{"uniqueList, order of first sight", `uniqueList: {event: Order Completed, property: sku}`,
			props(1, `{"sku":"b"}`, 2, `{"sku":"a"}`, 3, `{"sku":"b"}`, 4, `{"sku":3}`, 5, `{"sku":"3"}`), `["b","a",3,"3"]`},
		{"uniqueList, capped", `uniqueList: {event: Order Completed, property: sku}`, hundredFifty, `[` + strings.Join(first100, ",") + `]`},
		{"uniqueList, empty", `uniqueList: {event: Order Completed, property: sku}`, nil, `[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := compileYAML(t, "computedTraits: [{id: t, name: T, source: engage, "+tt.agg+"}]\n")
			p := newProfile()
			for _, e := range tt.events {
				at := testNow - e.ago
				track(m, p, "Order Completed", e.props, at, at)
			}
			track(m, p, "Other Event", `{"revenue":1000,"sku":"zzz","coupon":"Z","category":"z"}`, testNow, testNow)
			got := string(m.traits[0].value(p, testNow).appendJSON(nil))
			if got != tt.want {
				t.Errorf("%s: value = %s, want %s", tt.agg, got, tt.want)
			}
			if len(tt.events) == 0 {
				if e := m.traits[0].empty(); got != string(e.appendJSON(nil)) {
					t.Errorf("empty value %s, but the service's empty() is %s", got, e.appendJSON(nil))
				}
			}
		})
	}
}

// TestSharedAggregates: definitions that read the same events share one aggregate, so that
// an audience's where-filtered count and a computed trait agree.
func TestSharedAggregates(t *testing.T) {
	m := compileYAML(t, `
audiences:
  - {id: big, name: Big, source: engage, rule: {event: Order Completed, atLeast: 2, where: [{property: revenue, gte: 100}]}}
computedTraits:
  - {id: n, name: Big Orders, source: engage, count: {event: Order Completed, where: [{property: revenue, gte: 100}]}}
  - {id: f, name: First Coupon, source: engage, first: {event: Order Completed, property: coupon}}
  - {id: l, name: Last Coupon, source: engage, last: {event: Order Completed, property: coupon}}
`)
	if got := len(m.aggsByEvent["Order Completed"]); got != 2 {
		t.Errorf("aggregates of Order Completed = %d, want 2 (the where count, first/last)", got)
	}
	p := newProfile()
	for i, r := range []int{150, 50, 100} {
		at := testNow - int64(3-i)*hour
		track(m, p, "Order Completed", fmt.Sprintf(`{"revenue":%d,"coupon":"C%d"}`, r, i), at, at)
	}
	if !m.audiences[0].root.eval(p, testNow) {
		t.Error("two orders of at least 100: not in the audience")
	}
	if got := m.traitByID["n"].value(p, testNow); !got.equal(numVal(2)) {
		t.Errorf("count = %s, want 2", got.appendJSON(nil))
	}
	if f, l := m.traitByID["f"].value(p, testNow), m.traitByID["l"].value(p, testNow); !f.equal(strVal("C0")) || !l.equal(strVal("C2")) {
		t.Errorf("first, last = %s, %s; want C0, C2", f.appendJSON(nil), l.appendJSON(nil))
	}
}

// TestApplySkipsNonNumbers: an event whose property is not a number leaves no state behind
// for a numeric aggregate (the profile is the changelog record: nothing to write).
func TestApplySkipsNonNumbers(t *testing.T) {
	m := compileYAML(t, "computedTraits: [{id: t, name: T, source: engage, sum: {event: Order Completed, property: revenue}}]\n")
	p := newProfile()
	track(m, p, "Order Completed", `{"revenue":"12"}`, testNow, testNow)
	if len(p.aggs()) != 0 {
		t.Errorf("aggregates after a non-numeric revenue = %+v, want none", p.aggs())
	}
}

// TestVersions: an audience's version changes with its rule, name or source, and not with
// anything else, such as realtime.
func TestVersions(t *testing.T) {
	ver := func(aud string) string {
		return compileYAML(t, "audiences: ["+aud+"]\n").audiences[0].version
	}
	base := ver(`{id: a, name: A, source: engage, rule: {trait: plan, equals: pro}}`)
	for _, tt := range []struct {
		aud  string
		same bool
	}{
		{`{id: a, name: A, source: engage, rule: {trait: plan, equals: pro}, realtime: true}`, true},
		{`{id: a, name: B, source: engage, rule: {trait: plan, equals: pro}}`, false},
		{`{id: a, name: A, source: engage, rule: {trait: plan, equals: team}}`, false},
		{`{id: a, name: A, source: engage, rule: {trait: plan, equals: pro, exists: true}}`, false},
	} {
		if got := ver(tt.aud); (got == base) != tt.same {
			t.Errorf("%s: version %s, base %s: same = %v, want %v", tt.aud, got, base, got == base, tt.same)
		}
	}
}
