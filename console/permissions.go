package console

import (
	"fmt"
	"net/http"
	"strings"
)

// Permissions (docs/console.md#users-roles-and-tokens): the least role each API route and
// each page of the UI needs. Every route is decided here, by its mux pattern; a route missing
// from the table is refused to everyone (fail closed), and a test holds the table to the
// routes of service.go and the paths of console/openapi.yaml.

// rank orders the roles: a role may do what any role of lower rank may. An unknown role has
// rank 0 and may do nothing.
func (r Role) rank() int {
	switch r {
	case RoleAdmin:
		return 3
	case RoleEditor:
		return 2
	case RoleViewer:
		return 1
	}
	return 0
}

// allows reports whether role r may do what need may.
func (r Role) allows(need Role) bool { return r.rank() > 0 && r.rank() >= need.rank() }

// apiRoles is the least role of each API route.
var apiRoles = map[string]Role{
	// Sources: editors change them; rotating a write key is an admin's.
	"GET /v1/sources":                    RoleViewer,
	"POST /v1/sources":                   RoleEditor,
	"GET /v1/sources/{id}":               RoleViewer,
	"PATCH /v1/sources/{id}":             RoleEditor,
	"DELETE /v1/sources/{id}":            RoleEditor,
	"POST /v1/sources/{id}/rotate-key":   RoleAdmin,
	"GET /v1/sources/{id}/events/live":   RoleViewer,
	"GET /v1/sources/{id}/events/recent": RoleViewer,
	"GET /v1/sources/{id}/violations":    RoleViewer,

	// Destinations, their deliveries, DLQ replays and retries.
	"GET /v1/destinations":                            RoleViewer,
	"POST /v1/destinations":                           RoleEditor,
	"GET /v1/destinations/{id}":                       RoleViewer,
	"PATCH /v1/destinations/{id}":                     RoleEditor,
	"DELETE /v1/destinations/{id}":                    RoleEditor,
	"PUT /v1/destinations/{id}/sources/{sourceId}":    RoleEditor,
	"DELETE /v1/destinations/{id}/sources/{sourceId}": RoleEditor,
	"GET /v1/destinations/{id}/attempts":              RoleViewer,
	"GET /v1/destinations/{id}/stats":                 RoleViewer,
	"GET /v1/destinations/{id}/overview":              RoleViewer,
	"GET /v1/destinations/{id}/dlq":                   RoleViewer,
	"POST /v1/destinations/{id}/dlq/replay":           RoleEditor,
	"POST /v1/destinations/{id}/test":                 RoleEditor,
	"POST /v1/destinations/{id}/filters/test":         RoleEditor,
	"GET /v1/destinations/{id}/pending":               RoleViewer,
	"POST /v1/destinations/{id}/retry":                RoleEditor,
	"GET /v1/destinations/{id}/messages":              RoleViewer,
	"GET /v1/messages/{messageId}":                    RoleViewer,
	"GET /v1/messages/{messageId}/attempts":           RoleViewer,

	// Audiences, computed traits, tracking plans.
	"GET /v1/audiences":               RoleViewer,
	"POST /v1/audiences":              RoleEditor,
	"GET /v1/audiences/{id}":          RoleViewer,
	"PATCH /v1/audiences/{id}":        RoleEditor,
	"DELETE /v1/audiences/{id}":       RoleEditor,
	"GET /v1/computed-traits":         RoleViewer,
	"POST /v1/computed-traits":        RoleEditor,
	"GET /v1/computed-traits/{id}":    RoleViewer,
	"PATCH /v1/computed-traits/{id}":  RoleEditor,
	"DELETE /v1/computed-traits/{id}": RoleEditor,
	"GET /v1/tracking-plans":          RoleViewer,
	"POST /v1/tracking-plans":         RoleEditor,
	"GET /v1/tracking-plans/{id}":     RoleViewer,
	"PATCH /v1/tracking-plans/{id}":   RoleEditor,
	"DELETE /v1/tracking-plans/{id}":  RoleEditor,

	// The whole config: reading it is a read; importing it and re-encrypting it are an admin's.
	"GET /v1/openapi.yaml":      RoleViewer,
	"GET /v1/config":            RoleViewer,
	"PUT /v1/config":            RoleAdmin,
	"POST /v1/config/reencrypt": RoleAdmin,

	// Deletion requests (docs/console.md#delete-a-user): an admin's, reads included.
	"POST /v1/regulations":     RoleAdmin,
	"GET /v1/regulations":      RoleAdmin,
	"GET /v1/regulations/{id}": RoleAdmin,

	// Replays.
	"POST /v1/replays":             RoleEditor,
	"GET /v1/replays":              RoleViewer,
	"GET /v1/replays/{id}":         RoleViewer,
	"DELETE /v1/replays/{id}":      RoleEditor,
	"POST /v1/replays/{id}/cancel": RoleEditor,

	// Users and API tokens (users.go, tokens.go): an admin's.
	"GET /v1/users":            RoleAdmin,
	"GET /v1/users/{email}":    RoleAdmin,
	"PUT /v1/users/{email}":    RoleAdmin,
	"DELETE /v1/users/{email}": RoleAdmin,
	"GET /v1/tokens":           RoleAdmin,
	"POST /v1/tokens":          RoleAdmin,
	"DELETE /v1/tokens/{id}":   RoleAdmin,

	// The audit trail (docs/console.md#audit-trail): an admin's.
	"GET /v1/audit":        RoleAdmin,
	"GET /v1/audit/export": RoleAdmin,
}

// pageRoles is the least role of the UI's pages where it is not the rule of uiRole: the
// forms that create objects (editors), and what only an admin may do.
var pageRoles = map[string]Role{
	"GET /sources/new":               RoleEditor,
	"GET /destinations/new":          RoleEditor,
	"GET /destinations/new/webhooks": RoleEditor,
	"GET /audiences/new":             RoleEditor,
	"GET /traits/new":                RoleEditor,
	"POST /sources/{id}/rotate":      RoleAdmin,
	"GET /deletions":                 RoleAdmin,
	"POST /deletions":                RoleAdmin,
	"POST /settings/import":          RoleAdmin,
	"POST /settings/reencrypt":       RoleAdmin,
	"GET /audit":                     RoleAdmin,
	"GET /audit/export":              RoleAdmin,
	// The Team page (ui_team.go): users and API tokens, an admin's as their API is.
	"GET /team":                       RoleAdmin,
	"POST /team/users":                RoleAdmin,
	"POST /team/users/{email}/delete": RoleAdmin,
	"POST /team/tokens":               RoleAdmin,
	"POST /team/tokens/{id}/revoke":   RoleAdmin,
}

// uiRole is the least role of a page of the UI: pageRoles when it names the pattern, else a
// page (GET) is a read and a form (POST) a change.
func uiRole(pattern string) Role {
	if need, ok := pageRoles[pattern]; ok {
		return need
	}
	if strings.HasPrefix(pattern, http.MethodGet+" ") {
		return RoleViewer
	}
	return RoleEditor
}

// codeForbidden refuses a principal whose role may not do what it asked (403).
const codeForbidden = "forbidden"

// errForbidden is the refusal of p, which asked what need may do.
func errForbidden(p Principal, ok bool, need Role, what string) *apiError {
	who := "a request without a principal"
	if ok {
		who = fmt.Sprintf("%s has the role %q", p.Name, p.Role)
	}
	return &apiError{Status: http.StatusForbidden, Code: codeForbidden,
		Message: fmt.Sprintf("%s needs the role %q or higher, and %s (docs/console.md#users-roles-and-tokens)", what, need, who)}
}

// permitted wraps the API route of pattern: its principal's role must allow apiRoles[pattern];
// a route missing from the table is refused to everyone.
func (s *Service) permitted(pattern string, next http.Handler) http.Handler {
	need, decided := apiRoles[pattern]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := requestPrincipal(r)
		if !decided {
			s.logger.Error().Str("route", pattern).Msg("a route has no permission: refused (add it to console/permissions.go)")
			writeJSON(w, http.StatusForbidden, &apiError{Code: codeForbidden, Message: fmt.Sprintf("%s has no permission defined: refused to everyone", pattern)})
			return
		}
		if !ok || !p.Role.allows(need) {
			s.auditForbidden(r, pattern, need)
			writeJSON(w, http.StatusForbidden, errForbidden(p, ok, need, pattern))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// permittedPage wraps the UI page of pattern: a refusal renders the error page with 403.
func (u *ui) permittedPage(pattern string, next http.HandlerFunc) http.HandlerFunc {
	need := uiRole(pattern)
	return func(w http.ResponseWriter, r *http.Request) {
		if p, ok := requestPrincipal(r); !ok || !p.Role.allows(need) {
			u.s.auditForbidden(r, pattern, need)
			u.render(w, r, http.StatusForbidden, "error", page{Title: "Not allowed", Error: errForbidden(p, ok, need, "This page").Message})
			return
		}
		next(w, r)
	}
}
