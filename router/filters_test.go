package router

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

const filtersYAML = `
sources:
  - {id: web, writeKey: wk_web}
  - {id: ios, writeKey: wk_ios}
destinations:
  - id: plain
    type: webhooks
    sources: [web, ios]
    settings: {webhooks: [{url: "https://plain.example.com"}]}
  - id: filtered
    type: webhooks
    sources: [web, ios]
    settings: {webhooks: [{url: "https://filtered.example.com"}]}
    filters:
      # Listed against the order they apply in: allow, drop properties, drop, sample.
      - name: totals only
        if: event = 'Order Completed'
        action: allowProperties
        properties: [properties.total, properties.secret, context.library]
      - name: no pii
        action: dropProperties
        properties: [context.ip, traits.email, properties.secret]
      - name: small orders
        if: event = 'Order Completed' and properties.total <= 100
        action: drop
      - name: ios debug
        if: match(event, 'Debug*')
        action: drop
        sources: [ios]
      - name: no pages
        if: type = 'page'
        action: sample
        percent: 0
`

// routeOne routes msg from source through a step of cfg and returns the body each destination
// got (id → body) and the filtered records.
func routeOne(t *testing.T, step *Step, source, msg string) (map[string]map[string]any, []string) {
	t.Helper()
	out, _, err := step.Route(eventRecord(t, source, msg), Deliveries{})
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]map[string]any{}
	for i, r := range out.Records {
		var b map[string]any
		if err := json.Unmarshal(r.Value, &b); err != nil {
			t.Fatalf("body %s: %v", r.Value, err)
		}
		bodies[out.DestinationIDs[i]] = b
	}
	var filtered []string
	if step.AttemptsTopic != "" {
		filtered = filteredOf(t, step.AttemptsTopic, out.Filtered)
	}
	return bodies, filtered
}

func keysOf(m any) string {
	o, _ := m.(map[string]any)
	ks := make([]string, 0, len(o))
	for k := range o {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

// TestRouteDestinationFilters: each action does what it says, in the fixed order (sample,
// drop, drop properties, allow properties) whatever the list order; a filter limited to
// sources leaves the others' messages alone; a dropped message has a filtered record with
// reason destination_filter naming the filter; the destination without filters gets the
// message whole.
func TestRouteDestinationFilters(t *testing.T) {
	step := &Step{DeliveriesTopic: "out", AttemptsTopic: "attempts", Config: testConfig{mustConfig(t, filtersYAML)}, FirstAttemptAt: []byte("x")}
	const big = `{"type":"track","event":"Order Completed","userId":"u","messageId":"m1","properties":{"total":150,"secret":"s","coupon":"c"},"context":{"ip":"1.2.3.4","library":{"name":"go"},"locale":"fr"},"traits":{"email":"e@x"}}`
	bodies, filtered := routeOne(t, step, "web", big)
	if len(filtered) != 0 || len(bodies) != 2 {
		t.Fatalf("big order: bodies %v filtered %v", bodies, filtered)
	}
	p, f := bodies["plain"], bodies["filtered"]
	if keysOf(p["properties"]) != "coupon,secret,total" || keysOf(p["context"]) != "ip,library,locale" {
		t.Fatalf("the destination without filters got %v", p)
	}
	// Drop properties first (secret, ip, email go), then allow properties keeps total (secret
	// is gone already) and context.library; traits are not named by allow: untouched but for
	// the dropped email. The envelope stays.
	if keysOf(f["properties"]) != "total" || keysOf(f["context"]) != "library" || keysOf(f["traits"]) != "" ||
		f["event"] != "Order Completed" || f["messageId"] != "m1" || f["version"] != 1.0 {
		t.Fatalf("filtered body %v", f)
	}

	// A small order is dropped before any property filter; the allow filter does not apply to
	// other events, the drop-properties one does.
	bodies, filtered = routeOne(t, step, "web", `{"type":"track","event":"Order Completed","userId":"u","messageId":"m2","properties":{"total":50}}`)
	if _, ok := bodies["filtered"]; ok || !slices.Equal(filtered, []string{"m2→filtered:destination_filter/small orders"}) {
		t.Fatalf("small order: bodies %v filtered %v", bodies, filtered)
	}
	bodies, _ = routeOne(t, step, "web", `{"type":"track","event":"Signed Up","userId":"u","messageId":"m3","properties":{"plan":"pro","secret":"s"},"context":{"ip":"1.2.3.4"}}`)
	if f := bodies["filtered"]; keysOf(f["properties"]) != "plan" || keysOf(f["context"]) != "" {
		t.Fatalf("other event: %v", f)
	}

	// Sources: the ios-only drop leaves web's Debug events.
	bodies, filtered = routeOne(t, step, "ios", `{"type":"track","event":"Debug Tap","userId":"u","messageId":"m4"}`)
	if _, ok := bodies["filtered"]; ok || !slices.Equal(filtered, []string{"m4→filtered:destination_filter/ios debug"}) {
		t.Fatalf("ios debug: bodies %v filtered %v", bodies, filtered)
	}
	if bodies, _ = routeOne(t, step, "web", `{"type":"track","event":"Debug Tap","userId":"u","messageId":"m5"}`); bodies["filtered"] == nil {
		t.Fatal("web debug event dropped by an ios-only filter")
	}

	// Sample 0%: every page goes.
	bodies, filtered = routeOne(t, step, "web", `{"type":"page","name":"Home","userId":"u","messageId":"m6"}`)
	if _, ok := bodies["filtered"]; ok || !slices.Equal(filtered, []string{"m6→filtered:destination_filter/no pages"}) || bodies["plain"] == nil {
		t.Fatalf("page: bodies %v filtered %v", bodies, filtered)
	}
}

// TestRouteFilterSharesBody: destinations without property filters share one body; only a
// destination whose property filter matched gets its own.
func TestRouteFilterSharesBody(t *testing.T) {
	y := filtersYAML + `  - id: plain2
    type: webhooks
    sources: [web]
    settings: {webhooks: [{url: "https://plain2.example.com"}]}
    filters: [{name: nothing, if: "event = 'Never'", action: drop}]
`
	step := &Step{DeliveriesTopic: "out", Config: testConfig{mustConfig(t, y)}, FirstAttemptAt: []byte("x")}
	out, _, err := step.Route(eventRecord(t, "web", `{"type":"track","event":"A","userId":"u","messageId":"m","context":{"ip":"1"}}`), Deliveries{})
	if err != nil || len(out.Records) != 3 {
		t.Fatalf("%d records, %v", len(out.Records), err)
	}
	byDest := map[string][]byte{}
	for i, r := range out.Records {
		byDest[out.DestinationIDs[i]] = r.Value
	}
	if &byDest["plain"][0] != &byDest["plain2"][0] || &byDest["plain"][0] == &byDest["filtered"][0] {
		t.Fatal("bodies: the unchanged ones must be shared, the rewritten one its own")
	}
}

// TestSamplingDeterministic: a sample filter keeps about its percent of the messages, decides
// the same for the same messageId every time (a retry or a replay), and two filters of the same
// percent keep different messages.
func TestSamplingDeterministic(t *testing.T) {
	cfgOf := func(name string) *Step {
		y := fmt.Sprintf(`
sources: [{id: web, writeKey: wk}]
destinations:
  - {id: d, type: webhooks, sources: [web], settings: {webhooks: [{url: "https://x.example.com"}]},
     filters: [{name: %q, action: sample, percent: 30}]}
`, name)
		return &Step{DeliveriesTopic: "out", Config: testConfig{mustConfig(t, y)}, FirstAttemptAt: []byte("x")}
	}
	kept := func(step *Step) map[string]bool {
		k := map[string]bool{}
		out := Deliveries{}
		for i := range 10000 {
			id := "msg-" + strconv.Itoa(i)
			out, _, _ = step.Route(eventRecord(t, "web", `{"type":"track","event":"E","userId":"u","messageId":"`+id+`"}`), out.Reset())
			if len(out.Records) == 1 {
				k[id] = true
			}
		}
		return k
	}
	a, again, other := kept(cfgOf("s")), kept(cfgOf("s")), kept(cfgOf("t"))
	if n := len(a); n < 2800 || n > 3200 {
		t.Fatalf("kept %d of 10000 at 30%%", n)
	}
	if len(again) != len(a) {
		t.Fatalf("kept %d then %d of the same messages", len(a), len(again))
	}
	for id := range a {
		if !again[id] {
			t.Fatalf("%s kept once, not the second time", id)
		}
	}
	same := 0
	for id := range a {
		if other[id] {
			same++
		}
	}
	if same > 1200 { // independent: about 30% of 30% = 900
		t.Fatalf("two sample filters kept %d of the same messages", same)
	}
}

// TestFilterCacheCompilesOnce: a destination's filters are compiled once per config snapshot,
// and only for destinations that have some.
func TestFilterCacheCompilesOnce(t *testing.T) {
	step := &Step{DeliveriesTopic: "out", Config: testConfig{mustConfig(t, filtersYAML)}, FirstAttemptAt: []byte("x")}
	rec := eventRecord(t, "web", `{"type":"track","event":"A","userId":"u","messageId":"m"}`)
	out := Deliveries{Records: make([]*kgo.Record, 0, 4), DestinationIDs: make([]string, 0, 4)}
	step.Route(rec, out) // compiles the filters once
	if step.Filters == nil || len(step.Filters.byDest) != 1 {
		t.Fatalf("filter cache %+v: want the one destination with filters", step.Filters)
	}
	step.Route(rec, out.Reset())
	if len(step.Filters.byDest) != 1 {
		t.Fatal("filters compiled again for the same snapshot")
	}
	if schemas.CompileFilters(&schemas.Destination{}) != nil {
		t.Fatal("a destination without filters compiles to something")
	}
}

// benchFilters are 10 filters of a realistic mix: 1 sample, 6 drops, 2 drop properties (one
// matches: the destination gets a body of its own), 1 allow properties.
const benchFilters = `    filters:
      - {name: sample pages, if: "type = 'page'", action: sample, percent: 10}
      - {name: test users, if: "match(userId, 'test-*')", action: drop}
      - {name: internal, if: "contains(lowercase(context.userAgent), 'bot')", action: drop}
      - {name: small orders, if: "event = 'Order Completed' and properties.total < 10", action: drop}
      - {name: debug, if: "match(event, 'Debug *') or event = 'Heartbeat'", action: drop}
      - {name: old library, if: "context.library.name = 'analytics-go' and context.library.version = '2.0.0'", action: drop}
      - {name: no currency, if: "event = 'Order Completed' and typeof(properties.currency) = 'null'", action: drop}
      - {name: no ip, action: dropProperties, properties: [context.ip]}
      - {name: no emails, if: "type = 'identify'", action: dropProperties, properties: [traits.email]}
      - {name: sign-ups, if: "event = 'Signed Up'", action: allowProperties, properties: [properties.plan]}
`

// BenchmarkRouteWithFilters is BenchmarkRoute with benchFilters on every destination: compare
// its msgs/s to BenchmarkRoute's (docs/benchmarks.md).
func BenchmarkRouteWithFilters(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(strconv.Itoa(n)+"dest", func(b *testing.B) {
			y := "sources: [{id: web, writeKey: wk}]\ndestinations:\n"
			for i := range n {
				y += "  - id: d" + strconv.Itoa(i) + "\n    type: webhooks\n    sources: [web]\n    settings: {webhooks: [{url: \"https://x.example.com\"}]}\n" + benchFilters
			}
			step, rec := benchStep(b, 0)
			step.Config = testConfig{mustConfig(b, y)}
			out := Deliveries{Records: make([]*kgo.Record, 0, n), DestinationIDs: make([]string, 0, n)}
			if out, _, _ = step.Route(rec, out); len(out.Records) != n {
				b.Fatalf("%d deliveries, want %d", len(out.Records), n)
			}
			b.SetBytes(int64(len(rec.Value)))
			b.ReportAllocs()
			for b.Loop() {
				out, _, _ = step.Route(rec, out.Reset())
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkRouteWithDropFilters is BenchmarkRouteWithFilters without the property filters: the
// cost of the conditions alone (no body of its own).
func BenchmarkRouteWithDropFilters(b *testing.B) {
	y := "sources: [{id: web, writeKey: wk}]\ndestinations:\n  - id: d0\n    type: webhooks\n    sources: [web]\n    settings: {webhooks: [{url: \"https://x.example.com\"}]}\n" +
		strings.Join(strings.Split(benchFilters, "\n")[:8], "\n") + "\n"
	step, rec := benchStep(b, 0)
	step.Config = testConfig{mustConfig(b, y)}
	out := Deliveries{Records: make([]*kgo.Record, 0, 1), DestinationIDs: make([]string, 0, 1)}
	b.ReportAllocs()
	for b.Loop() {
		out, _, _ = step.Route(rec, out.Reset())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
