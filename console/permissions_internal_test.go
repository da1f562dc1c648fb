package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPermittedFailsClosed: a route missing from the permission table is refused to everyone,
// CONSOLE_TOKEN's admin included; a request without a principal is refused; a role below the
// table's gets 403 with the forbidden body naming both roles; the role needed or a higher one
// passes.
func TestPermittedFailsClosed(t *testing.T) {
	s := &Service{}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	call := func(pattern string, p *Principal) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/x", nil)
		if p != nil {
			r = r.WithContext(withPrincipal(r.Context(), *p))
		}
		w := httptest.NewRecorder()
		s.permitted(pattern, ok).ServeHTTP(w, r)
		return w
	}
	viewer := Principal{Name: "ana@example.com", Role: RoleViewer}
	editor := Principal{Name: "ci", Role: RoleEditor}
	odd := Principal{Name: "old", Role: "owner"}
	for _, tt := range []struct {
		pattern string
		p       *Principal
		status  int
		message string
	}{
		{"POST /v1/not-in-the-table", &tokenPrincipal, 403, "POST /v1/not-in-the-table has no permission defined: refused to everyone"},
		{"POST /v1/sources", nil, 403, `POST /v1/sources needs the role "editor" or higher, and a request without a principal`},
		{"POST /v1/sources", &viewer, 403, `POST /v1/sources needs the role "editor" or higher, and ana@example.com has the role "viewer" (docs/console.md#users-roles-and-tokens)`},
		{"POST /v1/sources", &odd, 403, `POST /v1/sources needs the role "editor" or higher, and old has the role "owner"`},
		{"GET /v1/sources", &odd, 403, ""},
		{"POST /v1/sources", &editor, 204, ""},
		{"GET /v1/sources", &viewer, 204, ""},
		{"PUT /v1/config", &editor, 403, `PUT /v1/config needs the role "admin" or higher, and ci has the role "editor"`},
		{"PUT /v1/config", &tokenPrincipal, 204, ""},
	} {
		w := call(tt.pattern, tt.p)
		if w.Code != tt.status {
			t.Errorf("%s as %v: status %d, want %d: %s", tt.pattern, tt.p, w.Code, tt.status, w.Body)
			continue
		}
		if tt.status != 403 {
			continue
		}
		var e apiError
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Code != codeForbidden || !strings.HasPrefix(e.Message, tt.message) {
			t.Errorf("%s as %v: body %s, want code forbidden and a message starting %q", tt.pattern, tt.p, w.Body, tt.message)
		}
	}
}

// TestUIRole: a page is a read, a form a change, but for the pages the table names.
func TestUIRole(t *testing.T) {
	for pattern, want := range map[string]Role{
		"GET /sources":                    RoleViewer,
		"GET /sources/new":                RoleEditor,
		"POST /sources/new":               RoleEditor,
		"POST /sources/{id}/rotate":       RoleAdmin,
		"POST /settings/import":           RoleAdmin,
		"GET /deletions":                  RoleAdmin,
		"POST /audiences/preview":         RoleEditor,
		"GET /team":                       RoleAdmin,
		"POST /team/users":                RoleAdmin,
		"POST /team/users/{email}/delete": RoleAdmin,
		"POST /team/tokens":               RoleAdmin,
		"POST /team/tokens/{id}/revoke":   RoleAdmin,
	} {
		if got := uiRole(pattern); got != want {
			t.Errorf("uiRole(%q) = %s, want %s", pattern, got, want)
		}
	}
}
