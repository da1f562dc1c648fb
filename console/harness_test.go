package console_test

import (
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
	applyBaseConfig(t, env)
	if _, err := env.Store.WaitFor(env.Ctx, func(s *platform.Snapshot) bool { _, ok := s.DestinationByID("file-hooks"); return ok }); err != nil {
		t.Fatal(err)
	}
	h := startConsole(t, env, mod)
	h.envLogs = envLogs
	return h
}

// applyBaseConfig applies baseConfig as the config file base.yaml is applied: its objects are
// the file's (origin file:base.yaml). ApplyConfigFile dials Kafka on its own, over loopback TCP:
// on the virtual network, the same records are written through the Env's client.
func applyBaseConfig(t testing.TB, env *servicetest.Env) {
	t.Helper()
	if env.Network != nil {
		cfg, err := schemas.ParseConfig([]byte(baseConfig), schemas.ConfigFormatYAML)
		if err != nil {
			t.Fatal(err)
		}
		origin := schemas.FileOrigin("base.yaml")
		for i := range cfg.Sources {
			cfg.Sources[i].Origin = origin
		}
		for i := range cfg.Destinations {
			cfg.Destinations[i].Origin = origin
		}
		keys, err := env.Kafka.ConfigKeyring()
		if err != nil {
			t.Fatal(err)
		}
		if err := platform.ApplyConfig(env.Ctx, env.Client, schemas.TopicConfig, cfg, keys); err != nil {
			t.Fatal(err)
		}
		return
	}
	path := filepath.Join(t.TempDir(), "base.yaml")
	if err := os.WriteFile(path, []byte(baseConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := platform.ApplyConfigFile(env.Ctx, env.Kafka, schemas.TopicConfig, path, platform.ApplyOptions{}, env.Logger); err != nil {
		t.Fatal(err)
	}
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
	listen(t, env, svc)
	h.stop = env.Start("console", svc.Run)
	h.srv = serve(t, env, svc.Handler())
	env.WaitReady("http://"+svc.Addr()+"/readyz", 15*time.Second)
	return h
}

// newVirtualHarness is newHarness on the virtual network (servicetest.Options.Virtual), for a
// test inside a testing/synctest bubble: the console's clock and every wait of the test are
// the bubble's.
func newVirtualHarness(t *testing.T, mod func(*console.Config)) *harness {
	t.Helper()
	return newHarnessWith(t, servicetest.Options{Virtual: true}, mod)
}

// listen binds svc's address: on env's virtual network when it has one, else CONSOLE_ADDR.
func listen(t testing.TB, env *servicetest.Env, svc *console.Service) {
	t.Helper()
	if env.Network != nil {
		svc.ServeOn(env.Listen(0))
	} else if err := svc.Listen(); err != nil {
		t.Fatal(err)
	}
}

// serve serves handler on a test server, closed on cleanup: on env's virtual network when it
// has one (its Client dials there), else on loopback.
func serve(t testing.TB, env *servicetest.Env, handler http.Handler) *httptest.Server {
	t.Helper()
	if env.Network == nil {
		srv := httptest.NewServer(handler)
		t.Cleanup(srv.Close)
		return srv
	}
	srv := httptest.NewUnstartedServer(handler)
	_ = srv.Listener.Close() // a loopback one
	srv.Listener = env.Listen(0)
	srv.Start()
	srv.Client().Transport.(*http.Transport).DialContext = env.Network.DialContext
	t.Cleanup(srv.Close)
	return srv
}

// response is one answer of the API.
type response servicetest.Answer

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
	var text string
	switch b := body.(type) {
	case nil:
	case string:
		text = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		text = string(j)
	}
	a := h.env.Call(method, h.srv.URL+path, text, append([]string{"Authorization", servicetest.Bearer(token)}, headers...)...)
	h.answers = append(h.answers, answer{request: method + " " + strings.SplitN(path, "?", 2)[0], body: string(a.Body)})
	return response(a)
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
