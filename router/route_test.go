package router

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// testConfig is a config snapshot built from a schemas.Config, for the pure routing step.
type testConfig struct{ cfg *schemas.Config }

func (c testConfig) SourceByID(id string) (*schemas.Source, bool) {
	for i := range c.cfg.Sources {
		if c.cfg.Sources[i].ID == id {
			return &c.cfg.Sources[i], true
		}
	}
	return nil, false
}

func (c testConfig) DestinationsForSource(id string) []*schemas.Destination {
	var out []*schemas.Destination
	for i := range c.cfg.Destinations {
		if slices.Contains(c.cfg.Destinations[i].Sources, id) {
			out = append(out, &c.cfg.Destinations[i])
		}
	}
	return out
}

func (c testConfig) Sources() []*schemas.Source {
	var out []*schemas.Source
	for i := range c.cfg.Sources {
		out = append(out, &c.cfg.Sources[i])
	}
	return out
}

type userSet map[string]bool

func (u userSet) Suppressed(id string) bool { return u[id] }

func mustConfig(t testing.TB, yaml string) *schemas.Config {
	t.Helper()
	cfg, err := schemas.ParseConfig([]byte(yaml), schemas.ConfigFormatYAML)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

const routeYAML = `
sources:
  - id: web
    writeKey: wk_web
    trackingPlan: {blockedEvents: [Debug Event]}
  - id: app
    writeKey: wk_app
destinations:
  - id: a-hooks
    type: webhooks
    sources: [web, app]
    settings: {webhooks: [{url: "https://a.example.com/hook"}]}
  - id: b-hooks
    type: webhooks
    sources: [web]
    settings: {webhooks: [{url: "https://b.example.com/hook"}]}
  - id: off-hooks
    type: webhooks
    enabled: false
    sources: [web]
    settings: {webhooks: [{url: "https://c.example.com/hook"}]}
`

// eventRecord builds a tracking.events record the way ingest writes it (servicetest.EventRecord).
func eventRecord(t testing.TB, sourceID, msg string) *kgo.Record {
	t.Helper()
	return servicetest.EventRecord(t, sourceID, msg)
}

func TestRouteFansOutToEnabledDestinations(t *testing.T) {
	cfg := mustConfig(t, routeYAML)
	step := Step{DeliveriesTopic: "out", Config: testConfig{cfg}, FirstAttemptAt: []byte("2026-01-01T00:00:00.000Z")}
	msg := `{"type":"track","event":"Order Completed","userId":"u1","messageId":"m1","properties":{"total":12345678901234567890},"timestamp":"2026-01-01T00:00:00Z","receivedAt":"2026-01-01T00:00:01Z","_metadata":{"x":1}}`
	rec := eventRecord(t, "web", msg)
	routed, o, err := step.Route(rec, Deliveries{})
	if err != nil || o != Routed {
		t.Fatalf("outcome %s, err %v", o, err)
	}
	out := routed.Records
	var dests []string
	for _, d := range out {
		dests = append(dests, string(d.Key))
	}
	if want := []string{"a-hooks:u1", "b-hooks:u1"}; !slices.Equal(dests, want) {
		t.Fatalf("keys %v, want %v (off-hooks is disabled)", dests, want)
	}
	if want := []string{"a-hooks", "b-hooks"}; !slices.Equal(routed.DestinationIDs, want) {
		t.Fatalf("destination ids %v, want %v", routed.DestinationIDs, want)
	}
	m, _ := schemas.DecodeMessage([]byte(msg))
	wantBody := string(schemas.AppendWebhookBody(nil, m))
	for _, d := range out {
		if d.Topic != "out" || string(d.Value) != wantBody {
			t.Errorf("record %s: topic %s body %s, want %s", d.Key, d.Topic, d.Value, wantBody)
		}
		h := map[string]string{}
		for _, kv := range d.Headers {
			h[kv.Key] = string(kv.Value)
		}
		if h["destination-id"] != string(d.Key[:7]) || h["message-id"] != "m1" || h["attempt"] != "1" ||
			h["first-attempt-at"] != "2026-01-01T00:00:00.000Z" || h["type"] != "track" || h["source-id"] != "web" {
			t.Errorf("headers %v", h)
		}
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(out[0].Value, &body); err != nil {
		t.Fatal(err)
	}
	if string(body["version"]) != "1" || string(body["properties"]) != `{"total":12345678901234567890}` || string(body["_metadata"]) != `{"x":1}` {
		t.Errorf("body %s", out[0].Value)
	}
}

func TestRouteOutcomes(t *testing.T) {
	cfg := mustConfig(t, routeYAML)
	step := Step{DeliveriesTopic: "out", Config: testConfig{cfg}, Suppressions: userSet{"bad": true}, FirstAttemptAt: []byte("x")}
	for _, c := range []struct {
		name, source, msg string
		want              Outcome
		keys              []string // destination ids are the keys' prefixes
	}{
		{"anonymous user keys by anonymousId", "app", `{"type":"page","anonymousId":"anon-1","name":"Home"}`, Routed, []string{"a-hooks:anon-1"}},
		{"blocked by the tracking plan", "web", `{"type":"track","event":"Debug Event","userId":"u"}`, BlockedByPlan, nil},
		{"blocked name on a source without a plan", "app", `{"type":"track","event":"Debug Event","userId":"u"}`, Routed, []string{"a-hooks:u"}},
		{"suppressed user", "web", `{"type":"identify","userId":"bad"}`, Suppressed, nil},
		{"All false", "web", `{"type":"identify","userId":"u","integrations":{"All":false}}`, NoDestination, nil},
		{"all false, Webhooks true", "web", `{"type":"identify","userId":"u","integrations":{"all":false,"Webhooks":true}}`, Routed, []string{"a-hooks:u", "b-hooks:u"}},
		{"unknown source", "gone", `{"type":"identify","userId":"u"}`, UnknownSource, nil},
		{"no source header", "", `{"type":"identify","userId":"u"}`, Invalid, nil},
		{"alias", "app", `{"type":"alias","userId":"new","previousId":"old"}`, Routed, []string{"a-hooks:new"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Appending to a non-empty batch keeps what it held.
			prev := Deliveries{Records: []*kgo.Record{{Key: []byte("earlier")}}, DestinationIDs: []string{"earlier"}}
			out, o, err := step.Route(eventRecord(t, c.source, c.msg), prev)
			if o != c.want {
				t.Fatalf("outcome %s (err %v), want %s", o, err, c.want)
			}
			if out.Len() != len(out.DestinationIDs) || string(out.Records[0].Key) != "earlier" || out.DestinationIDs[0] != "earlier" {
				t.Fatalf("batch %d records, %d destination ids, first %q", out.Len(), len(out.DestinationIDs), out.Records[0].Key)
			}
			var keys []string
			for i, r := range out.Records[1:] {
				keys = append(keys, string(r.Key))
				if dest := out.DestinationIDs[i+1]; !strings.HasPrefix(string(r.Key), dest+":") || string(headerValue(r, schemas.HeaderDestinationID)) != dest {
					t.Errorf("record %s: destination id %q", r.Key, dest)
				}
			}
			if !slices.Equal(keys, c.keys) {
				t.Fatalf("keys %v, want %v", keys, c.keys)
			}
		})
	}
	bad := &kgo.Record{Value: []byte(`not json`), Headers: []kgo.RecordHeader{{Key: "source-id", Value: []byte("web")}}}
	if _, o, err := step.Route(bad, Deliveries{}); o != Invalid || err == nil {
		t.Fatalf("garbage value: outcome %s err %v", o, err)
	}
}

func TestRouteAliasBodyCarriesDocumentedKeys(t *testing.T) {
	step := Step{DeliveriesTopic: "out", Config: testConfig{mustConfig(t, routeYAML)}, FirstAttemptAt: []byte("x")}
	out, _, _ := step.Route(eventRecord(t, "app", `{"type":"alias","userId":"new","previousId":"old","messageId":"m"}`), Deliveries{})
	var body map[string]any
	if err := json.Unmarshal(out.Records[0].Value, &body); err != nil {
		t.Fatal(err)
	}
	if body["Previous ID"] != "old" || body["User ID"] != "new" || body["previousId"] != "old" || body["userId"] != "new" || body["version"] != 1.0 {
		t.Fatalf("alias body %s", out.Records[0].Value)
	}
}

// benchStep builds a step whose source has n destinations, and one track record.
func benchStep(b *testing.B, n int) (*Step, *kgo.Record) {
	y := "sources: [{id: web, writeKey: wk}]\ndestinations:\n"
	for i := range n {
		y += "  - {id: d" + strconv.Itoa(i) + ", type: webhooks, sources: [web], settings: {webhooks: [{url: \"https://x.example.com\"}]}}\n"
	}
	rec := eventRecord(b, "web", `{"type":"track","event":"Order Completed","userId":"user-12345","anonymousId":"a-9f8e7d","messageId":"0b3f6c1e-5b7e-4a8e-9f0c-2f1d3e4c5b6a","properties":{"orderId":"o-1","total":129.99,"currency":"USD","products":[{"sku":"s-1","price":64.99,"quantity":2}]},"context":{"ip":"203.0.113.9","library":{"name":"analytics-go","version":"3.3.0"},"userAgent":"Mozilla/5.0"},"integrations":{"All":true},"timestamp":"2026-01-01T00:00:00.000Z","sentAt":"2026-01-01T00:00:00.100Z","receivedAt":"2026-01-01T00:00:00.200Z"}`)
	return &Step{DeliveriesTopic: "out", Config: testConfig{mustConfig(b, y)}, Suppressions: userSet{}, FirstAttemptAt: []byte("2026-01-01T00:00:00.000Z")}, rec
}

// BenchmarkRoute is the pure routing step of one message (decode the routing view, apply the
// rules, build the delivered body and one record per destination).
func BenchmarkRoute(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(strconv.Itoa(n)+"dest", func(b *testing.B) {
			step, rec := benchStep(b, n)
			out := Deliveries{Records: make([]*kgo.Record, 0, n), DestinationIDs: make([]string, 0, n)}
			b.SetBytes(int64(len(rec.Value)))
			b.ReportAllocs()
			for b.Loop() {
				out, _, _ = step.Route(rec, out.Reset())
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
