package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tributary-cdp/tributary/platform"
)

// get sends GET path to h as a client of a server on loopback does (Host 127.0.0.1).
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	return getHost(t, h, "127.0.0.1", path)
}

func TestHealth(t *testing.T) {
	health := platform.NewHealth()
	srv := platform.NewHTTPServer("127.0.0.1:0", nil, health, nil, zerolog.Nop())
	h := srv.Handler()

	type want struct {
		healthz, readyz int
		body            string // a fragment of /healthz's body
	}
	steps := []struct {
		name   string
		action func()
		want   want
	}{
		{"nothing registered", func() {}, want{200, 200, `"status":"ok"`}},
		{"component not ready", func() { health.SetReady("config", false) }, want{503, 503, `"config":"not ready"`}},
		{"component ready", func() { health.SetReady("config", true) }, want{200, 200, `"config":"ok"`}},
		{"failing check", func() {
			health.AddCheck("kafka", func(context.Context) error { return errors.New("no broker answers") })
		}, want{503, 503, `"kafka":"failing"`}},
		{"check passes", func() { health.AddCheck("kafka", func(context.Context) error { return nil }) }, want{200, 200, `"kafka":"ok"`}},
		{"warming up", func() { health.SetWarming("state", false) }, want{200, 503, `"status":"ok"`}},
		{"warmed up", func() { health.SetWarming("state", true) }, want{200, 200, `"status":"ok"`}},
		{"shutting down", health.SetShuttingDown, want{200, 503, `"status":"ok"`}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.action()
			code, body := get(t, h, "/healthz")
			if code != st.want.healthz || !strings.Contains(body, st.want.body) {
				t.Errorf("/healthz = %d %s, want %d with %s", code, body, st.want.healthz, st.want.body)
			}
			var report platform.HealthReport
			if err := json.Unmarshal([]byte(body), &report); err != nil {
				t.Errorf("/healthz body is not JSON: %v", err)
			}
			if report.Version != platform.Version {
				t.Errorf("/healthz version %q, want %q", report.Version, platform.Version)
			}
			if code, body := get(t, h, "/readyz"); code != st.want.readyz {
				t.Errorf("/readyz = %d %s, want %d", code, body, st.want.readyz)
			}
		})
	}
}

// TestHealthDetailsOnlyOnTheMetricsPort: a failed check's error can name internal addresses
// (the broker's); a public port (a server with an app: ingest's) shows only "failing", even with
// ?verbose; the metrics port shows the error with ?verbose.
func TestHealthDetailsOnlyOnTheMetricsPort(t *testing.T) {
	health := platform.NewHealth()
	health.AddCheck("kafka", func(context.Context) error { return errors.New("dial tcp 10.20.30.40:9092: connection refused") })
	public := platform.NewHTTPServer("127.0.0.1:0", http.NotFoundHandler(), health, nil, zerolog.Nop()).Handler()
	metrics := platform.NewHTTPServer("127.0.0.1:0", nil, health, nil, zerolog.Nop()).Handler()
	for _, path := range []string{"/healthz", "/readyz", "/healthz?verbose", "/readyz?verbose"} {
		if code, body := get(t, public, path); code != 503 || strings.Contains(body, "10.20.30.40") || !strings.Contains(body, `"kafka":"failing"`) {
			t.Errorf("public %s = %d %s: want 503, \"failing\", no address", path, code, body)
		}
	}
	if _, body := get(t, metrics, "/healthz"); strings.Contains(body, "10.20.30.40") {
		t.Errorf("metrics /healthz without ?verbose shows the address: %s", body)
	}
	if _, body := get(t, metrics, "/readyz?verbose"); !strings.Contains(body, "10.20.30.40:9092: connection refused") {
		t.Errorf("metrics /readyz?verbose = %s, want the check's error", body)
	}
}

func TestHealthCheckTimeout(t *testing.T) {
	health := platform.NewHealth()
	health.SetCheckTimeout(50 * time.Millisecond)
	health.AddCheck("slow", func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	start := time.Now()
	ok, report := health.Check(context.Background())
	if ok || !strings.Contains(report.Checks["slow"], "deadline") {
		t.Errorf("Check = %v %+v, want the slow check to fail on its deadline", ok, report)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Check took %v", d)
	}
}

func TestHTTPServerRoutes(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "tributary_test_total", Help: "A test counter."})
	reg.MustRegister(c)
	c.Add(3)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app:"+r.URL.Path) })
	h := platform.NewHTTPServer("127.0.0.1:0", app, nil, reg, zerolog.Nop()).Handler()
	tests := []struct {
		path string
		code int
		body string
	}{
		{"/metrics", 200, "tributary_test_total 3"},
		{"/healthz", 200, `"status":"ok"`},
		{"/readyz", 200, `"status":"ok"`},
		{"/v1/track", 200, "app:/v1/track"},
		{"/", 200, "app:/"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			code, body := get(t, h, tt.path)
			if code != tt.code || !strings.Contains(body, tt.body) {
				t.Errorf("GET %s = %d %q, want %d with %q", tt.path, code, body, tt.code, tt.body)
			}
		})
	}
}

// client never keeps connections, so that goleak finds no idle ones at the end.
func client() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
}

func TestHTTPServerLimits(t *testing.T) {
	srv := platform.NewHTTPServer("127.0.0.1:0", nil, nil, nil, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	req, _ := http.NewRequest(http.MethodGet, "http://"+srv.Addr()+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("a", platform.DefaultMaxHeaderBytes+8<<10))
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("oversized headers: %d, want 431", resp.StatusCode)
	}
}

func TestHTTPServerGracefulDrain(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		io.WriteString(w, "finished")
	})
	health := platform.NewHealth()
	srv := platform.NewHTTPServer("127.0.0.1:0", app, health, nil, zerolog.Nop())
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(srv.Addr(), ":0") {
		t.Fatalf("Addr after Listen = %s, want the bound port", srv.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	type result struct {
		code int
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := client().Get("http://" + srv.Addr() + "/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{resp.StatusCode, string(b), err}
	}()
	<-started
	cancel() // shut down with the slow request in flight
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Run returned %v before the in-flight request finished", err)
	default:
	}
	if code, _ := get(t, srv.Handler(), "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while draining = %d, want 503", code)
	}
	if _, err := client().Get("http://" + srv.Addr() + "/healthz"); err == nil {
		t.Errorf("a new connection was accepted while draining")
	}
	close(release)
	r := <-got
	if r.err != nil || r.code != 200 || r.body != "finished" {
		t.Errorf("in-flight request: %d %q %v, want 200 finished", r.code, r.body, r.err)
	}
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil after a clean drain", err)
	}
}

func TestHTTPServerDrainTimeout(t *testing.T) {
	started := make(chan struct{})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done() // never finishes on its own
	})
	srv := platform.NewHTTPServer("127.0.0.1:0", app, nil, nil, zerolog.Nop())
	srv.ShutdownTimeout = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- srv.Run(ctx) }()
	reqDone := make(chan struct{})
	go func() {
		defer close(reqDone)
		if resp, err := client().Get("http://" + srv.Addr() + "/stuck"); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "draining") {
			t.Errorf("Run = %v, want a drain timeout error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not give up draining")
	}
	<-reqDone
}

func TestHTTPServerListenError(t *testing.T) {
	srv := platform.NewHTTPServer("127.0.0.1:0", nil, nil, nil, zerolog.Nop())
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	other := platform.NewHTTPServer(srv.Addr(), nil, nil, nil, zerolog.Nop())
	if err := other.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "listening on") {
		t.Errorf("Run on a taken port = %v, want a listen error", err)
	}
}

// TestHTTPServerUseListener: a server given a listener (a test's in-memory network) serves on
// it rather than binding its address, and tells its address; inside a testing/synctest bubble
// its requests and shutdown then run in virtual time.
func TestHTTPServerUseListener(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var network kfake.VirtualNetwork
		ln, err := network.Listen("tcp", "localhost:8100")
		if err != nil {
			t.Fatal(err)
		}
		srv := platform.NewHTTPServer("127.0.0.1:1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Minute) // virtual
			_, _ = io.WriteString(w, "served")
		}), nil, nil, zerolog.Nop())
		srv.UseListener(ln)
		if got := srv.Addr(); got != "localhost:8100" {
			t.Errorf("Addr = %q, want the listener's", got)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx) }()
		client := &http.Client{Transport: &http.Transport{DialContext: network.DialContext}}
		start := time.Now()
		resp, err := client.Get("http://localhost:8100/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "served" || time.Since(start) != time.Minute {
			t.Errorf("answer %q after %v, want served after 1m", b, time.Since(start))
		}
		client.CloseIdleConnections()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}
