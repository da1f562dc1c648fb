package devstack_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// hostGet GETs url with the Host header host (and the bearer token when set), and returns the
// status and body.
func hostGet(t *testing.T, url, host, token string) (int, string) {
	t.Helper()
	a := servicetest.Call(t, http.MethodGet, url, "", "Host", host, "Authorization", servicetest.Bearer(token))
	return a.Status, string(a.Body)
}

// TestServicesRefuseForeignHosts: every HTTP service of make run answers only its own names
// (docs/security.md#dns-rebinding). A page whose name an attacker re-points at 127.0.0.1
// makes the browser send that name as Host: ingest, the profile API and the console answer it
// 421, while /healthz and /readyz (probes) and /metrics answer any Host. A name of
// CONSOLE_ALLOWED_HOSTS is accepted, the loopback names always.
func TestServicesRefuseForeignHosts(t *testing.T) {
	cs := startConsoleStack(t, "", map[string]string{"CONSOLE_ALLOWED_HOSTS": "console.example.test"})
	const evil = "rebind.evil.example"
	for _, svc := range []struct{ name, base, path, token string }{
		{"ingest", cs.ingest, "/v1/projects/wk_nope/settings", ""},
		{"audiences", "http://" + cs.st.AudiencesAddr(), "/v1/audiences/nope", cs.st.AudiencesToken()},
		{"console", cs.api, "/v1/sources", consoleTestToken},
	} {
		t.Run(svc.name, func(t *testing.T) {
			port := svc.base[strings.LastIndex(svc.base, ":"):]
			code, body := hostGet(t, svc.base+svc.path, evil+port, svc.token)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "misdirected_request") || !strings.Contains(body, evil) {
				t.Errorf("GET %s with Host %s: %d %s, want 421 naming the host", svc.path, evil, code, body)
			}
			for _, host := range []string{"127.0.0.1" + port, "localhost" + port} {
				if code, body := hostGet(t, svc.base+svc.path, host, svc.token); code == http.StatusMisdirectedRequest {
					t.Errorf("GET %s with Host %s: %d %s, want the service's answer", svc.path, host, code, body)
				}
			}
			for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
				if code, body := hostGet(t, svc.base+path, evil+port, ""); code != http.StatusOK {
					t.Errorf("GET %s with Host %s: %d %s, want 200 (probes and scrapers use any name)", path, evil, code, body)
				}
			}
		})
	}
	if code, body := hostGet(t, cs.api+"/v1/sources", "console.example.test", consoleTestToken); code != http.StatusOK {
		t.Errorf("console with Host console.example.test (CONSOLE_ALLOWED_HOSTS): %d %s, want 200", code, body)
	}
	if code, body := hostGet(t, cs.api+"/v1/sources", "x.console.example.test", consoleTestToken); code != http.StatusMisdirectedRequest || !strings.Contains(body, "CONSOLE_ALLOWED_HOSTS") {
		t.Errorf("console with Host x.console.example.test: %d %s, want 421 naming CONSOLE_ALLOWED_HOSTS", code, body)
	}
}

// TestProfileAPITokenGenerated: make run without AUDIENCES_TOKEN generates one per DATA_DIR
// (kept in DATA_DIR/audiences-token, mode 0600, the same at the next start), asks it of the
// profile API's callers and gives it to the console, whose profile lookup works.
func TestProfileAPITokenGenerated(t *testing.T) {
	dir := t.TempDir()
	cs := startConsoleStack(t, dir, nil)
	token := cs.st.AudiencesToken()
	if len(token) < 16 {
		t.Fatalf("generated token %q: want at least 16 characters", token)
	}
	info, err := os.Stat(filepath.Join(dir, "audiences-token"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("DATA_DIR/audiences-token: %v %v, want a file of mode 0600", info, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "audiences-token")); strings.TrimSpace(string(b)) != token {
		t.Errorf("DATA_DIR/audiences-token holds %q, want the token in use", b)
	}
	api := "http://" + cs.st.AudiencesAddr()
	if code, body := hostGet(t, api+"/v1/profiles/u1", "127.0.0.1", ""); code != http.StatusUnauthorized {
		t.Errorf("profile API without the token: %d %s, want 401", code, body)
	}
	if code, body := hostGet(t, api+"/v1/profiles/nobody", "127.0.0.1", token); code != http.StatusNotFound && code != http.StatusServiceUnavailable {
		t.Errorf("profile API with the generated token: %d %s, want 404 (or 503 while restoring)", code, body)
	}
	// The console's UI asks the profile API with the same token: signed in, its lookup of an
	// unknown user is a 404 (a refused token would be a 503 saying the service is unavailable).
	ui := signedInUI(t, cs)
	servicetest.Eventually(t, 30*time.Second, "the console's profile lookup of an unknown user to answer 404", func() bool {
		resp, err := ui.Get(cs.api + "/audiences/profile?userId=nobody")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusNotFound
	})
	cs.stop()

	again := startConsoleStack(t, dir, nil)
	if again.st.AudiencesToken() != token {
		t.Errorf("the second start on the same DATA_DIR uses %q, want %q", again.st.AudiencesToken(), token)
	}
}
