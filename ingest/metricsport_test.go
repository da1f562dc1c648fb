package ingest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMetricsOffThePublicPort runs the real ingest binary with METRICS_ADDR set (the images
// set it): /metrics is served there and not on the public API port, whose /healthz stays.
func TestMetricsOffThePublicPort(t *testing.T) {
	bin := servicetest.Binary(t, "./cmd/ingest", "builds and runs the ingest binary")
	env := servicetest.New(t, servicetest.Options{Config: "sources: [{id: web, writeKey: " + testKey + "}]\n", LogLevel: zerolog.ErrorLevel})
	api, metrics := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	servicetest.Spawn(t, bin, servicetest.ServiceEnv(env.Kafka.Brokers, "INGEST_ADDR="+api, "METRICS_ADDR="+metrics, "LOG_LEVEL=error")...)
	deadline := time.Now().Add(30 * time.Second)
	for code, _ := httpGet(t, "http://"+api+"/readyz"); code != http.StatusOK; code, _ = httpGet(t, "http://"+api+"/readyz") {
		if time.Now().After(deadline) {
			t.Fatal("ingest not ready within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+api+"/v1/track", strings.NewReader(`{"type":"track","event":"E","userId":"u1"}`))
	req.SetBasicAuth(testKey, "")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/track: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if code, body := httpGet(t, "http://"+api+"/metrics"); code == http.StatusOK {
		t.Errorf("/metrics on the public port: %d %.80s, want it gone", code, body)
	}
	if code, body := httpGet(t, "http://"+metrics+"/metrics"); code != http.StatusOK || !strings.Contains(body, "tributary_ingest_requests_total") {
		t.Errorf("/metrics on METRICS_ADDR: %d %.200s", code, body)
	}
	if code, _ := httpGet(t, "http://"+metrics+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz on METRICS_ADDR: %d", code)
	}
}
