package devstack_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/tributary-cdp/tributary/platform"
)

// make run builds every service on one platform.Deps with one Health: /healthz (served by
// ingest) reports each service's Kafka check under the service's name, the deliverer's too
// (docs/operations.md#health-and-metrics).
func TestMakeRunHealthReportsEveryService(t *testing.T) {
	st := startStack(t, "http://127.0.0.1:1/unused")
	resp, err := http.Get("http://" + st.IngestAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var report platform.HealthReport
	if err := json.NewDecoder(resp.Body).Decode(&report); err != nil {
		t.Fatal(err)
	}
	for _, check := range []string{"ingest kafka", "router kafka", "deliverer kafka", "audiences kafka"} {
		if report.Checks[check] != "ok" {
			t.Errorf("/healthz: check %q is %q, want ok (checks: %v)", check, report.Checks[check], report.Checks)
		}
	}
}
