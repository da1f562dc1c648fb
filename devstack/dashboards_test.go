package devstack_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// repoRoot is the repository's root folder.
func repoRoot() string {
	_, thisFile, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(thisFile))
}

var metricName = regexp.MustCompile(`\btributary_[a-z_]+`)

// metricsNamed returns the metric families the file's queries name (histogram series names
// folded into their family).
func metricsNamed(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range metricName.FindAllString(string(raw), -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if strings.HasSuffix(m, "_seconds"+suffix) {
				m = strings.TrimSuffix(m, suffix)
			}
		}
		out = append(out, m)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestDashboardAndAlertsNameLiveMetrics: every metric the Grafana dashboard
// (deploy/grafana/tributary.json) and the alert rules (deploy/helm/tributary/files/alerts.yaml)
// name exists in a running stack's /metrics, once a message was delivered, one retried and one
// dead-lettered; and promtool accepts the rules and passes their unit tests
// (deploy/prometheus/alerts_test.yaml; TEST_PROMTOOL=1, as in CI: promtool must be installed;
// Debian's package "prometheus" has it).
func TestDashboardAndAlertsNameLiveMetrics(t *testing.T) {
	root := repoRoot()
	dashboard := filepath.Join(root, "deploy/grafana/tributary.json")
	rules := filepath.Join(root, "deploy/helm/tributary/files/alerts.yaml")
	if promtool, err := exec.LookPath("promtool"); err == nil {
		if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules: %v\n%s", err, out)
		}
		// The rules' unit tests: each alert fires on the series it is about, and not before its
		// "for".
		if out, err := exec.Command(promtool, "test", "rules", filepath.Join(root, "deploy/prometheus/alerts_test.yaml")).CombinedOutput(); err != nil {
			t.Errorf("promtool test rules: %v\n%s", err, out)
		}
	} else if os.Getenv("TEST_PROMTOOL") != "" {
		t.Error("TEST_PROMTOOL is set and promtool is not installed (apt-get install prometheus)")
	} else {
		t.Log("promtool not installed: the rules' syntax is not checked here (CI checks it)")
	}

	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.Contains(string(body), `"gone-1"`):
			w.WriteHeader(http.StatusGone) // dead-lettered at once
		case strings.Contains(string(body), `"retry-1"`) && seen["retry-1"] == 0:
			seen["retry-1"]++
			w.WriteHeader(http.StatusServiceUnavailable) // retried from a tier
		default:
			seen["ok"]++
		}
	}))
	defer srv.Close()
	st := startStack(t, srv.URL)
	for _, id := range []string{"ok-1", "gone-1", "retry-1"} {
		post(t, st, "/v1/track", `{"userId":"u-`+id+`","event":"E","messageId":"`+id+`"}`)
	}
	var families map[string]bool
	deadline := time.Now().Add(30 * time.Second)
	for {
		families = scrapeFamilies(t, "http://"+st.IngestAddr()+"/metrics")
		mu.Lock()
		done := seen["ok"] >= 2 // ok-1 and retry-1's second attempt
		mu.Unlock()
		if done && families["tributary_deliverer_dlq_total"] && families["tributary_deliverer_tier_lateness_seconds"] || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, file := range []string{dashboard, rules} {
		names := metricsNamed(t, file)
		if len(names) < 4 {
			t.Fatalf("%s names %d metrics: the pattern missed them", file, len(names))
		}
		for _, name := range names {
			if !families[name] {
				t.Errorf("%s names %s, which a running stack does not export", filepath.Base(file), name)
			}
		}
	}
}

// scrapeFamilies returns the metric families of a /metrics page.
func scrapeFamilies(t *testing.T, url string) map[string]bool {
	t.Helper()
	raw := servicetest.Call(t, http.MethodGet, url, "").Body
	out := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
		}
	}
	return out
}
