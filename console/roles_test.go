package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/schemas"
)

// roleRank orders the roles as the console does (docs/console.md#users-roles-and-tokens).
var roleRank = map[string]int{"viewer": 1, "editor": 2, "admin": 3}

// newToken creates an API token with CONSOLE_TOKEN and returns its id and secret.
func newToken(t *testing.T, h *harness, name, role string, pii bool) (id, secret string) {
	t.Helper()
	r := h.do(http.MethodPost, "/v1/tokens", map[string]any{"name": name, "role": role, "pii": pii})
	expect(t, r, http.StatusCreated)
	d := r.Data(t)
	id, _ = d["id"].(string)
	secret, _ = d["secret"].(string)
	if id == "" || !regexp.MustCompile(`^trb_[A-Za-z0-9_-]{43}$`).MatchString(secret) {
		t.Fatalf("token answer %s", r.Body)
	}
	return id, secret
}

// TestPermissionTable: for every operation of openapi.yaml and each role, a request with an
// API token of that role is refused with 403 forbidden exactly when the operation's least role
// (the permission table, published as x-required-role) is above it, and never answered 401 or
// 500; every route the console registers and every operation of openapi.yaml has an entry in
// the table, and the table and openapi.yaml agree.
func TestPermissionTable(t *testing.T) {
	h := newHarness(t, nil)
	c := newOASClient(t, h)
	table := console.APIRoles()

	ops := oasOperations(c.doc)
	for _, p := range h.svc.APIPatterns() {
		if _, ok := table[p]; !ok {
			t.Errorf("route %s has no entry in the permission table (console/permissions.go)", p)
		}
	}
	if len(h.svc.APIPatterns()) != len(ops) {
		t.Errorf("%d routes registered, %d operations described", len(h.svc.APIPatterns()), len(ops))
	}

	tokens := map[string]string{}
	for role := range roleRank {
		_, tokens[role] = newToken(t, h, "table-"+role, role, false)
	}
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		need, ok := table[op]
		if !ok {
			t.Errorf("%s has no entry in the permission table", op)
			continue
		}
		if doc := c.doc.Paths.Find(path).GetOperation(method).Extensions["x-required-role"]; doc != need {
			t.Errorf("%s: openapi.yaml says x-required-role %v, the table %s", op, doc, need)
		}
		path = strings.NewReplacer("{id}", "no-such-id", "{sourceId}", "no-such-source", "{messageId}", "no-such-message", "{email}", "nobody@example.com").Replace(path)
		for role, secret := range tokens {
			r := c.call(0, oasRequest{method: method, path: path, token: secret, request: "any"})
			refused := r.Status == http.StatusForbidden && r.JSON(t)["code"] == "forbidden"
			switch want := roleRank[role] < roleRank[need]; {
			case r.Status == http.StatusUnauthorized || r.Status >= 500:
				t.Errorf("%s as %s: %d %s", op, role, r.Status, r.Body)
			case want && !refused:
				t.Errorf("%s as %s: %d, want 403 forbidden (needs %s): %s", op, role, r.Status, need, r.Body)
			case !want && refused:
				t.Errorf("%s as %s: refused, but %s may: %s", op, role, role, r.Body)
			case want && !strings.Contains(string(r.Body), `needs the role \"`+need+`\"`):
				t.Errorf("%s as %s: the refusal does not name the role needed: %s", op, role, r.Body)
			}
		}
	}
}

// TestAPITokens: an admin creates a token, whose secret is answered once; the token works with
// its role (a viewer reads, and is refused a change with 403); the list never shows a secret or
// its hash; no record of tributary.config holds the secret; once revoked the token is 401.
func TestAPITokens(t *testing.T) {
	h := newHarness(t, nil)
	id, secret := newToken(t, h, "dashboards", "viewer", false)

	expect(t, h.doAs(secret, http.MethodGet, "/v1/sources", nil), http.StatusOK)
	expectError(t, h.doAs(secret, http.MethodPost, "/v1/sources", map[string]any{"id": "app"}), http.StatusForbidden, "forbidden",
		`POST /v1/sources needs the role "editor" or higher, and dashboards has the role "viewer" (docs/console.md#users-roles-and-tokens)`, "")
	expect(t, h.doAs(secret, http.MethodGet, "/v1/tokens", nil), http.StatusForbidden)

	list := h.do(http.MethodGet, "/v1/tokens", nil)
	expect(t, list, http.StatusOK)
	if !strings.Contains(string(list.Body), `"id":"`+id+`"`) || !strings.Contains(string(list.Body), `"createdBy":"console-token"`) ||
		strings.Contains(string(list.Body), "sha256:") || strings.Contains(string(list.Body), "secret") {
		t.Errorf("token list %s", list.Body)
	}
	// An admin token may manage tokens; a principal without the PII grant cannot give it.
	_, admin := newToken(t, h, "ops", "admin", false)
	expectError(t, h.doAs(admin, http.MethodPost, "/v1/tokens", map[string]any{"name": "x", "role": "viewer", "pii": true}), http.StatusForbidden, "forbidden",
		"pii: only a principal with the PII grant may give it, and ops has none", "pii")
	expectError(t, h.do(http.MethodPost, "/v1/tokens", map[string]any{"name": "x", "role": "owner"}), http.StatusBadRequest, "invalid",
		`role: "owner" is not a role: admin, editor or viewer`, "role")
	expectError(t, h.do(http.MethodPost, "/v1/tokens", map[string]any{"role": "viewer"}), http.StatusBadRequest, "invalid",
		`name: required (who or what uses the token, e.g. "ci-deploy")`, "name")

	expect(t, h.doAs(admin, http.MethodDelete, "/v1/tokens/"+id, nil), http.StatusNoContent)
	r := h.doAs(secret, http.MethodGet, "/v1/sources", nil)
	expectError(t, r, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token: send Authorization: Bearer <CONSOLE_TOKEN>", "")
	expect(t, h.do(http.MethodDelete, "/v1/tokens/"+id, nil), http.StatusNotFound)
	// A token that was never issued, with the prefix.
	expect(t, h.doAs("trb_"+strings.Repeat("A", 43), http.MethodGet, "/v1/sources", nil), http.StatusUnauthorized)

	// At rest: the records hold the hash, never the secret; the answers only the creation's.
	recs := h.env.Reader(schemas.TopicConfig).WaitFor(4, 10*time.Second)
	hashed := false
	for _, rec := range recs {
		if strings.Contains(string(rec.Value), secret) || strings.Contains(string(rec.Value), admin) {
			t.Errorf("record %s holds a token's secret", rec.Key)
		}
		hashed = hashed || strings.Contains(string(rec.Value), schemas.HashAPITokenSecret(secret))
	}
	if !hashed {
		t.Error("no record holds the token's hash")
	}
	h.secretsNowhere(t, []string{secret, admin}, "POST /v1/tokens")
}

// TestUserList: the user list comes from the config (PUT /v1/config's console.users) and the
// users API, is exported by GET /v1/config, and resolves a signed-in person, whatever the case
// of their email, to their role and PII grant; a bad entry is refused with its line.
func TestUserList(t *testing.T) {
	h := newHarness(t, nil)
	file := baseConfig + `
console:
  users:
    - email: Ana@Example.com
      role: admin
      pii: true
    - email: bob@example.com
      role: viewer
`
	r := h.do(http.MethodPut, "/v1/config?takeOver=true", file, "Content-Type", "application/yaml")
	expect(t, r, http.StatusOK)
	if !strings.Contains(string(r.Body), `"key":"console-user/ana@example.com","action":"create"`) {
		t.Errorf("changes %s", r.Body)
	}
	for email, want := range map[string]struct {
		role string
		pii  bool
	}{"ana@example.com": {"admin", true}, "ANA@example.COM": {"admin", true}, "bob@example.com": {"viewer", false}} {
		name, role, pii, ok := h.svc.ListedUser(email)
		if !ok || role != want.role || pii != want.pii || name != strings.ToLower(email) {
			t.Errorf("ListedUser(%s) = %s %s %v %v, want %v", email, name, role, pii, ok, want)
		}
	}
	if _, _, _, ok := h.svc.ListedUser("carol@example.com"); ok {
		t.Error("an unlisted person resolved")
	}
	users := h.do(http.MethodGet, "/v1/users", nil)
	expect(t, users, http.StatusOK)
	if !strings.Contains(string(users.Body), `{"email":"ana@example.com","role":"admin","pii":true,"origin":"console"`) {
		t.Errorf("users %s", users.Body)
	}
	export := h.do(http.MethodGet, "/v1/config", nil)
	if !strings.Contains(string(export.Body), "console:\n  users:\n    - email: ana@example.com\n      role: admin\n      pii: true\n") {
		t.Errorf("export lacks the user list:\n%s", export.Body)
	}

	// The API changes it; a viewer token may not.
	expect(t, h.do(http.MethodPut, "/v1/users/bob@example.com", map[string]any{"role": "editor"}), http.StatusOK)
	if _, role, _, _ := h.svc.ListedUser("bob@example.com"); role != "editor" {
		t.Errorf("bob is %s after PUT", role)
	}
	expectError(t, h.do(http.MethodPut, "/v1/users/carol@example.com", map[string]any{"role": "owner"}), http.StatusBadRequest, "invalid",
		`role: "owner" is not a role: admin, editor or viewer`, "role")
	expectError(t, h.do(http.MethodPut, "/v1/users/carol", map[string]any{"role": "viewer"}), http.StatusBadRequest, "invalid",
		`email: "carol" is not an email address (name@example.com)`, "email")
	expectError(t, h.do(http.MethodPut, "/v1/users/carol@example.com", map[string]any{"role": "viewer", "admin": true}), http.StatusBadRequest, "invalid",
		`the body is not valid: unknown field "admin"`, "admin")
	expect(t, h.do(http.MethodDelete, "/v1/users/BOB@example.com", nil), http.StatusNoContent)
	if _, _, _, ok := h.svc.ListedUser("bob@example.com"); ok {
		t.Error("bob is still listed")
	}

	// A file's bad entry: refused with its line, nothing written.
	r = h.do(http.MethodPut, "/v1/config?takeOver=true", baseConfig+"\nconsole:\n  users:\n    - email: dan@example.com\n      role: viewer\n      roles: [admin]\n", "Content-Type", "application/yaml")
	expect(t, r, http.StatusBadRequest)
	if m := r.JSON(t)["message"].(string); !strings.Contains(m, `console.users[0]: unknown field "roles" (did you mean "role"?)`) || !strings.Contains(m, "line ") {
		t.Errorf("message %q", m)
	}
}

// TestUIViewerRole: a person listed as a viewer sees the pages but no form to create or change
// anything, and is refused (403, the error page) a form's page and a form posted anyway; an
// editor sees and may use them.
func TestUIViewerRole(t *testing.T) {
	h := newHarness(t, nil)
	expect(t, h.do(http.MethodPut, "/v1/users/vera@example.com", map[string]any{"role": "viewer"}), http.StatusCreated)
	expect(t, h.do(http.MethodPut, "/v1/users/ed@example.com", map[string]any{"role": "editor"}), http.StatusCreated)
	as := func(email string) *browser {
		b := h.newBrowser(t, false)
		name, value := h.svc.SessionCookie(email)
		u, _ := url.Parse(h.srv.URL)
		b.c.Jar.SetCookies(u, []*http.Cookie{{Name: name, Value: value, Path: "/"}})
		return b
	}
	viewer := as("vera@example.com")
	for _, path := range []string{"/sources", "/sources/web", "/destinations", "/destinations/file-hooks?tab=settings", "/audiences", "/settings"} {
		p := viewer.get(path)
		p.contains(t, http.StatusOK)
		for _, form := range []string{`href="/sources/new"`, `href="/destinations/new"`, `href="/audiences/new"`, `action="/sources/web"`, `/delete"`, `/rotate"`, `/enabled"`, `action="/settings/import"`, `id="edit-save"`, `href="/deletions"`} {
			if strings.Contains(p.Body, form) {
				t.Errorf("a viewer's page %s shows %s", path, form)
			}
		}
	}
	viewer.get("/sources/new").contains(t, http.StatusForbidden, "This page needs the role &#34;editor&#34; or higher, and vera@example.com has the role &#34;viewer&#34;")
	viewer.get("/deletions").contains(t, http.StatusForbidden)
	viewer.get("/sources") // its CSRF token
	viewer.post("/sources/new", url.Values{"id": {"viewers-app"}, "name": {"x"}}).contains(t, http.StatusForbidden, "needs the role")
	if _, ok := h.env.Store.Snapshot().SourceByID("viewers-app"); ok {
		t.Error("a viewer created a source")
	}

	editor := as("ed@example.com")
	p := editor.get("/sources")
	p.contains(t, http.StatusOK, `href="/sources/new"`)
	if strings.Contains(editor.get("/sources/web").Body, `/rotate"`) {
		t.Error("an editor is shown the key rotation (an admin's)")
	}
	editor.get("/sources/new").contains(t, http.StatusOK)
	if r := editor.post("/sources/new", url.Values{"id": {"editors-app"}, "name": {"x"}}); r.Status != http.StatusSeeOther {
		t.Fatalf("an editor's new source: %d %s", r.Status, r.Body)
	}
	// Removed from the list: the session no longer admits them.
	expect(t, h.do(http.MethodDelete, "/v1/users/ed@example.com", nil), http.StatusNoContent)
	if r := editor.get("/sources"); r.Status == http.StatusOK {
		t.Errorf("a removed user still sees the pages")
	}
}
