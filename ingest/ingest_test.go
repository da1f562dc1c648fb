package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/schemas"
)

const testKey = "wk_test_web"

// staticSources is a fixed config: one source "web" with testKey.
type staticSources map[string]*schemas.Source

func (s staticSources) SourceByKeyHash(h string) (*schemas.Source, bool) {
	src, ok := s[h]
	return src, ok
}

var testSources = staticSources{schemas.HashWriteKey(testKey): {ID: "web", WriteKey: testKey}}

type harness struct {
	t       testing.TB
	svc     *Service
	brokers []string
	srv     *httptest.Server
}

// newHarness starts an embedded broker with the ingest topics and an ingest Service whose
// Handler is served by an httptest server. Run is not started (tests that need the front door
// start it).
func newHarness(t testing.TB, mutate ...func(*Config)) *harness {
	t.Helper()
	return newHarnessWith(t, Deps{}, mutate...)
}

// newHarnessWith is newHarness whose service also gets deps' ConfigReady, KafkaOpts, Keys and
// Tracer.
func newHarnessWith(t testing.TB, deps Deps, mutate ...func(*Config)) *harness {
	t.Helper()
	brokers := kafkatest.Embedded(t)
	createTopics(t, brokers)
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	for _, m := range mutate {
		m(&cfg)
	}
	svc, err := New(cfg, Deps{
		Deps: platform.Deps{
			Kafka:     kafkaSettings(t, brokers...),
			KafkaOpts: deps.KafkaOpts,
			Logger:    zerolog.Nop(),
			Tracer:    deps.Tracer,
		},
		Sources:     func() Sources { return testSources },
		ConfigReady: deps.ConfigReady,
		Keys:        deps.Keys,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.producer.Close)
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return &harness{t: t, svc: svc, brokers: brokers, srv: srv}
}

func kafkaSettings(t testing.TB, brokers ...string) platform.KafkaSettings {
	t.Helper()
	s, err := platform.ParseKafkaSettings(map[string]string{"KAFKA_BROKERS": strings.Join(brokers, ",")})
	if err != nil {
		t.Fatal(err)
	}
	// The tests read tracking.events as it is; sealing has its own (TestSealsWhatItWrites).
	s.ShredEvents = false
	return s
}

func createTopics(t testing.TB, brokers []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var specs []platform.TopicSpec
	for _, name := range []string{schemas.TopicEvents, schemas.TopicRejected, schemas.TopicInbound} {
		specs = append(specs, platform.TopicSpec{Name: name, Partitions: 3})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := platform.EnsureTopics(ctx, kadm.NewClient(cl), 1, specs); err != nil {
		t.Fatal(err)
	}
}

// post sends body to path with the given headers and returns the status and body.
func (h *harness) post(path string, body []byte, headers map[string]string) (int, string) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func basic(key string) map[string]string {
	req, _ := http.NewRequest("GET", "/", nil)
	req.SetBasicAuth(key, "")
	return map[string]string{"Authorization": req.Header.Get("Authorization")}
}

// consume reads n records of topic from the start (failing after 10 s).
func consume(t *testing.T, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", len(out), n, topic)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func decodeValue(t *testing.T, r *kgo.Record) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(r.Value))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("record value %s: %v", r.Value, err)
	}
	return m
}

func TestAuthentication(t *testing.T) {
	h := newHarness(t)
	track := `{"userId":"u1","event":"E"}`
	for _, tc := range []struct {
		name    string
		body    string
		headers map[string]string
		want    int
	}{
		{"basic with colon", track, basic(testKey), 200},
		{"basic without colon", track, map[string]string{"Authorization": "Basic d2tfdGVzdF93ZWI="}, 200},       // base64("wk_test_web")
		{"basic with a password", track, map[string]string{"Authorization": "Basic d2tfdGVzdF93ZWI6eA=="}, 200}, // "wk_test_web:x"
		{"body writeKey", `{"userId":"u1","event":"E","writeKey":"` + testKey + `"}`, nil, 200},
		{"bearer plus body writeKey", `{"userId":"u1","event":"E","writeKey":"` + testKey + `"}`, map[string]string{"Authorization": "Bearer some-token"}, 200},
		{"bearer write key", track, map[string]string{"Authorization": "Bearer " + testKey}, 200},
		{"unknown basic key", track, basic("wk_wrong"), 401},
		{"basic wins over body key", `{"userId":"u1","event":"E","writeKey":"` + testKey + `"}`, basic("wk_wrong"), 401},
		{"missing key", track, nil, 401},
		{"unknown body key", `{"userId":"u1","event":"E","writeKey":"nope"}`, nil, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := h.post("/v1/track", []byte(tc.body), tc.headers)
			if status != tc.want {
				t.Fatalf("status %d (%s), want %d", status, body, tc.want)
			}
			if tc.want == 401 && body != `{"code":"unauthorized","message":"missing or unknown write key: send it as the HTTP Basic user name"}` {
				t.Errorf("body %s", body)
			}
			if tc.want == 200 && body != `{"success":true}` {
				t.Errorf("body %s", body)
			}
		})
	}
	// The write key never reaches Kafka.
	for _, r := range consume(t, h.brokers, schemas.TopicEvents, 6) {
		if bytes.Contains(r.Value, []byte(testKey)) {
			t.Errorf("record carries the write key: %s", r.Value)
		}
	}
}

func TestSingleCallEndpoints(t *testing.T) {
	h := newHarness(t)
	calls := []struct{ path, body string }{
		{"/v1/identify", `{"userId":"u1","traits":{"email":"a@example.com","n":12345678901234567890}}`},
		{"/v1/track", `{"anonymousId":"anon-1","event":"Order Completed","properties":{"total":27.5}}`},
		{"/v1/page", `{"userId":null,"anonymousId":"anon-2","name":"Home","properties":{"path":"/"}}`},
		{"/v1/screen", `{"userId":"u3","name":"Main"}`},
		{"/v1/group", `{"userId":"u4","groupId":"g1","traits":{"plan name":"pro"}}`},
		{"/v1/alias", `{"userId":"u5","previousId":"anon-5"}`},
		{"/v1/track", `{"type":"page","userId":"u6","event":"From the path"}`},
	}
	for _, c := range calls {
		if status, body := h.post(c.path, []byte(c.body), basic(testKey)); status != 200 {
			t.Fatalf("%s: %d %s", c.path, status, body)
		}
	}
	recs := consume(t, h.brokers, schemas.TopicEvents, len(calls))
	byKey := map[string]*kgo.Record{}
	for _, r := range recs {
		byKey[string(r.Key)] = r
	}
	for _, tc := range []struct{ key, typ string }{
		{"u1", "identify"}, {"anon-1", "track"}, {"anon-2", "page"}, {"u3", "screen"}, {"u4", "group"}, {"u5", "alias"}, {"u6", "track"},
	} {
		r := byKey[tc.key]
		if r == nil {
			t.Fatalf("no record keyed %s", tc.key)
		}
		m := decodeValue(t, r)
		if m["type"] != tc.typ || header(r, schemas.HeaderType) != tc.typ {
			t.Errorf("%s: type %v header %q, want %s", tc.key, m["type"], header(r, schemas.HeaderType), tc.typ)
		}
		if header(r, schemas.HeaderSourceID) != "web" || header(r, schemas.HeaderMessageID) == "" || header(r, schemas.HeaderMessageID) != m["messageId"] {
			t.Errorf("%s: headers %v", tc.key, r.Headers)
		}
		if m["receivedAt"] == nil || m["timestamp"] == nil {
			t.Errorf("%s: not enriched: %s", tc.key, r.Value)
		}
		ctx, _ := m["context"].(map[string]any)
		if ctx["ip"] != "127.0.0.1" {
			t.Errorf("%s: context.ip = %v", tc.key, ctx["ip"])
		}
	}
	if !bytes.Contains(byKey["u1"].Value, []byte(`"n":12345678901234567890`)) {
		t.Errorf("large integer not kept exactly: %s", byKey["u1"].Value)
	}
}

func TestLimitsAndErrors(t *testing.T) {
	h := newHarness(t)
	big := `{"userId":"u","event":"E","properties":{"p":"` + strings.Repeat("x", schemas.MaxMessageBytes) + `"}}`
	var many strings.Builder
	many.WriteString(`{"batch":[`)
	for i := 0; i <= schemas.MaxBatchMessages; i++ {
		if i > 0 {
			many.WriteByte(',')
		}
		many.WriteString(`{}`)
	}
	many.WriteString(`]}`)
	hugeBatch := `{"batch":[` + strings.Repeat(`{"type":"track","userId":"u","event":"E","properties":{"p":"`+strings.Repeat("y", 1000)+`"}},`, 520) + `{}]}`
	for _, tc := range []struct {
		name, path, body string
		headers          map[string]string
		status           int
		want             string
	}{
		{"malformed JSON", "/v1/track", `{"userId":`, basic(testKey), 400, `{"code":"invalid_json","message":"invalid JSON at byte 10: unexpected end of input"}`},
		{"not an object", "/v1/track", `[1]`, basic(testKey), 400, `{"code":"invalid_json","message":"a message must be a JSON object"}`},
		{"invalid single call", "/v1/track", `{"userId":"u"}`, basic(testKey), 400, `{"code":"invalid_message","message":"event: required"}`},
		{"no ids", "/v1/identify", `{"userId":null,"anonymousId":null}`, basic(testKey), 400, `{"code":"invalid_message","message":"userId: userId or anonymousId is required"}`},
		{"call over 32 KB", "/v1/track", big, basic(testKey), 413, `{"code":"payload_too_large","message":"the body is larger than 32768 bytes"}`},
		{"batch over 500 KB", "/v1/batch", hugeBatch, basic(testKey), 413, `{"code":"payload_too_large","message":"the body is larger than 512000 bytes"}`},
		{"batch over 2500 messages", "/v1/batch", many.String(), basic(testKey), 413, `{"code":"batch_too_large","message":"a batch holds at most 2500 messages, got 2501"}`},
		{"batch without batch", "/v1/batch", `{"sentAt":"2026-01-01T00:00:00Z"}`, basic(testKey), 400, `{"code":"invalid_json","message":"batch: required"}`},
		{"unsupported encoding", "/v1/track", `{}`, map[string]string{"Content-Encoding": "br"}, 415, `{"code":"unsupported_encoding","message":"Content-Encoding \"br\" is not supported (use gzip)"}`},
		{"bad gzip", "/v1/track", `not gzip`, map[string]string{"Content-Encoding": "gzip"}, 400, `{"code":"invalid_body","message":"the body is not valid gzip"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := h.post(tc.path, []byte(tc.body), tc.headers)
			if status != tc.status || body != tc.want {
				t.Errorf("got %d %s\nwant %d %s", status, body, tc.status, tc.want)
			}
		})
	}
	t.Run("GET", func(t *testing.T) {
		resp, err := http.Get(h.srv.URL + "/v1/track")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

func TestGzip(t *testing.T) {
	h := newHarness(t)
	body := gz(t, []byte(`{"batch":[{"type":"track","userId":"gz-user","event":"Zipped"}]}`))
	if status, resp := h.post("/v1/batch", body, map[string]string{"Content-Encoding": "gzip", "Authorization": basic(testKey)["Authorization"]}); status != 200 {
		t.Fatalf("gzip batch: %d %s", status, resp)
	}
	r := consume(t, h.brokers, schemas.TopicEvents, 1)[0]
	if string(r.Key) != "gz-user" {
		t.Errorf("key %s", r.Key)
	}
	// A gzip bomb: 10 MB of zeros compresses to ~10 KB; it must stop at the batch limit.
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	_, _ = zw.Write([]byte(`{"batch":[{"type":"track","userId":"u","event":"E","properties":{"p":"`))
	zeros := make([]byte, 1<<20)
	for i := range zeros {
		zeros[i] = '0'
	}
	for i := 0; i < 10; i++ {
		_, _ = zw.Write(zeros)
	}
	_ = zw.Close()
	status, resp := h.post("/v1/batch", bomb.Bytes(), map[string]string{"Content-Encoding": "gzip", "Authorization": basic(testKey)["Authorization"]})
	if status != 413 {
		t.Errorf("gzip bomb: %d %s", status, resp)
	}
}

func TestBatchMergesAndPartialRejection(t *testing.T) {
	h := newHarness(t)
	body := `{"batch":[
		{"type":"track","userId":"b1","event":"Kept","context":{"locale":"fr"},"integrations":{"Webhooks":false}},
		{"type":"track","userId":"b2"},
		{"type":"identify","userId":null,"anonymousId":"b3","_metadata":{"bundled":["Segment.io"]}},
		{"type":"fly","userId":"b4"},
		{"type":"alias","userId":"b5"}
	],"context":{"locale":"en","library":{"name":"analytics-python","version":"2.3.0"}},"integrations":{"All":false},"sentAt":"2026-01-01T00:00:00Z"}`
	status, resp := h.post("/v1/batch", []byte(body), basic(testKey))
	want := `{"success":true,"rejected":[{"index":1,"code":"invalid_message","reason":"event: required"},{"index":3,"code":"invalid_message","reason":"type: unknown type \"fly\" (want identify, track, page, screen, group or alias)"},{"index":4,"code":"invalid_message","reason":"previousId: required"}]}`
	if status != 200 || resp != want {
		t.Fatalf("got %d %s\nwant %s", status, resp, want)
	}
	events := consume(t, h.brokers, schemas.TopicEvents, 2)
	byKey := map[string]map[string]any{}
	for _, r := range events {
		byKey[string(r.Key)] = decodeValue(t, r)
	}
	b1 := byKey["b1"]
	ctx := b1["context"].(map[string]any)
	if ctx["locale"] != "fr" || ctx["library"] == nil {
		t.Errorf("context not merged: %v", ctx)
	}
	if in := b1["integrations"].(map[string]any); in["Webhooks"] != false || in["All"] != false {
		t.Errorf("integrations not merged: %v", in)
	}
	if byKey["b3"] == nil || byKey["b3"]["_metadata"] == nil {
		t.Errorf("unknown field dropped: %v", byKey["b3"])
	}
	rejected := consume(t, h.brokers, schemas.TopicRejected, 3)
	reasons := map[string]string{}
	for _, r := range rejected {
		reasons[string(r.Key)] = header(r, schemas.HeaderReason)
		if header(r, schemas.HeaderSourceID) != "web" {
			t.Errorf("rejected record without source-id: %v", r.Headers)
		}
	}
	if reasons["b2"] != "event: required" || reasons["b5"] != "previousId: required" || !strings.HasPrefix(reasons["b4"], "type: unknown type") {
		t.Errorf("reasons %v", reasons)
	}
}

func TestEnrichmentTimestamps(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	cases := []struct {
		key, body string
		headers   map[string]string
		check     func(t *testing.T, m map[string]any, received time.Time)
	}{
		{"skew", `{"userId":"skew","event":"E","timestamp":"2026-01-01T00:00:00.000Z","sentAt":"2026-01-01T00:00:10.000Z"}`, nil, func(t *testing.T, m map[string]any, received time.Time) {
			// timestamp = receivedAt - (sentAt - timestamp) = receivedAt - 10s
			ts, _ := schemas.ParseTimestamp(m["timestamp"].(string))
			if d := received.Sub(ts); d != 10*time.Second {
				t.Errorf("receivedAt - timestamp = %v, want 10s", d)
			}
			if m["originalTimestamp"] != "2026-01-01T00:00:00.000Z" {
				t.Errorf("originalTimestamp %v", m["originalTimestamp"])
			}
		}},
		{"historical", `{"userId":"historical","event":"E","timestamp":"2020-05-06T07:08:09.5+02:00"}`, nil, func(t *testing.T, m map[string]any, _ time.Time) {
			if m["timestamp"] != "2020-05-06T05:08:09.500Z" || m["originalTimestamp"] != "2020-05-06T05:08:09.500Z" {
				t.Errorf("timestamp %v original %v", m["timestamp"], m["originalTimestamp"])
			}
		}},
		{"none", `{"userId":"none","event":"E"}`, nil, func(t *testing.T, m map[string]any, received time.Time) {
			if m["timestamp"] != m["receivedAt"] || m["originalTimestamp"] != nil {
				t.Errorf("timestamp %v receivedAt %v original %v", m["timestamp"], m["receivedAt"], m["originalTimestamp"])
			}
			if id, _ := m["messageId"].(string); len(id) != 36 {
				t.Errorf("generated messageId %q", id)
			}
		}},
		{"clientip", `{"userId":"clientip","event":"E","messageId":"m-1","context":{"ip":"8.8.4.4"}}`, map[string]string{"X-Forwarded-For": "1.2.3.4"}, func(t *testing.T, m map[string]any, _ time.Time) {
			if m["context"].(map[string]any)["ip"] != "8.8.4.4" || m["messageId"] != "m-1" {
				t.Errorf("client values overwritten: %v", m)
			}
		}},
		{"xff", `{"userId":"xff","event":"E"}`, map[string]string{"X-Forwarded-For": "203.0.113.9, 127.0.0.5"}, func(t *testing.T, m map[string]any, _ time.Time) {
			if ip := m["context"].(map[string]any)["ip"]; ip != "203.0.113.9" {
				t.Errorf("context.ip %v, want the first untrusted hop", ip)
			}
		}},
	}
	for _, c := range cases {
		hd := basic(testKey)
		for k, v := range c.headers {
			hd[k] = v
		}
		if status, resp := h.post("/v1/track", []byte(c.body), hd); status != 200 {
			t.Fatalf("%s: %d %s", c.key, status, resp)
		}
	}
	recs := consume(t, h.brokers, schemas.TopicEvents, len(cases))
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			for _, r := range recs {
				if string(r.Key) == c.key {
					m := decodeValue(t, r)
					received, err := schemas.ParseTimestamp(m["receivedAt"].(string))
					if err != nil || time.Since(received) > time.Minute {
						t.Fatalf("receivedAt %v", m["receivedAt"])
					}
					c.check(t, m, received)
					return
				}
			}
			t.Fatal("no record")
		})
	}
}

func TestUntrustedPeerCannotSetIP(t *testing.T) {
	h := newHarness(t) // no trusted proxies
	hd := basic(testKey)
	hd["X-Forwarded-For"] = "203.0.113.9"
	if status, _ := h.post("/v1/track", []byte(`{"userId":"u","event":"E"}`), hd); status != 200 {
		t.Fatal(status)
	}
	m := decodeValue(t, consume(t, h.brokers, schemas.TopicEvents, 1)[0])
	if ip := m["context"].(map[string]any)["ip"]; ip != "127.0.0.1" {
		t.Errorf("context.ip %v, want the peer", ip)
	}
}

// TestBrokerOutageAnswers503: with the broker gone, a request answers 503 within the produce
// deadline, never 200.
func TestBrokerOutageAnswers503(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ProduceTimeout = time.Second })
	if status, _ := h.post("/v1/track", []byte(`{"userId":"u","event":"Before"}`), basic(testKey)); status != 200 {
		t.Fatalf("before the outage: %d", status)
	}
	// Point a second service at an address where no broker listens.
	svc, err := New(h.svc.cfg, Deps{
		Deps: platform.Deps{
			Kafka:  kafkaSettings(t, "127.0.0.1:1"),
			Logger: zerolog.Nop(),
		},
		Sources: func() Sources { return testSources },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.producer.Close()
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/track", strings.NewReader(`{"userId":"u","event":"During"}`))
	req.SetBasicAuth(testKey, "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(bytes.TrimSpace(b)) != `{"code":"unavailable","message":"the event store did not acknowledge in time; retry"}` {
		t.Fatalf("got %d %s", resp.StatusCode, b)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("503 after %v, want about the 1s produce timeout", took)
	}
}

// TestInboundFrontDoor: records on tracking.inbound are validated and forwarded exactly like
// HTTP calls, and offsets are committed after forwarding.
func TestInboundFrontDoor(t *testing.T) {
	h := newHarness(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wk := []kgo.RecordHeader{{Key: schemas.HeaderWriteKey, Value: []byte(testKey)}}
	in := []*kgo.Record{
		{Topic: schemas.TopicInbound, Key: []byte("k1"), Value: []byte(`{"type":"track","userId":"k1","event":"From Kafka","sentAt":"2026-01-01T00:00:01Z","timestamp":"2026-01-01T00:00:00Z"}`), Headers: wk},
		{Topic: schemas.TopicInbound, Key: []byte("k2"), Value: []byte(`{"type":"track","userId":"k2"}`), Headers: wk},
		{Topic: schemas.TopicInbound, Key: []byte("k3"), Value: []byte(`{"type":"identify","userId":"k3"}`), Headers: []kgo.RecordHeader{{Key: schemas.HeaderWriteKey, Value: []byte("wrong")}}},
		{Topic: schemas.TopicInbound, Key: []byte("k4"), Value: []byte(`{"type":"identify","userId":"k4"}`)},
		{Topic: schemas.TopicInbound, Key: []byte("k5"), Value: []byte(`not json`), Headers: wk},
	}
	if err := cl.ProduceSync(ctx, in...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.svc.Run(runCtx) }()

	ev := consume(t, h.brokers, schemas.TopicEvents, 1)[0]
	m := decodeValue(t, ev)
	if string(ev.Key) != "k1" || m["event"] != "From Kafka" || header(ev, schemas.HeaderSourceID) != "web" || m["originalTimestamp"] != "2026-01-01T00:00:00.000Z" {
		t.Errorf("forwarded %s %s", ev.Key, ev.Value)
	}
	reasons := map[string]string{}
	for _, r := range consume(t, h.brokers, schemas.TopicRejected, 4) {
		reasons[string(r.Key)] = header(r, schemas.HeaderReason)
	}
	want := map[string]string{"k2": "event: required", "k3": "unknown write key", "k4": "missing write-key header", "k5": "a message must be a JSON object"}
	for k, v := range want {
		if reasons[k] != v {
			t.Errorf("reason of %s = %q, want %q", k, reasons[k], v)
		}
	}
	// Offsets are committed once forwarded: the group's committed offsets reach the end.
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(10 * time.Second)
	for {
		offs, err := adm.FetchOffsets(ctx, h.svc.cfg.InboundGroup)
		var total int64
		if err == nil {
			offs.Each(func(o kadm.OffsetResponse) { total += o.At })
		}
		if total == int64(len(in)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets sum to %d, want %d (%v)", total, len(in), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
