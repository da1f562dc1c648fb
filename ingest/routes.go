package ingest

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/tributary-cdp/tributary/schemas"
)

// route is one endpoint of the tracking API under /v1/: its long path, the short path
// analytics.js and the mobile libraries post to ("" for none), and the call type it implies
// ("" for a batch, whose messages name their own).
type route struct {
	path, short, callType string
}

// routes are the tracking endpoints. Each answers at /v1/<path> and /v1/<short>, with and
// without a trailing slash (analytics-java posts to /v1/import/).
var routes = []route{
	{schemas.TypeIdentify, "i", schemas.TypeIdentify},
	{schemas.TypeTrack, "t", schemas.TypeTrack},
	{schemas.TypePage, "p", schemas.TypePage},
	{schemas.TypeScreen, "s", schemas.TypeScreen},
	{schemas.TypeGroup, "g", schemas.TypeGroup},
	{schemas.TypeAlias, "a", schemas.TypeAlias},
	{"batch", "b", ""},
	{"import", "", ""},
}

// Handler returns the tracking API (docs/ingest.md#endpoints): the endpoints of routes, the
// browser settings at /v1/projects/{writeKey}/settings, CORS on all of them, and a JSON 404 for
// every other path.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	handle := func(path, name string, h http.Handler) {
		h = s.cors(name, h)
		mux.Handle(path, h)
		mux.Handle(path+"/{$}", h)
	}
	for _, rt := range routes {
		h := s.endpoint(rt.path, rt.callType == "")
		handle("/v1/"+rt.path, rt.path, h)
		if rt.short != "" {
			handle("/v1/"+rt.short, rt.path, h)
		}
	}
	handle("/v1/projects/{writeKey}/settings", "settings", s.settingsHandler())
	mux.Handle("/", http.HandlerFunc(s.notFound))
	return mux
}

// notFound answers every unknown path with the JSON error body clients parse; they are counted
// under endpoint "unknown" (a path is no label: there are too many).
func (s *Service) notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, &apiError{http.StatusNotFound, "not_found", "no endpoint at " + r.URL.Path + " (see docs/ingest.md#endpoints)"})
	s.metrics.requests.WithLabelValues("unknown", "404").Inc()
}

// The CORS answers (docs/ingest.md#cors). Authorization carries the write key (analytics.js
// 1.84 and later), X-Retry-Count its retry count; Retry-After is exposed so a browser client
// can honour a 503's delay.
const (
	corsAllowMethods  = "GET, POST, OPTIONS"
	corsAllowHeaders  = "Authorization, Content-Type, Content-Encoding, X-Retry-Count, traceparent, tracestate"
	corsExposeHeaders = "Retry-After"
	corsMaxAge        = "86400"
)

// cors lets browsers on the allowed origins call h (endpoint name, for the metrics): it answers
// preflights (OPTIONS) itself and adds Access-Control-Allow-Origin to h's answers. With no
// INGEST_ALLOWED_ORIGINS every origin is allowed as "*", without credentials (the write key
// travels in the body or the Authorization header, never in a cookie). With a list, an allowed
// origin is echoed (with Vary: Origin) and a request from any other origin is refused 403: a
// request without Origin (a server-side library) is not a browser's and is served.
func (s *Service) cors(name string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		hdr := w.Header()
		if len(s.cfg.AllowedOrigins) > 0 {
			hdr.Add("Vary", "Origin")
		}
		if origin != "" {
			allow, ok := s.allowOrigin(origin)
			if !ok {
				writeError(w, &apiError{http.StatusForbidden, "origin_not_allowed", "requests from this origin are not allowed (INGEST_ALLOWED_ORIGINS)"})
				s.metrics.requests.WithLabelValues(name, "403").Inc()
				return
			}
			hdr.Set("Access-Control-Allow-Origin", allow)
			hdr.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		if r.Method == http.MethodOptions {
			hdr.Set("Access-Control-Allow-Methods", corsAllowMethods)
			hdr.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			hdr.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// allowOrigin returns the Access-Control-Allow-Origin for origin, and whether it is allowed.
func (s *Service) allowOrigin(origin string) (string, bool) {
	if len(s.cfg.AllowedOrigins) == 0 {
		return "*", true
	}
	for _, pattern := range s.cfg.AllowedOrigins {
		if originMatches(pattern, origin) {
			return origin, true
		}
	}
	return "", false
}

// originMatches reports whether origin ("https://app.example.com") is allowed by pattern: "*",
// an exact origin, or a wildcard for the subdomains of a host ("https://*.example.com", which
// does not match example.com itself). Scheme and host compare case-insensitively.
func originMatches(pattern, origin string) bool {
	if pattern == "*" {
		return true
	}
	pattern, origin = strings.ToLower(pattern), strings.ToLower(origin)
	if pattern == origin {
		return true
	}
	scheme, host, ok := strings.Cut(pattern, "://*.")
	if !ok {
		return false
	}
	oScheme, oHost, ok := strings.Cut(origin, "://")
	return ok && oScheme == scheme && strings.HasSuffix(oHost, "."+host) && len(oHost) > len(host)+1
}

// validOrigin checks one INGEST_ALLOWED_ORIGINS entry: "*", or scheme://host[:port] with no
// path, where the host may start with "*." for its subdomains.
func validOrigin(o string) bool {
	if o == "*" {
		return true
	}
	u, err := url.Parse(strings.Replace(o, "://*.", "://", 1))
	return err == nil && u.Scheme != "" && u.Host != "" && u.Path == "" && u.RawQuery == "" && u.User == nil && u.Fragment == ""
}
