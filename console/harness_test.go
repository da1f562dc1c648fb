package console_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// testToken is the console token of the tests.
const testToken = "test-console-token-0123456789"

// harness is a console on the embedded broker, with a real config store, served over HTTP.
type harness struct {
	t    testing.TB
	env  *servicetest.Env
	svc  *console.Service
	srv  *httptest.Server
	reg  *prometheus.Registry
	logs *servicetest.Buffer // every log line of the console
	// envLogs are the log lines of the Env (its config store, the config file's apply) at the
	// Env's level.
	envLogs *servicetest.Buffer
	stop    func()
	// answers are every answer of do and doAs, by "METHOD path", for scans for secrets.
	answers []answer
}

type answer struct {
	request string
	body    string
}

// secretsNowhere fails if a secret is in an answer, except those of allowed requests
// ("POST /v1/sources"), or in a log line.
func (h *harness) secretsNowhere(t testing.TB, secrets []string, allowed ...string) {
	t.Helper()
	for _, a := range h.answers {
		for _, s := range secrets {
			if strings.Contains(a.body, s) && !slices.Contains(allowed, a.request) {
				t.Errorf("the answer to %s holds a secret: %s", a.request, a.body)
			}
		}
	}
	for _, s := range secrets {
		if strings.Contains(h.logs.String(), s) || strings.Contains(h.envLogs.String(), s) {
			t.Errorf("a log line holds a secret")
		}
	}
}

// baseConfig is the tenant config the tests start from: one source and one destination a
// file manages, as `make run` has them.
const baseConfig = `
sources:
  - id: web
    name: Web site
    writeKey: wk_test_web_0123456789
destinations:
  - id: file-hooks
    type: webhooks
    name: File hooks
    sources: [web]
    settings:
      webhooks:
        - url: http://127.0.0.1:9/file
`

// testEncryptionKey is a CONFIG_ENCRYPTION_KEY of the tests (key id k1).
const testEncryptionKey = "k1:Kr0bI9l1m0nKs8Qv3Zp7xW2yT6uA4cE8gH1jL5nP9rQ="

// newHarness starts a console; mod may change its config.
func newHarness(t testing.TB, mod func(*console.Config)) *harness {
	t.Helper()
	return newHarnessWith(t, servicetest.Options{}, mod)
}

// newHarnessWith is newHarness on an Env of o (its CONFIG_ENCRYPTION_KEY, its log level).
func newHarnessWith(t testing.TB, o servicetest.Options, mod func(*console.Config)) *harness {
	t.Helper()
	envLogs := &servicetest.Buffer{}
	o.LogWriter = envLogs
	env := servicetest.New(t, o)
	// Applied as a config file is: its objects are the file's (origin file:base.yaml).
	path := filepath.Join(t.TempDir(), "base.yaml")
	if err := os.WriteFile(path, []byte(baseConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := platform.ApplyConfigFile(env.Ctx, env.Kafka, schemas.TopicConfig, path, platform.ApplyOptions{}, env.Logger); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.WaitFor(env.Ctx, func(s *platform.Snapshot) bool { _, ok := s.DestinationByID("file-hooks"); return ok }); err != nil {
		t.Fatal(err)
	}
	h := startConsole(t, env, mod)
	h.envLogs = envLogs
	return h
}

// startConsole starts a console on env and waits until it is ready.
func startConsole(t testing.TB, env *servicetest.Env, mod func(*console.Config)) *harness {
	t.Helper()
	h := &harness{t: t, env: env, reg: prometheus.NewRegistry(), logs: &servicetest.Buffer{}, envLogs: &servicetest.Buffer{}}
	cfg := console.DefaultConfig()
	// No deliverer runs beside these consoles: a regulation waits for the other stores (the
	// tests write the router's and audiences' records themselves).
	cfg.RegulationStores = []string{schemas.StoreRouter, schemas.StoreAudiences, schemas.StoreConsole}
	cfg.Addr = "127.0.0.1:0"
	cfg.Token = testToken
	cfg.TestTimeout = 5 * time.Second
	cfg.ShutdownTimeout = 2 * time.Second
	if mod != nil {
		mod(&cfg)
	}
	logger := zerolog.New(io.MultiWriter(h.logs, zerolog.NewTestWriter(t))).Level(zerolog.InfoLevel)
	svc, err := console.New(cfg, console.Deps{Deps: platform.Deps{Kafka: env.Kafka, KafkaOpts: env.KafkaOpts, Logger: logger, Registerer: h.reg, Gatherer: h.reg, Health: platform.NewHealth()}, Store: env.Store})
	if err != nil {
		t.Fatal(err)
	}
	h.svc = svc
	if err := svc.Listen(); err != nil {
		t.Fatal(err)
	}
	h.stop = env.Start("console", svc.Run)
	h.srv = httptest.NewServer(svc.Handler())
	t.Cleanup(h.srv.Close)
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + svc.Addr() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("console not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return h
}

// response is one answer of the API.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map.
func (r response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v: %s", r.Status, err, r.Body)
	}
	return m
}

// Data is the answer's "data" object.
func (r response) Data(t testing.TB) map[string]any {
	t.Helper()
	d, ok := r.JSON(t)["data"].(map[string]any)
	if !ok {
		t.Fatalf("answer has no data object: %s", r.Body)
	}
	return d
}

// do sends a request with the test token; body is JSON-encoded unless it is a string or nil.
func (h *harness) do(method, path string, body any, headers ...string) response {
	h.t.Helper()
	return h.doAs(testToken, method, path, body, headers...)
}

// doAs sends a request with token ("" : no Authorization header).
func (h *harness) doAs(token, method, path string, body any, headers ...string) response {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	h.answers = append(h.answers, answer{request: method + " " + strings.SplitN(path, "?", 2)[0], body: string(b)})
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// expect fails unless r has status.
func expect(t testing.TB, r response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
}

// expectError fails unless r is status with the error body {code, message, field}.
func expectError(t testing.TB, r response, status int, code, message, field string) {
	t.Helper()
	expect(t, r, status)
	m := r.JSON(t)
	if m["code"] != code || m["message"] != message || (m["field"] != nil && m["field"] != field) || (m["field"] == nil && field != "") {
		t.Fatalf("error %s, want code %q, message %q, field %q", r.Body, code, message, field)
	}
}
