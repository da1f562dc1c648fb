package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// settingsMaxAge is how long browsers and CDNs may keep a source's settings (the Cache-Control
// max-age of /v1/projects/{writeKey}/settings): a removed source stops being served that much
// later at most, and a page load costs one settings request per minute per visitor at most.
const settingsMaxAge = "60"

// cdnSettings is the body of /v1/projects/{writeKey}/settings: what analytics.js
// (@segment/analytics-next) loads from Segment's CDN before its first call. Only the Segment.io
// integration is served (events go to this ingest, and Tributary's destinations run on the
// server); no device-mode destination, middleware, edge function or remote plugin is, so
// analytics.js loads nothing else. Its metrics (Segment's own telemetry of the library) are off.
type cdnSettings struct {
	Integrations              map[string]segmentIO `json:"integrations"`
	Plan                      map[string]any       `json:"plan"`
	EdgeFunction              struct{}             `json:"edgeFunction"`
	AnalyticsNextEnabled      bool                 `json:"analyticsNextEnabled"`
	MiddlewareSettings        struct{}             `json:"middlewareSettings"`
	EnabledMiddleware         struct{}             `json:"enabledMiddleware"`
	Metrics                   metricsSettings      `json:"metrics"`
	LegacyVideoPluginsEnabled bool                 `json:"legacyVideoPluginsEnabled"`
	RemotePlugins             []struct{}           `json:"remotePlugins"`
}

// segmentIO is the settings of analytics.js's Segment.io plugin: where it posts
// (<protocol>://<apiHost>/t, /i, ...) and with which write key.
type segmentIO struct {
	APIKey                string              `json:"apiKey"`
	APIHost               string              `json:"apiHost"`
	Protocol              string              `json:"protocol"`
	UnbundledIntegrations []string            `json:"unbundledIntegrations"`
	AddBundledMetadata    bool                `json:"addBundledMetadata"`
	MaybeBundledConfigIDs map[string][]string `json:"maybeBundledConfigIds"`
}

type metricsSettings struct {
	SampleRate float64 `json:"sampleRate"`
	Host       string  `json:"host"`
}

// settingsHandler serves settings and counts its answers like the tracking endpoints'.
func (s *Service) settingsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := s.settings(w, r)
		s.metrics.requests.WithLabelValues("settings", strconv.Itoa(status)).Inc()
	})
}

// settings answers GET /v1/projects/{writeKey}/settings for a known write key, and 404 like
// Segment's CDN for any other (docs/ingest.md#websites). It returns the status it answered.
func (s *Service) settings(w http.ResponseWriter, r *http.Request) int {
	fail := func(e *apiError) int {
		writeError(w, e)
		return e.status
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		return fail(&apiError{http.StatusMethodNotAllowed, "method_not_allowed", "use GET"})
	}
	if s.refuseUntilConfigLoaded(w, r) {
		return http.StatusServiceUnavailable
	}
	key := r.PathValue("writeKey")
	if s.lookup(key, false, "") == nil {
		return fail(&apiError{http.StatusNotFound, "not_found", "no source has this write key"})
	}
	protocol, apiHost := s.apiBase(r)
	body, err := json.Marshal(cdnSettings{
		Integrations: map[string]segmentIO{"Segment.io": {
			APIKey: key, APIHost: apiHost, Protocol: protocol,
			UnbundledIntegrations: []string{}, AddBundledMetadata: true, MaybeBundledConfigIDs: map[string][]string{},
		}},
		Plan:                 map[string]any{"track": map[string]any{"__default": map[string]any{"enabled": true, "integrations": map[string]any{}}}},
		AnalyticsNextEnabled: true,
		Metrics:              metricsSettings{SampleRate: 0, Host: apiHost},
		RemotePlugins:        []struct{}{},
	})
	if err != nil { // cannot happen: every field is a plain value
		return fail(&apiError{http.StatusInternalServerError, "internal", err.Error()})
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	h := w.Header()
	h.Set("Cache-Control", "public, max-age="+settingsMaxAge)
	h.Set("ETag", etag)
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, etag) {
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
	return http.StatusOK
}

// etagMatches reports whether an If-None-Match header names etag (or is "*"); weak
// validators match their strong form, as RFC 9110 asks for If-None-Match.
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// apiBase returns where browsers post: the protocol ("http" or "https") and analytics.js's
// apiHost, host[:port][/prefix]/v1. INGEST_PUBLIC_URL decides when set; else the request's
// own: its Host, and https when it came over TLS or, through a trusted proxy, with
// X-Forwarded-Proto: https.
func (s *Service) apiBase(r *http.Request) (protocol, apiHost string) {
	if s.publicURL != nil {
		return s.publicURL.Scheme, s.publicURL.Host + strings.TrimSuffix(s.publicURL.Path, "/") + "/v1"
	}
	protocol = "http"
	if r.TLS != nil || (s.fromTrustedProxy(r) && strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")) {
		protocol = "https"
	}
	return protocol, r.Host + "/v1"
}

// fromTrustedProxy reports whether the request's TCP peer is one of INGEST_TRUSTED_PROXIES.
func (s *Service) fromTrustedProxy(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && s.trusted(ap.Addr())
}

// parsePublicURL reads INGEST_PUBLIC_URL: an absolute http or https URL, optionally with a path
// prefix, without query, fragment or user.
func parsePublicURL(s string) (*url.URL, bool) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, false
	}
	return u, true
}
