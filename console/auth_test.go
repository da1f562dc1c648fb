package console_test

import (
	"net/http"
	"testing"
)

// TestAuthentication: every API path answers 401 with the error body without the token or
// with a wrong one; the health and metrics paths need none.
func TestAuthentication(t *testing.T) {
	h := newHarness(t, nil)
	for _, path := range []string{"/v1/sources", "/v1/destinations/file-hooks", "/v1/config", "/v1/regulations", "/v1/nope"} {
		for _, token := range []string{"", "wrong-token-0123456789", testToken + "x"} {
			r := h.doAs(token, http.MethodGet, path, nil)
			expectError(t, r, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token: send Authorization: Bearer <CONSOLE_TOKEN>", "")
			if r.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without WWW-Authenticate", path)
			}
		}
	}
	// Basic auth with the token as the user name is not the bearer scheme.
	r := h.doAs("", http.MethodGet, "/v1/sources", nil, "Authorization", "Basic "+testToken)
	expect(t, r, http.StatusUnauthorized)
	expect(t, h.do(http.MethodGet, "/v1/sources", nil), http.StatusOK)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get("http://" + h.svc.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d without a token, want 200", path, resp.StatusCode)
		}
	}
	expectError(t, h.do(http.MethodGet, "/v1/nope", nil), http.StatusNotFound, "not_found", "no endpoint GET /v1/nope: see docs/console.md", "")
	expectError(t, h.do(http.MethodPut, "/v1/sources", nil), http.StatusMethodNotAllowed, "method_not_allowed", "PUT is not allowed on /v1/sources (allowed: GET, HEAD, POST)", "")
}
