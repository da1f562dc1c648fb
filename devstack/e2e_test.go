package devstack_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/devstack"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// hook is a webhook receiver that keeps every request.
type hook struct {
	mu   sync.Mutex
	got  []*http.Request
	body [][]byte
	at   []time.Time
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.got, h.body, h.at = append(h.got, r), append(h.body, b), append(h.at, time.Now())
	h.mu.Unlock()
}

func (h *hook) wait(t *testing.T, n int) ([]*http.Request, [][]byte) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h.mu.Lock()
		got, body := append([]*http.Request(nil), h.got...), append([][]byte(nil), h.body...)
		h.mu.Unlock()
		if len(got) >= n {
			return got, body
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver got %d webhooks, want %d", len(got), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startStack runs the whole of Tributary in this process (as make run does) with a config that
// sends source web's messages to url, signed with secret; opts change the stack's settings.
func startStack(t testing.TB, url string, opts ...func(*devstack.Config)) *devstack.Stack {
	t.Helper()
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "config.yaml")
	yaml := `sources: [{id: web, writeKey: wk_e2e}]
destinations:
  - id: hooks
    type: webhooks
    sources: [web]
    settings: {webhooks: [{url: "` + url + `", headers: {X-Team: growth}}], sharedSecret: e2e-secret}
`
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := devstack.DefaultConfig()
	cfg.DataDir, cfg.EmbeddedPort, cfg.Ingest.Addr, cfg.Audiences.Addr, cfg.ConfigFile = filepath.Join(dir, "data"), 0, "127.0.0.1:0", "127.0.0.1:0", cfgFile
	cfg.Deliverer.AllowPrivate = true
	cfg.Deliverer.RetrySchedule = []time.Duration{time.Second, 2 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := devstack.New(ctx, cfg, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stack: %v", err)
		}
		st.Close()
	})
	if err := st.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// withConfig adds yaml (more top-level sections) to startStack's config file.
func withConfig(t testing.TB, yaml string) func(*devstack.Config) {
	return func(c *devstack.Config) {
		f, err := os.OpenFile(c.ConfigFile, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(yaml); err != nil {
			t.Fatal(err)
		}
	}
}

// post sends a Segment call to the stack's ingest with the write key wk_e2e and fails the test
// unless ingest accepted it.
func post(t testing.TB, st *devstack.Stack, path, body string) {
	t.Helper()
	a := servicetest.Call(t, http.MethodPost, "http://"+st.IngestAddr()+path, body, "Authorization", servicetest.Basic("wk_e2e"))
	if a.Status != 200 || !bytes.Contains(a.Body, []byte(`"success":true`)) {
		t.Fatalf("%s: %d %s", path, a.Status, a.Body)
	}
}

// TestEndToEnd: Segment calls over HTTP come out as signed webhooks, one per call, with the
// documented body (docs/receivers.md#the-body), through ingest, Kafka, router and deliverer.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	rc := &hook{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	st := startStack(t, srv.URL+"/segment")

	post(t, st, "/v1/track", `{"userId":"u1","event":"Order Completed","properties":{"total":12345678901234567890},"messageId":"e2e-track"}`)
	post(t, st, "/v1/alias", `{"userId":"u2","previousId":"u1","messageId":"e2e-alias"}`)
	post(t, st, "/v1/batch", `{"batch":[{"type":"identify","userId":"u2","traits":{"plan":"pro"},"messageId":"e2e-identify"},{"type":"page","anonymousId":"a1","name":"Home","properties":{"path":"/"},"messageId":"e2e-page"},{"type":"track","userId":"u3","event":"Skipped","integrations":{"All":false},"messageId":"e2e-off"}]}`)

	rc.wait(t, 4)
	time.Sleep(500 * time.Millisecond)
	reqs, bodies := rc.wait(t, 4)
	if len(reqs) != 4 {
		t.Fatalf("%d webhooks, want 4 (the All:false track is not delivered)", len(reqs))
	}
	byID := map[string]map[string]any{}
	for i, r := range reqs {
		if !schemas.VerifyXSignature("e2e-secret", bodies[i], r.Header.Get("X-Signature")) {
			t.Errorf("X-Signature of %s does not verify", bodies[i])
		}
		if r.Header.Get("User-Agent") != "Tributary/1.0" || r.Header.Get("X-Team") != "growth" || r.URL.Path != "/segment" {
			t.Errorf("request %v %s", r.Header, r.URL.Path)
		}
		var m map[string]any
		if err := json.Unmarshal(bodies[i], &m); err != nil {
			t.Fatal(err)
		}
		byID[r.Header.Get("X-Message-Id")] = m
		if ts, _ := m["timestamp"].(string); len(ts) != 24 || !strings.HasSuffix(ts, "Z") {
			t.Errorf("timestamp %q", ts)
		}
	}
	if m := byID["e2e-track"]; m["version"] != 1.0 || m["event"] != "Order Completed" || m["userId"] != "u1" || m["receivedAt"] == nil {
		t.Errorf("track body %v", m)
	}
	if !bytes.Contains(bodies[indexOf(reqs, "e2e-track")], []byte(`12345678901234567890`)) {
		t.Error("large integer not kept exactly")
	}
	if m := byID["e2e-alias"]; m["Previous ID"] != "u1" || m["User ID"] != "u2" || m["type"] != "alias" {
		t.Errorf("alias body %v", m)
	}
	if m := byID["e2e-identify"]; m["type"] != "identify" || m["traits"].(map[string]any)["plan"] != "pro" {
		t.Errorf("identify body %v", m)
	}
	if m := byID["e2e-page"]; m["type"] != "page" || m["anonymousId"] != "a1" {
		t.Errorf("page body %v", m)
	}
}

// TestEndToEndSecretsAtRest runs the stack with CONFIG_ENCRYPTION_KEY set: on
// tributary.config the destination's shared secret, header value and URL (it carries a token)
// are encrypted, and the webhook still arrives at that URL, signed with that secret and
// carrying that header — the services read them decrypted
// (docs/configuration.md#secrets-at-rest).
func TestEndToEndSecretsAtRest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	rc := &hook{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	key := "e2e:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	st := startStack(t, srv.URL+"/segment?token=e2e-url-tok", func(c *devstack.Config) { c.Kafka.ConfigEncryptionKey = key })

	post(t, st, "/v1/track", `{"userId":"u1","event":"Order Completed","messageId":"e2e-sealed"}`)
	reqs, bodies := rc.wait(t, 1)
	if !schemas.VerifyXSignature("e2e-secret", bodies[0], reqs[0].Header.Get("X-Signature")) || reqs[0].Header.Get("X-Team") != "growth" {
		t.Errorf("the webhook is not signed with the decrypted secret or lacks the decrypted header: %v", reqs[0].Header)
	}
	if got := reqs[0].URL.Query().Get("token"); got != "e2e-url-tok" {
		t.Errorf("the webhook arrived with token %q, want the decrypted URL's e2e-url-tok", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers()...), kgo.ConsumeTopics(schemas.TopicConfig),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var stored []byte
	for stored == nil && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if string(r.Key) == "destination/hooks" {
				stored = r.Value
			}
		})
	}
	switch {
	case stored == nil:
		t.Fatal("destination/hooks not found on tributary.config")
	case bytes.Contains(stored, []byte("e2e-secret")) || bytes.Contains(stored, []byte("growth")) || bytes.Contains(stored, []byte("e2e-url-tok")):
		t.Errorf("tributary.config holds a secret in clear: %s", stored)
	case bytes.Count(stored, []byte(`"enc:v1:e2e:`)) != 3:
		t.Errorf("want the secret, the header value and the URL encrypted with key e2e: %s", stored)
	}
}

func indexOf(reqs []*http.Request, id string) int {
	for i, r := range reqs {
		if r.Header.Get("X-Message-Id") == id {
			return i
		}
	}
	return 0
}

// TestEndToEndAudiences: track calls in at ingest make a realtime audience's identify arrive,
// signed, at the webhook receiver within 2 s, and a computed trait's identify at the next
// sync, both as identify calls of source web with their context.personas
// (docs/audiences.md).
func TestEndToEndAudiences(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	rc := &hook{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	st := startStack(t, srv.URL+"/segment", func(c *devstack.Config) { c.Audiences.SyncInterval = time.Second }, withConfig(t, `audiences:
  - id: big-spenders
    name: Big Spenders
    source: web
    realtime: true
    rule:
      event: Order Completed
      where: [{property: revenue, gte: 100}]
computedTraits:
  - id: orders
    name: Orders Placed
    source: web
    count: {event: Order Completed}
`))
	post(t, st, "/v1/track", `{"userId":"u1","event":"Order Completed","properties":{"revenue":50},"messageId":"small"}`)
	rc.wait(t, 2) // the track, and the computed trait's identify at the next sync
	sent := time.Now()
	post(t, st, "/v1/track", `{"userId":"u1","event":"Order Completed","properties":{"revenue":150},"messageId":"big"}`)
	deadline := time.Now().Add(20 * time.Second)
	var joined, counted bool
	for !(joined && counted) {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: audience identify %v, computed trait identify with 2 orders %v", joined, counted)
		}
		time.Sleep(20 * time.Millisecond)
		rc.mu.Lock()
		reqs, bodies, at := append([]*http.Request(nil), rc.got...), append([][]byte(nil), rc.body...), append([]time.Time(nil), rc.at...)
		rc.mu.Unlock()
		for i, r := range reqs {
			var m struct {
				Type    string         `json:"type"`
				UserID  string         `json:"userId"`
				Traits  map[string]any `json:"traits"`
				Context struct {
					Personas map[string]string `json:"personas"`
				} `json:"context"`
			}
			if json.Unmarshal(bodies[i], &m) != nil || m.Type != "identify" {
				continue
			}
			if !schemas.VerifyXSignature("e2e-secret", bodies[i], r.Header.Get("X-Signature")) || m.UserID != "u1" {
				t.Fatalf("identify not signed or not u1: %s", bodies[i])
			}
			if v, ok := m.Traits["big_spenders"]; ok && !joined {
				if v != true || m.Context.Personas["audience_id"] != "big-spenders" || m.Context.Personas["computation_class"] != "audience" {
					t.Fatalf("audience identify: %s", bodies[i])
				}
				if took := at[i].Sub(sent); took > 2*time.Second {
					t.Errorf("the realtime audience's identify arrived %v after the qualifying event", took)
				}
				joined = true
			}
			if m.Traits["orders_placed"] == 2.0 {
				if m.Context.Personas["computed_trait_id"] != "orders" || m.Context.Personas["computation_class"] != "computed_trait" {
					t.Fatalf("computed trait identify: %s", bodies[i])
				}
				counted = true
			}
		}
	}
	// The profile API of make run, with the token it generated.
	a := servicetest.Call(t, http.MethodGet, "http://"+st.AudiencesAddr()+"/v1/profiles/u1", "", "Authorization", servicetest.Bearer(st.AudiencesToken()))
	if a.Status != 200 || !bytes.Contains(a.Body, []byte(`"orders_placed":2`)) || !bytes.Contains(a.Body, []byte(`"big-spenders"`)) {
		t.Fatalf("profile API: %d %s", a.Status, a.Body)
	}
}
