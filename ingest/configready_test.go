package ingest

import (
	"net/http"
	"strings"
	"testing"
)

// TestNotReadyUntilConfigLoaded: before the config is read, a valid write key cannot be told
// from an unknown one. Ingest answered 401, which Segment's clients do not retry, so events were
// dropped at the client after every restart; now every tracking and settings request gets 503
// config_loading with Retry-After (clients retry it), and once the config is loaded the same
// request is accepted.
func TestNotReadyUntilConfigLoaded(t *testing.T) {
	ready := make(chan struct{})
	h := newHarnessWith(t, Deps{ConfigReady: ready})
	track := []byte(`{"type":"track","event":"Signed Up","userId":"u1","messageId":"m-ready-1"}`)
	for _, path := range []string{"/v1/track", "/v1/t", "/v1/batch"} {
		body := track
		if path == "/v1/batch" {
			body = []byte(`{"batch":[` + string(track) + `]}`)
		}
		status, resp := h.post(path, body, basic(testKey))
		if status != http.StatusServiceUnavailable || !strings.Contains(resp, `"config_loading"`) {
			t.Errorf("%s before the config is loaded: %d %s, want 503 config_loading", path, status, resp)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/track", strings.NewReader(string(track)))
	req.SetBasicAuth(testKey, "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Retry-After") == "" {
		t.Error("503 config_loading without Retry-After")
	}
	sresp, err := http.Get(h.srv.URL + "/v1/projects/" + testKey + "/settings")
	if err != nil {
		t.Fatal(err)
	}
	sresp.Body.Close()
	if sresp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("settings before the config is loaded: %d, want 503 (404 would tell analytics.js the key is unknown)", sresp.StatusCode)
	}

	close(ready)
	if status, resp := h.post("/v1/track", track, basic(testKey)); status != http.StatusOK {
		t.Errorf("after the config is loaded: %d %s, want 200", status, resp)
	}
	if status, _ := h.post("/v1/track", track, basic("wk_unknown")); status != http.StatusUnauthorized {
		t.Errorf("an unknown key after the config is loaded: %d, want 401", status)
	}
}
