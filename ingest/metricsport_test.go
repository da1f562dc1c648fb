package ingest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestMetricsOffThePublicPort runs the real ingest binary with METRICS_ADDR set (the images
// set it): /metrics is served there and not on the public API port, whose /healthz stays.
func TestMetricsOffThePublicPort(t *testing.T) {
	bin := servicetest.Binary(t, "./cmd/ingest", "builds and runs the ingest binary")
	env := servicetest.New(t, servicetest.Options{Config: "sources: [{id: web, writeKey: " + testKey + "}]\n", LogLevel: zerolog.ErrorLevel})
	api, metrics := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	servicetest.Spawn(t, bin, servicetest.ServiceEnv(env.Kafka.Brokers, "INGEST_ADDR="+api, "METRICS_ADDR="+metrics, "LOG_LEVEL=error")...)
	servicetest.WaitReady(t, "http://"+api+"/readyz", 30*time.Second)
	if a := servicetest.Call(t, http.MethodPost, "http://"+api+"/v1/track", `{"type":"track","event":"E","userId":"u1"}`, "Authorization", servicetest.Basic(testKey)); a.Status != http.StatusOK {
		t.Fatalf("POST /v1/track: %d %s", a.Status, a.Body)
	}
	if a := servicetest.Call(t, http.MethodGet, "http://"+api+"/metrics", ""); a.Status == http.StatusOK {
		t.Errorf("/metrics on the public port: %d %.80s, want it gone", a.Status, a.Body)
	}
	if a := servicetest.Call(t, http.MethodGet, "http://"+metrics+"/metrics", ""); a.Status != http.StatusOK || !strings.Contains(string(a.Body), "tributary_ingest_requests_total") {
		t.Errorf("/metrics on METRICS_ADDR: %d %.200s", a.Status, a.Body)
	}
	if a := servicetest.Call(t, http.MethodGet, "http://"+metrics+"/readyz", ""); a.Status != http.StatusOK {
		t.Errorf("/readyz on METRICS_ADDR: %d", a.Status)
	}
}
