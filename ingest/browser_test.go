package ingest

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSettingsForAnalyticsJS: /v1/projects/{writeKey}/settings answers what analytics.js loads
// from Segment's CDN, pointing it back at this ingest; unknown keys are 404.
func TestSettingsForAnalyticsJS(t *testing.T) {
	type segmentIOSettings struct {
		APIKey, APIHost, Protocol string
	}
	decode := func(t *testing.T, body string) (segmentIOSettings, map[string]any) {
		t.Helper()
		var s struct {
			Integrations map[string]segmentIOSettings
			Metrics      map[string]any
		}
		var all map[string]any
		if err := json.Unmarshal([]byte(body), &s); err != nil || json.Unmarshal([]byte(body), &all) != nil {
			t.Fatalf("settings %q: %v", body, err)
		}
		if len(s.Integrations) != 1 {
			t.Errorf("integrations %v: want only Segment.io", s.Integrations)
		}
		if s.Metrics["sampleRate"] != float64(0) {
			t.Errorf("metrics %v: want sampleRate 0", s.Metrics)
		}
		return s.Integrations["Segment.io"], all
	}
	settingsURL := "/v1/projects/" + testKey + "/settings"

	t.Run("the request's own host", func(t *testing.T) {
		h := newHarness(t)
		for _, path := range []string{settingsURL, settingsURL + "/"} {
			resp := do(t, http.MethodGet, h.srv.URL+path, nil)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Cache-Control") != "public, max-age=60" || resp.Header.Get("ETag") == "" {
				t.Fatalf("%s: %d %v %s", path, resp.StatusCode, resp.Header, resp.body)
			}
			seg, all := decode(t, resp.body)
			host := strings.TrimPrefix(h.srv.URL, "http://")
			if seg != (segmentIOSettings{testKey, host + "/v1", "http"}) {
				t.Errorf("%s: Segment.io %+v", path, seg)
			}
			for _, k := range []string{"plan", "edgeFunction", "middlewareSettings", "enabledMiddleware", "remotePlugins"} {
				if _, ok := all[k]; !ok {
					t.Errorf("%s: no %q", path, k)
				}
			}
		}
	})

	t.Run("caching", func(t *testing.T) {
		h := newHarness(t)
		first := do(t, http.MethodGet, h.srv.URL+settingsURL, nil)
		etag := first.Header.Get("ETag")
		for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
			again := do(t, http.MethodGet, h.srv.URL+settingsURL, map[string]string{"If-None-Match": inm})
			if again.StatusCode != 304 || again.body != "" || again.Header.Get("ETag") != etag {
				t.Errorf("If-None-Match %s: %d %q", inm, again.StatusCode, again.body)
			}
		}
		if other := do(t, http.MethodGet, h.srv.URL+settingsURL, map[string]string{"If-None-Match": `"other"`}); other.StatusCode != 200 || other.body != first.body {
			t.Errorf("another etag: %d", other.StatusCode)
		}
		if head := do(t, http.MethodHead, h.srv.URL+settingsURL, nil); head.StatusCode != 200 || head.body != "" || head.Header.Get("Content-Length") != first.Header.Get("Content-Length") {
			t.Errorf("HEAD: %d %v", head.StatusCode, head.Header)
		}
	})

	t.Run("INGEST_PUBLIC_URL", func(t *testing.T) {
		for public, want := range map[string]segmentIOSettings{
			"https://track.example.com":           {testKey, "track.example.com/v1", "https"},
			"https://example.com:8443/tributary/": {testKey, "example.com:8443/tributary/v1", "https"},
			"http://10.0.0.5:8080":                {testKey, "10.0.0.5:8080/v1", "http"},
		} {
			h := newHarness(t, func(c *Config) { c.PublicURL = public })
			seg, _ := decode(t, do(t, http.MethodGet, h.srv.URL+settingsURL, nil).body)
			if seg != want {
				t.Errorf("%s: %+v, want %+v", public, seg, want)
			}
		}
	})

	t.Run("https behind a trusted proxy", func(t *testing.T) {
		trusting := newHarness(t, func(c *Config) { c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
		seg, _ := decode(t, do(t, http.MethodGet, trusting.srv.URL+settingsURL, map[string]string{"X-Forwarded-Proto": "https"}).body)
		if seg.Protocol != "https" {
			t.Errorf("trusted proxy: protocol %q", seg.Protocol)
		}
		untrusted := newHarness(t)
		seg, _ = decode(t, do(t, http.MethodGet, untrusted.srv.URL+settingsURL, map[string]string{"X-Forwarded-Proto": "https"}).body)
		if seg.Protocol != "http" {
			t.Errorf("untrusted peer: protocol %q", seg.Protocol)
		}
	})

	t.Run("errors", func(t *testing.T) {
		h := newHarness(t)
		for _, tc := range []struct {
			method, path string
			status       int
			want         string
		}{
			{http.MethodGet, "/v1/projects/wk_unknown/settings", 404, `{"code":"not_found","message":"no source has this write key"}`},
			{http.MethodPost, settingsURL, 405, `{"code":"method_not_allowed","message":"use GET"}`},
		} {
			resp := do(t, tc.method, h.srv.URL+tc.path, nil)
			if resp.StatusCode != tc.status || resp.body != tc.want {
				t.Errorf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, resp.body)
			}
		}
	})
}

// TestCORS: every origin by default, without credentials; INGEST_ALLOWED_ORIGINS narrows it
// and refuses the others; preflights allow what analytics.js sends.
func TestCORS(t *testing.T) {
	preflight := map[string]string{"Origin": "https://shop.example.com", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type,x-retry-count"}
	checkPreflight := func(t *testing.T, resp answer, origin string) {
		t.Helper()
		h := resp.Header
		if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != origin || h.Get("Access-Control-Max-Age") != "86400" || h.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("preflight: %d %v", resp.StatusCode, h)
		}
		for _, name := range []string{"Authorization", "Content-Type", "X-Retry-Count", "Content-Encoding", "traceparent", "tracestate"} {
			if !strings.Contains(h.Get("Access-Control-Allow-Headers"), name) {
				t.Errorf("preflight allows %q, not %s", h.Get("Access-Control-Allow-Headers"), name)
			}
		}
		if !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
			t.Errorf("methods %q", h.Get("Access-Control-Allow-Methods"))
		}
	}

	t.Run("every origin by default", func(t *testing.T) {
		h := newHarness(t)
		for _, path := range []string{"/v1/t", "/v1/track/", "/v1/b", "/v1/import/", "/v1/projects/" + testKey + "/settings"} {
			checkPreflight(t, do(t, http.MethodOptions, h.srv.URL+path, preflight), "*")
		}
		status, _ := h.post("/v1/t", []byte(`{"userId":"u","event":"E"}`), map[string]string{"Origin": "https://anywhere.example", "Authorization": basic(testKey)["Authorization"]})
		if status != 200 {
			t.Errorf("post: %d", status)
		}
		resp := do(t, http.MethodGet, h.srv.URL+"/v1/projects/"+testKey+"/settings", map[string]string{"Origin": "https://anywhere.example"})
		if resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Access-Control-Allow-Credentials") != "" || resp.Header.Get("Access-Control-Expose-Headers") != "Retry-After" {
			t.Errorf("settings: %v", resp.Header)
		}
		if resp := do(t, http.MethodOptions, h.srv.URL+"/v1/nope", preflight); resp.StatusCode != 404 {
			t.Errorf("preflight of an unknown path: %d", resp.StatusCode)
		}
	})

	t.Run("INGEST_ALLOWED_ORIGINS", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.AllowedOrigins = []string{"https://app.example.com", "https://*.shop.example"} })
		for origin, ok := range map[string]bool{
			"https://app.example.com":      true,
			"HTTPS://APP.EXAMPLE.COM":      true,
			"https://eu.shop.example":      true,
			"https://a.b.shop.example":     true,
			"https://shop.example":         false,
			"http://eu.shop.example":       false,
			"https://evil.example.com":     false,
			"https://app.example.com.evil": false,
			"null":                         false,
		} {
			pre := map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST"}
			resp := do(t, http.MethodOptions, h.srv.URL+"/v1/t", pre)
			if ok {
				checkPreflight(t, resp, origin)
			} else if resp.StatusCode != 403 || resp.body != `{"code":"origin_not_allowed","message":"requests from this origin are not allowed (INGEST_ALLOWED_ORIGINS)"}` || resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("preflight from %s: %d %s", origin, resp.StatusCode, resp.body)
			}
			if resp.Header.Get("Vary") != "Origin" {
				t.Errorf("%s: Vary %q", origin, resp.Header.Get("Vary"))
			}
			status, body := h.post("/v1/t", []byte(`{"userId":"u","event":"E"}`), map[string]string{"Origin": origin, "Authorization": basic(testKey)["Authorization"]})
			if (status == 200) != ok {
				t.Errorf("post from %s: %d %s", origin, status, body)
			}
		}
		// 5 refused origins × (a preflight and a POST), each refusal counted.
		if got := testutil.ToFloat64(h.svc.metrics.requests.WithLabelValues("track", "403")); got != 10 {
			t.Errorf("counted %v refusals of track, want 10", got)
		}
		// Server-side libraries send no Origin: always served.
		if status, body := h.post("/v1/t", []byte(`{"userId":"u","event":"E"}`), basic(testKey)); status != 200 {
			t.Errorf("no Origin: %d %s", status, body)
		}
	})
}
