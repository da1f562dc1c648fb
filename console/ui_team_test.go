package console_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/console/internal/oidctest"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// personBrowser is a browser signed in as the listed person email (a session as single sign-on
// makes it), following no redirect.
func personBrowser(t *testing.T, h *harness, email string) *browser {
	t.Helper()
	b := h.newBrowser(t, false)
	name, value := h.svc.SessionCookie(email)
	u, _ := url.Parse(h.srv.URL)
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: name, Value: value, Path: "/"}})
	return b
}

// TestUITeamUsers: an admin adds, changes and removes a user through the Team page's forms; each
// change is in GET /v1/users and on the audit trail as the users API records it; bad input is
// said next to its field, and a form without its CSRF token changes nothing.
func TestUITeamUsers(t *testing.T) {
	h := newHarness(t, nil)
	b := h.signIn(t)
	b.get("/").contains(t, http.StatusOK, `<a href="/team" >Team</a>`)
	b.get("/team").contains(t, http.StatusOK, "<h1>Team</h1>", "Signed in as <strong>console-token</strong>, role <strong>admin</strong>, with PII access",
		"admitted by the console token (CONSOLE_TOKEN)", "No user is listed", "No API token yet", `<a href="/team" aria-current="page">Team</a>`)

	// Without the CSRF token: refused, nothing written.
	b.post("/team/users", url.Values{"email": {"mallory@example.com"}, "role": {"admin"}, "_csrf": {""}}).contains(t, http.StatusForbidden, "CSRF")
	if _, _, _, ok := h.svc.ListedUser("mallory@example.com"); ok {
		t.Fatal("a form without its CSRF token added a user")
	}

	add := b.post("/team/users", url.Values{"email": {"Ana@Example.com"}, "role": {"editor"}, "pii": {"true"}})
	if add.Status != http.StatusSeeOther || !strings.HasPrefix(add.Location, "/team?done=User+ana%40example.com+added.") {
		t.Fatalf("adding a user: %d %s %s", add.Status, add.Location, add.Body)
	}
	b.get(add.Location).contains(t, http.StatusOK, "User ana@example.com added.", "<td>ana@example.com</td>", "<td>editor</td>", "the console",
		`action="/team/users/ana@example.com/delete"`)
	users := h.do(http.MethodGet, "/v1/users", nil)
	if !strings.Contains(string(users.Body), `{"email":"ana@example.com","role":"editor","pii":true,"origin":"console"`) {
		t.Fatalf("users after the add: %s", users.Body)
	}

	// The "Change" link fills the form; saving it changes the user.
	b.get("/team?user=ana@example.com").contains(t, http.StatusOK, `<details class="more" id="user-form" open>`, "Change ana@example.com", `value="ana@example.com"`,
		`<option value="editor" selected>editor</option>`, `name="pii" value="true" checked`)
	if p := b.post("/team/users", url.Values{"email": {"ana@example.com"}, "role": {"viewer"}}); p.Status != http.StatusSeeOther || !strings.Contains(p.Location, "changed") {
		t.Fatalf("changing a user: %d %s %s", p.Status, p.Location, p.Body)
	}
	users = h.do(http.MethodGet, "/v1/users", nil)
	if !strings.Contains(string(users.Body), `{"email":"ana@example.com","role":"viewer","pii":false,"origin":"console"`) {
		t.Fatalf("users after the change: %s", users.Body)
	}

	// Bad input: the API's own messages, next to their field; the form keeps what was typed.
	b.post("/team/users", url.Values{"email": {"carol"}, "role": {"viewer"}}).contains(t, http.StatusBadRequest,
		`<p id="user-email-error" class="field-error">&#34;carol&#34; is not an email address (name@example.com)</p>`, `value="carol"`)
	b.post("/team/users", url.Values{"email": {"carol@example.com"}, "role": {"owner"}}).contains(t, http.StatusBadRequest,
		`<p id="user-role-error" class="field-error">&#34;owner&#34; is not a role: admin, editor or viewer</p>`)

	rm := b.post("/team/users/ana@example.com/delete", nil)
	if rm.Status != http.StatusSeeOther || !strings.Contains(rm.Location, "removed") {
		t.Fatalf("removing a user: %d %s %s", rm.Status, rm.Location, rm.Body)
	}
	if users = h.do(http.MethodGet, "/v1/users", nil); strings.TrimSpace(string(users.Body)) != `{"data":[]}` {
		t.Fatalf("users after the removal: %s", users.Body)
	}
	b.post("/team/users/ana@example.com/delete", nil).contains(t, http.StatusNotFound, "no user &#34;ana@example.com&#34;")

	// The audit trail: the records the users API writes, by the signed-in principal.
	got, _ := auditRecords(t, h, 6) // the config file's two, the sign-in, the three changes
	var rows []string
	for _, g := range got {
		if strings.HasPrefix(g.Action, "user.") {
			rows = append(rows, g.Action+" "+g.Object.Kind+"/"+g.Object.ID+" by "+g.Actor.Name+" ("+g.Actor.Kind+", "+g.Actor.Role+") "+g.Result.Status)
		}
	}
	want := []string{
		"user.create user/ana@example.com by console-token (console-token, admin) ok",
		"user.update user/ana@example.com by console-token (console-token, admin) ok",
		"user.delete user/ana@example.com by console-token (console-token, admin) ok",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit records:\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}

// TestUITeamTokens: an admin creates an API token with the Team page's form and sees its secret
// on the answer only (the page seen again does not show it, nor its hash); the secret works as a
// bearer token; revoked from the page, it is refused (401); a form without its CSRF token
// creates and revokes nothing; both changes are on the audit trail.
func TestUITeamTokens(t *testing.T) {
	h := newHarness(t, nil)
	b := h.signIn(t)
	b.get("/team")
	b.post("/team/tokens", url.Values{"name": {"forged"}, "role": {"admin"}, "_csrf": {"forged"}}).contains(t, http.StatusForbidden, "CSRF")
	if len(h.env.Store.Snapshot().APITokens()) != 0 {
		t.Fatal("a form without its CSRF token created a token")
	}
	b.post("/team/tokens", url.Values{"name": {""}, "role": {"viewer"}}).contains(t, http.StatusBadRequest,
		`<p id="token-name-error" class="field-error">required (who or what uses the token, e.g. &#34;ci-deploy&#34;)</p>`)

	made := b.post("/team/tokens", url.Values{"name": {"ci-deploy"}, "role": {"editor"}})
	made.contains(t, http.StatusOK, "API token ci-deploy created.", "Copy the secret now: it is shown this once.", `data-copy="token-secret"`,
		"Role <strong>editor</strong>, without PII access", "/v1/sources")
	if cc := made.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the secret's page: Cache-Control %q", cc)
	}
	m := regexp.MustCompile(`<code id="token-secret">(trb_[A-Za-z0-9_-]{43})</code>`).FindStringSubmatch(made.Body)
	if m == nil {
		t.Fatalf("no secret on the answer: %s", made.Body)
	}
	secret := m[1]
	toks := h.env.Store.Snapshot().APITokens()
	if len(toks) != 1 || toks[0].Name != "ci-deploy" || toks[0].Role != "editor" || toks[0].CreatedBy != "console-token" {
		t.Fatalf("tokens: %+v", toks)
	}
	id := toks[0].ID

	again := b.get("/team")
	again.contains(t, http.StatusOK, "<td>ci-deploy</td>", "<code>"+id+"</code>", "<td>console-token</td>", `action="/team/tokens/`+id+`/revoke"`, `data-confirm="Revoke the API token ci-deploy?`)
	if strings.Contains(again.Body, secret) || strings.Contains(again.Body, schemas.HashAPITokenSecret(secret)) {
		t.Fatal("the Team page seen again shows the secret or its hash")
	}
	expect(t, h.doAs(secret, http.MethodGet, "/v1/sources", nil), http.StatusOK)

	b.post("/team/tokens/"+id+"/revoke", url.Values{"_csrf": {""}}).contains(t, http.StatusForbidden, "CSRF")
	expect(t, h.doAs(secret, http.MethodGet, "/v1/sources", nil), http.StatusOK)
	rv := b.post("/team/tokens/"+id+"/revoke", nil)
	if rv.Status != http.StatusSeeOther || !strings.Contains(rv.Location, "revoked") {
		t.Fatalf("revoking: %d %s %s", rv.Status, rv.Location, rv.Body)
	}
	expect(t, h.doAs(secret, http.MethodGet, "/v1/sources", nil), http.StatusUnauthorized)
	b.get(rv.Location).contains(t, http.StatusOK, "API token ci-deploy ("+id+") revoked", "No API token yet")
	b.post("/team/tokens/"+id+"/revoke", nil).contains(t, http.StatusNotFound, "no API token")

	got, raw := auditRecords(t, h, 5) // the config file's two, the sign-in, the create, the revocation
	var rows []string
	for _, g := range got {
		if strings.HasPrefix(g.Action, "token.") {
			rows = append(rows, g.Action+" "+g.Object.Kind+"/"+g.Object.ID+" by "+g.Actor.Name+" ("+g.Actor.Kind+") "+g.Result.Status)
		}
	}
	want := "token.create token/" + id + " by console-token (console-token) ok\ntoken.revoke token/" + id + " by console-token (console-token) ok"
	if strings.Join(rows, "\n") != want {
		t.Errorf("audit records:\n%s\nwant\n%s", strings.Join(rows, "\n"), want)
	}
	if strings.Contains(string(raw), secret) {
		t.Error("the audit trail holds the token's secret")
	}
}

// TestUITeamRoles: the Team page and its forms are an admin's: an editor and a viewer get the
// error page (403) and no link to it, and a form posted anyway changes nothing; a listed admin
// sees who they are and what admits them.
func TestUITeamRoles(t *testing.T) {
	h := newHarness(t, nil)
	for email, role := range map[string]string{"ed@example.com": "editor", "vera@example.com": "viewer", "ada@example.com": "admin"} {
		expect(t, h.do(http.MethodPut, "/v1/users/"+email, map[string]any{"role": role}), http.StatusCreated)
	}
	for _, email := range []string{"ed@example.com", "vera@example.com"} {
		b := personBrowser(t, h, email)
		if p := b.get("/"); strings.Contains(p.Body, `href="/team"`) {
			t.Errorf("%s is shown the Team link", email)
		}
		b.get("/team").contains(t, http.StatusForbidden, "This page needs the role &#34;admin&#34; or higher, and "+email)
		b.post("/team/users", url.Values{"email": {email}, "role": {"admin"}}).contains(t, http.StatusForbidden, "needs the role &#34;admin&#34;")
		b.post("/team/tokens", url.Values{"name": {"mine"}, "role": {"admin"}}).contains(t, http.StatusForbidden, "needs the role &#34;admin&#34;")
		b.post("/team/users/ada@example.com/delete", nil).contains(t, http.StatusForbidden, "needs the role &#34;admin&#34;")
	}
	if _, role, _, _ := h.svc.ListedUser("ed@example.com"); role != "editor" {
		t.Errorf("an editor's form made them %s", role)
	}
	if _, _, _, ok := h.svc.ListedUser("ada@example.com"); !ok {
		t.Error("an editor's form removed a user")
	}
	if n := len(h.env.Store.Snapshot().APITokens()); n != 0 {
		t.Errorf("%d tokens created by refused forms", n)
	}
	admin := personBrowser(t, h, "ada@example.com")
	admin.get("/team").contains(t, http.StatusOK, "Signed in as <strong>ada@example.com</strong>, role <strong>admin</strong>, without PII access",
		"admitted by the user list below")
	if p := admin.get("/team"); strings.Contains(p.Body[strings.Index(p.Body, `id="token-form"`):], `name="pii"`) {
		t.Error("a principal without the PII grant is offered to give it to a token")
	}
}

// TestUITeamFileAndSingleSignOn: a user a config file lists shows that file, has no removal
// button, and changes only when the form takes it over (as ?takeOver=true does on the API); with
// single sign-on, the page shows each role's groups and the PII groups, and a person admitted by
// their groups sees so.
func TestUITeamFileAndSingleSignOn(t *testing.T) {
	h, p := newOIDCHarness(t, nil)
	path := filepath.Join(t.TempDir(), "team.yaml")
	if err := os.WriteFile(path, []byte("console:\n  users:\n    - email: fay@example.com\n      role: viewer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := platform.ApplyConfigFile(h.env.Ctx, h.env.Kafka, schemas.TopicConfig, path, platform.ApplyOptions{}, h.env.Logger); err != nil {
		t.Fatal(err)
	}
	servicetest.Eventually(t, 5*time.Second, "the file's user listed", func() bool {
		_, _, _, ok := h.svc.ListedUser("fay@example.com")
		return ok
	})

	p.SetUser(oidctest.User{Subject: "u9", Email: "root@example.com", EmailVerified: &verified, Groups: []string{"platform-admins"}})
	b, landed := oidcSignIn(t, h, "/team")
	if landed.Status != http.StatusOK {
		t.Fatalf("single sign-on: %d %s", landed.Status, landed.Body)
	}
	page := b.get("/team")
	page.contains(t, http.StatusOK, "Signed in as <strong>root@example.com</strong>, role <strong>admin</strong>, without PII access",
		"admitted by your groups at the identity provider (CONSOLE_OIDC_ROLES)",
		"<td>fay@example.com</td>", "config file <code>team.yaml</code>",
		"who signs in with Test IdP", "<tr><td>admin</td><td>platform-admins</td></tr>", "<tr><td>editor</td><td>growth, marketing</td></tr>",
		"<tr><td>viewer</td><td>readers</td></tr>", "PII access by group (<code>CONSOLE_OIDC_PII_GROUPS</code>): pii-readers.")
	if strings.Contains(page.Body, `action="/team/users/fay@example.com/delete"`) {
		t.Error("a config file's user has a removal button")
	}
	b.get("/team?user=fay@example.com").contains(t, http.StatusOK, `name="takeOver" value="true"`, "the config file <code>team.yaml</code> lists it")
	b.post("/team/users", url.Values{"email": {"fay@example.com"}, "role": {"editor"}}).contains(t, http.StatusConflict,
		"console-user/fay@example.com is managed by file:team.yaml", `name="takeOver" value="true"`)
	if p := b.post("/team/users", url.Values{"email": {"fay@example.com"}, "role": {"editor"}, "takeOver": {"true"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("taking the user over: %d %s", p.Status, p.Body)
	}
	users := h.do(http.MethodGet, "/v1/users", nil)
	if !strings.Contains(string(users.Body), `{"email":"fay@example.com","role":"editor","pii":false,"origin":"console"`) {
		t.Fatalf("users after the take-over: %s", users.Body)
	}
}
