package platform_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform"
)

// getHost sends GET path to h with the Host header host.
func getHost(t *testing.T, h http.Handler, host, path string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Host = host
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestAllowedHosts: the server's app answers only requests whose Host is one of its names
// (docs/security.md#dns-rebinding): a page of another site whose name an attacker re-points at
// the service's address sends its own name as Host, and gets 421 with a message naming the
// setting. The loopback names are always accepted, the port and the case do not matter, and
// /healthz, /readyz and /metrics answer whatever the Host (kubelet probes and Prometheus use
// the pod's IP).
func TestAllowedHosts(t *testing.T) {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app") })
	cases := []struct {
		name    string
		addr    string
		allowed []string // nil: the default of addr
		ok, no  []string // Host headers accepted and refused
	}{
		{name: "loopback default", addr: "127.0.0.1:8090",
			ok: []string{"127.0.0.1:8090", "localhost:8090", "LOCALHOST", "[::1]:8090", "localhost.", "127.0.0.1"},
			no: []string{"evil.example:8090", "evil.example", "127.0.0.1.nip.io:8090", "10.0.0.5:8090", "localhost.evil.example", ""}},
		{name: "ipv6 loopback default", addr: "[::1]:8090",
			ok: []string{"[::1]:8090", "localhost", "127.0.0.1:8090"},
			no: []string{"evil.example"}},
		{name: "localhost default", addr: "localhost:8090",
			ok: []string{"localhost:8090"},
			no: []string{"rebind.evil.example:8090"}},
		{name: "all interfaces default", addr: "0.0.0.0:8090",
			ok: []string{"anything.example", "10.1.2.3:8090", "localhost"}},
		{name: "unspecified host default", addr: ":8090",
			ok: []string{"anything.example"}},
		{name: "configured names", addr: "0.0.0.0:8090",
			allowed: []string{"console.example.com", "*.svc.example", "tr-tributary-console", "10.0.0.7", "[fd00::1]"},
			ok: []string{"console.example.com", "Console.Example.COM:443", "console.example.com.", "a.svc.example", "pod-0.tr.svc.example:8091",
				"tr-tributary-console:8090", "10.0.0.7:8090", "[fd00::1]:8090", "localhost:8090", "127.0.0.1", "[::1]"},
			no: []string{"svc.example", "evil.example", "console.example.com.evil.example", "xconsole.example.com", "10.0.0.8", ""}},
		{name: "configured star", addr: "127.0.0.1:8090", allowed: []string{"*"},
			ok: []string{"anything.example", "localhost"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := platform.NewHTTPServer(c.addr, app, nil, prometheus.NewRegistry(), zerolog.Nop())
			if c.allowed != nil {
				if err := srv.AllowHosts("CONSOLE_ALLOWED_HOSTS", c.allowed); err != nil {
					t.Fatal(err)
				}
			}
			h := srv.Handler()
			for _, host := range c.ok {
				if code, body := getHost(t, h, host, "/v1/sources"); code != http.StatusOK || body != "app" {
					t.Errorf("Host %q: %d %s, want 200 from the app", host, code, body)
				}
			}
			for _, host := range c.no {
				code, body := getHost(t, h, host, "/v1/sources")
				var e struct{ Code, Message string }
				if code != http.StatusMisdirectedRequest || json.Unmarshal([]byte(body), &e) != nil || e.Code != "misdirected_request" {
					t.Errorf("Host %q: %d %s, want 421 misdirected_request", host, code, body)
					continue
				}
				if c.allowed != nil && !strings.Contains(e.Message, "CONSOLE_ALLOWED_HOSTS") {
					t.Errorf("Host %q: message %q does not name the setting", host, e.Message)
				}
				// The health answers and the metrics are not the app's: probes and scrapers
				// reach them by the pod's address.
				for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
					if code, body := getHost(t, h, host, path); code != http.StatusOK {
						t.Errorf("Host %q: GET %s = %d %s, want 200", host, path, code, body)
					}
				}
			}
		})
	}
}

// TestAllowedHostsRefusesBadNames: a value of an ALLOWED_HOSTS setting that is not a host name,
// an IP address or *.<name> is an error naming the setting and the value.
func TestAllowedHostsRefusesBadNames(t *testing.T) {
	for _, bad := range []string{"console.example.com:8090", "https://console.example.com", "console.example.com/ui", "*example.com", "a.*.example.com", "*.", "bad host", "[::1", "-x.example.com"} {
		err := platform.ValidateAllowedHosts("AUDIENCES_ALLOWED_HOSTS", []string{"ok.example.com", bad})
		if err == nil || !strings.Contains(err.Error(), "AUDIENCES_ALLOWED_HOSTS") || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v, want an error naming AUDIENCES_ALLOWED_HOSTS and the value", bad, err)
		}
		srv := platform.NewHTTPServer("127.0.0.1:0", http.NotFoundHandler(), nil, nil, zerolog.Nop())
		if err := srv.AllowHosts("AUDIENCES_ALLOWED_HOSTS", []string{bad}); err == nil {
			t.Errorf("AllowHosts(%q) = nil, want an error", bad)
		}
	}
	if err := platform.ValidateAllowedHosts("AUDIENCES_ALLOWED_HOSTS", []string{"*", "*.example.com", "a.example.com", "10.0.0.1", "::1", "[fd00::1]", "tr-tributary-audiences-api", "svc_1.local"}); err != nil {
		t.Errorf("valid names refused: %v", err)
	}
}
