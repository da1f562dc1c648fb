package console_test

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/console/internal/oidctest"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// The tests of sign-in with OpenID Connect (docs/console.md#single-sign-on) run against the
// in-process provider of console/internal/oidctest.

const (
	oidcClientID     = "tributary-console"
	oidcClientSecret = "oidc-client-secret-0123456789"
	oidcRoles        = "admin=platform-admins;editor=growth,marketing;viewer=readers"
)

var verified = true

// newOIDCHarness starts a provider and a console that signs in with it (roles of oidcRoles,
// PII for the group "pii-readers"); mod may change the console's config further.
func newOIDCHarness(t *testing.T, mod func(*console.Config)) (*harness, *oidctest.Provider) {
	t.Helper()
	p := oidctest.New(oidcClientID, oidcClientSecret)
	t.Cleanup(p.Close)
	p.SetUser(oidctest.User{Subject: "u1", Email: "ada@example.com", EmailVerified: &verified, Groups: []string{"growth"}})
	h := newHarness(t, func(c *console.Config) {
		c.OIDC.Issuer, c.OIDC.Name = p.URL, "Test IdP"
		c.OIDC.ClientID, c.OIDC.ClientSecret = oidcClientID, oidcClientSecret
		c.OIDC.Roles, c.OIDC.PIIGroups = oidcRoles, []string{"pii-readers"}
		if mod != nil {
			mod(c)
		}
	})
	return h, p
}

// visit sends a GET to an absolute URL (the provider's, or the console's callback) without the
// checks of a UI page, following no redirect.
func (b *browser) visit(to string) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.Get(to)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// oidcCallbackURL goes through /oidc/login?next=… and the provider's approval, and returns the
// callback URL the provider sends the browser back to (not yet visited).
func oidcCallbackURL(t *testing.T, b *browser, next string) *url.URL {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.h.srv.URL+"/oidc/login?next="+url.QueryEscape(next), nil)
	start := b.do(req) // the first discovers the provider: not a page's budget
	if start.Status != http.StatusFound || !strings.Contains(start.Location, "/authorize?") {
		t.Fatalf("/oidc/login: %d %s %s", start.Status, start.Location, start.Body)
	}
	resp, body := b.visit(start.Location)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("the provider's /authorize: %d %s", resp.StatusCode, body)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || back.Path != "/oidc/callback" {
		t.Fatalf("the provider sent the browser to %q", resp.Header.Get("Location"))
	}
	return back
}

// oidcSignIn signs a new browser in through the provider and returns it with the callback's page.
func oidcSignIn(t *testing.T, h *harness, next string) (*browser, uiPage) {
	t.Helper()
	b := h.newBrowser(t, false)
	back := oidcCallbackURL(t, b, next)
	return b, b.callback(back)
}

// callback visits the callback URL as a UI page.
func (b *browser) callback(back *url.URL) uiPage {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, back.String(), nil)
	return b.do(req)
}

// signedIn fails unless b's session shows name and role in the layout (next to sign-out).
func (b *browser) signedIn(t *testing.T, name, role string) uiPage {
	t.Helper()
	p := b.get("/sources")
	p.contains(t, http.StatusOK, `class="who"`, name+" · "+role, `action="/signout"`)
	return p
}

// TestOIDCSignIn: the sign-in page offers the provider beside the token; a sign-in through the
// provider (PKCE, state, nonce) lands signed in as the person with the role its groups map to,
// on the page asked for, with a Strict HttpOnly session cookie and a Lax login cookie that is
// dropped after one use; the callback cannot be replayed; sign-out ends the session; the token
// sign-in still works beside it.
func TestOIDCSignIn(t *testing.T) {
	h, p := newOIDCHarness(t, nil)

	anon := h.newBrowser(t, false)
	anon.get("/signin?next=%2Fsources").contains(t, http.StatusOK, "Sign in with Test IdP", `href="/oidc/login?next=%2Fsources"`, `name="token"`)

	b := h.newBrowser(t, false)
	back := oidcCallbackURL(t, b, "/sources")
	login := b.c.Jar.Cookies(back)
	if len(login) != 1 || login[0].Name != "tributary_oidc" {
		t.Fatalf("the login cookie sent to the callback: %v", login)
	}
	page := b.callback(back)
	page.contains(t, http.StatusOK, "Signed in as <strong>ada@example.com</strong> (editor, message contents masked)", `href="/sources"`, `http-equiv="refresh"`)
	var session, dropped string
	for _, c := range page.Header.Values("Set-Cookie") {
		switch {
		case strings.HasPrefix(c, "tributary_session="):
			session = c
		case strings.HasPrefix(c, "tributary_oidc="):
			dropped = c
		}
	}
	if !strings.Contains(session, "HttpOnly") || !strings.Contains(session, "SameSite=Strict") {
		t.Errorf("the session cookie: %q, want HttpOnly and SameSite=Strict", session)
	}
	if !strings.Contains(dropped, "Max-Age=0") {
		t.Errorf("the login cookie after the callback: %q, want dropped", dropped)
	}
	b.signedIn(t, "ada@example.com", "editor")
	if p.Tokens() != 1 {
		t.Errorf("the provider issued %d ID tokens, want 1", p.Tokens())
	}

	// The callback again (its code used, its login cookie gone): refused, no new session.
	replay := h.newBrowser(t, false)
	replay.callback(back).contains(t, http.StatusBadRequest, "sign-in failed")
	if r := replay.get("/"); r.Status != http.StatusSeeOther {
		t.Errorf("a replayed callback signed in: %d", r.Status)
	}

	// The token sign-in beside it.
	tok := h.signIn(t)
	tok.signedIn(t, "console-token", "admin")

	// Sign-out ends the OIDC session.
	if r := b.post("/signout", nil); r.Status != http.StatusSeeOther || r.Location != "/signin" {
		t.Fatalf("sign-out: %d %s", r.Status, r.Location)
	}
	if r := b.get("/sources"); r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Location, "/signin") {
		t.Errorf("after sign-out: %d %s, want the sign-in", r.Status, r.Location)
	}
	tok.signedIn(t, "console-token", "admin")
}

// TestOIDCRefusals: a callback whose state differs from the login cookie's, one without the
// login cookie, an ID token that expired, one for another audience, one from another issuer,
// one with another nonce, an email that is not verified: each is refused with its reason, and
// no session is opened.
func TestOIDCRefusals(t *testing.T) {
	h, p := newOIDCHarness(t, nil)
	noSession := func(t *testing.T, b *browser) {
		t.Helper()
		if r := b.get("/"); r.Status != http.StatusSeeOther {
			t.Errorf("a refused sign-in opened a session: %d", r.Status)
		}
	}

	t.Run("wrong state", func(t *testing.T) {
		b := h.newBrowser(t, false)
		back := oidcCallbackURL(t, b, "/")
		q := back.Query()
		q.Set("state", "forged-"+q.Get("state"))
		back.RawQuery = q.Encode()
		b.callback(back).contains(t, http.StatusBadRequest, "sign-in failed: state does not match")
		noSession(t, b)
	})
	t.Run("no login cookie", func(t *testing.T) {
		b := h.newBrowser(t, false)
		back := oidcCallbackURL(t, b, "/")
		other := h.newBrowser(t, false) // the callback in another browser
		other.callback(back).contains(t, http.StatusBadRequest, "sign-in failed: the sign-in took longer than 10 minutes, or began in another browser")
		noSession(t, other)
	})
	for _, c := range []struct {
		name   string
		alter  func(map[string]any)
		status int
		want   string
	}{
		{"expired", func(c map[string]any) {
			c["iat"], c["exp"] = time.Now().Add(-time.Hour).Unix(), time.Now().Add(-time.Minute).Unix()
		}, http.StatusUnauthorized, "token is expired"},
		{"wrong audience", func(c map[string]any) { c["aud"] = "another-client" }, http.StatusUnauthorized, "expected audience"},
		{"wrong issuer", func(c map[string]any) { c["iss"] = "https://evil.example.com" }, http.StatusUnauthorized, "id token issued by a different provider"},
		{"wrong nonce", func(c map[string]any) { c["nonce"] = "another-nonce" }, http.StatusUnauthorized, "the ID token&#39;s nonce does not match"},
		{"no nonce", func(c map[string]any) { delete(c, "nonce") }, http.StatusUnauthorized, "the ID token&#39;s nonce does not match"},
		{"email not verified", func(c map[string]any) { c["email_verified"] = false }, http.StatusForbidden, "the email ada@example.com is not verified"},
		{"no email", func(c map[string]any) { delete(c, "email") }, http.StatusForbidden, "sent no email"},
		{"email not verified, as a string", func(c map[string]any) { c["email_verified"] = "false" }, http.StatusForbidden, "is not verified"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p.SetClaims(c.alter)
			defer p.SetClaims(nil)
			b, page := oidcSignIn(t, h, "/")
			page.contains(t, c.status, "sign-in failed: ", c.want)
			noSession(t, b)
		})
	}
}

// TestOIDCGroupRoles: CONSOLE_OIDC_ROLES maps the groups claim to the highest role of any of
// the person's groups; a person in none is refused (403, naming the email); a PII group grants
// PII access; the role is resolved on each request from the groups the session keeps, which
// are only those the settings name (a person in a thousand groups gets a small cookie).
func TestOIDCGroupRoles(t *testing.T) {
	h, p := newOIDCHarness(t, nil)
	many := make([]string, 1000)
	for i := range many {
		many[i] = "some-long-directory-group-name-of-the-company-" + strings.Repeat("x", i%50)
	}
	t.Run("groups claim of one string", func(t *testing.T) {
		p.SetUser(oidctest.User{Subject: "one", Email: "one@example.com", EmailVerified: &verified})
		p.SetClaims(func(c map[string]any) { c["groups"] = "platform-admins" })
		defer p.SetClaims(nil)
		b, page := oidcSignIn(t, h, "/")
		page.contains(t, http.StatusOK, "Signed in as")
		b.signedIn(t, "one@example.com", "admin")
	})
	for _, c := range []struct {
		name   string
		groups []string
		role   string // empty: refused
		pii    bool
	}{
		{"admin", []string{"platform-admins"}, "admin", false},
		{"editor", []string{"marketing"}, "editor", false},
		{"viewer", []string{"readers"}, "viewer", false},
		{"highest of several", []string{"readers", "platform-admins", "growth"}, "admin", false},
		{"viewer with PII", []string{"readers", "pii-readers"}, "viewer", true},
		{"in a thousand groups", append(many, "growth"), "editor", false},
		{"no match", []string{"accounting"}, "", false},
		{"PII group alone", []string{"pii-readers"}, "", false},
		{"no groups", nil, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			email := strings.ReplaceAll(c.name, " ", "-") + "@example.com"
			p.SetUser(oidctest.User{Subject: email, Email: email, EmailVerified: &verified, Groups: c.groups})
			b, page := oidcSignIn(t, h, "/")
			if c.role == "" {
				page.contains(t, http.StatusForbidden, "sign-in failed: "+email+" is not a user of this console")
				if r := b.get("/"); r.Status != http.StatusSeeOther {
					t.Errorf("a refused person got a session: %d", r.Status)
				}
				return
			}
			page.contains(t, http.StatusOK, "Signed in as")
			sp := b.signedIn(t, email, c.role)
			if masked := strings.Contains(sp.Body, "without PII access"); masked == c.pii {
				t.Errorf("PII access shown as %v, want %v", !masked, c.pii)
			}
			for _, ck := range page.Header.Values("Set-Cookie") {
				if strings.HasPrefix(ck, "tributary_session=") && len(ck) > 600 {
					t.Errorf("the session cookie is %d bytes: the groups kept are not bounded", len(ck))
				}
			}
		})
	}
}

// TestOIDCPKCE: the test provider refuses a code flow without a PKCE challenge, and a code
// exchanged without its verifier or with another: so the sign-ins of the other tests prove that
// the console sends a challenge (S256) and the matching verifier.
func TestOIDCPKCE(t *testing.T) {
	p := oidctest.New(oidcClientID, oidcClientSecret)
	defer p.Close()
	p.SetUser(oidctest.User{Subject: "u1", Email: "ada@example.com"})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	authorize := func(challenge string) url.Values {
		q := url.Values{"client_id": {oidcClientID}, "response_type": {"code"}, "scope": {"openid email"},
			"redirect_uri": {"http://127.0.0.1:1/oidc/callback"}, "state": {"s"}, "nonce": {"n"}}
		if challenge != "" {
			q.Set("code_challenge", challenge)
			q.Set("code_challenge_method", "S256")
		}
		resp, err := noRedirect.Get(p.URL + "/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		back, _ := url.Parse(resp.Header.Get("Location"))
		return back.Query()
	}
	if q := authorize(""); q.Get("code") != "" || q.Get("error") != "invalid_request" {
		t.Fatalf("an authorization without PKCE: %v, want invalid_request", q)
	}
	sum := sha256.Sum256([]byte("the-verifier-of-this-test-0123456789-abcdefgh"))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])
	exchange := func(code, verifier string) int {
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {"http://127.0.0.1:1/oidc/callback"},
			"client_id": {oidcClientID}, "client_secret": {oidcClientSecret}}
		if verifier != "" {
			form.Set("code_verifier", verifier)
		}
		resp, err := http.PostForm(p.URL+"/token", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := exchange(authorize(challenge).Get("code"), ""); s != http.StatusBadRequest {
		t.Errorf("a code exchanged without its verifier: %d, want 400", s)
	}
	if s := exchange(authorize(challenge).Get("code"), "another-verifier-0123456789-abcdefghijklmn"); s != http.StatusBadRequest {
		t.Errorf("a code exchanged with another verifier: %d, want 400", s)
	}
	if s := exchange(authorize(challenge).Get("code"), "the-verifier-of-this-test-0123456789-abcdefgh"); s != http.StatusOK {
		t.Errorf("a code exchanged with its verifier: %d, want 200", s)
	}
}

// TestOIDCProviderUnreachable: a console whose provider does not answer starts and serves the
// token sign-in; the single sign-on says the provider did not answer (503), and works once the
// provider answers, without a restart.
func TestOIDCProviderUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	_ = ln.Close() // nothing answers there yet
	p := oidctest.New(oidcClientID, oidcClientSecret)
	t.Cleanup(p.Close)
	p.SetUser(oidctest.User{Subject: "u1", Email: "ada@example.com", EmailVerified: &verified, Groups: []string{"readers"}})
	h := newHarness(t, func(c *console.Config) {
		c.OIDC.Issuer, c.OIDC.ClientID, c.OIDC.ClientSecret, c.OIDC.Roles = issuer, oidcClientID, oidcClientSecret, oidcRoles
	})
	b := h.newBrowser(t, false)
	b.get("/signin").contains(t, http.StatusOK, "Sign in with 127.0.0.1")
	b.get("/oidc/login").contains(t, http.StatusServiceUnavailable, "Sign-in with 127.0.0.1 is unavailable: the identity provider ("+issuer+") did not answer")
	b.get("/signin").contains(t, http.StatusOK, "Sign in with 127.0.0.1", "The identity provider (<code class=\"id\">"+issuer+"</code>) did not answer at the last try")
	h.signIn(t).signedIn(t, "console-token", "admin")

	// The provider comes up at the issuer's address (a proxy to the test provider).
	ln, err = net.Listen("tcp", ln.Addr().String())
	if err != nil {
		t.Skipf("the issuer's port was taken meanwhile: %v", err)
	}
	target, _ := url.Parse(p.URL)
	proxy := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The provider's documents name p.URL; the discovery must name the issuer, so it is
		// rewritten; the other endpoints are the provider's own.
		if r.URL.Path == "/.well-known/openid-configuration" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"issuer":"`+issuer+`","authorization_endpoint":"`+p.URL+`/authorize","token_endpoint":"`+p.URL+`/token","jwks_uri":"`+p.URL+`/jwks","id_token_signing_alg_values_supported":["RS256"]}`)
			return
		}
		http.Redirect(w, r, target.String()+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	})}
	go func() { _ = proxy.Serve(ln) }()
	t.Cleanup(func() { _ = proxy.Close() })
	p.SetClaims(func(c map[string]any) { c["iss"] = issuer })

	servicetest.Eventually(t, 15*time.Second, "the sign-in once the provider answers", func() bool {
		return b.get("/oidc/login").Status == http.StatusFound
	})
	_, page := oidcSignIn(t, h, "/")
	page.contains(t, http.StatusOK, "Signed in as <strong>ada@example.com</strong> (viewer")
	if r := b.get("/signin"); strings.Contains(r.Body, "did not answer") {
		t.Errorf("the sign-in page still says the provider did not answer:\n%s", r.Body)
	}
}

// TestOIDCSettings: the OIDC settings, read and checked: a role mapping that does not parse,
// an unknown role, a role twice, an issuer that is not https (but on loopback), no client id,
// scopes without openid, a redirect URL that is not the callback.
func TestOIDCSettings(t *testing.T) {
	required := map[string]string{"CONSOLE_TOKEN": testToken, "CONSOLE_OIDC_ISSUER": "https://idp.example.com/realms/acme", "CONSOLE_OIDC_CLIENT_ID": "console"}
	def := console.DefaultConfig()
	def.Token, def.OIDC.Issuer, def.OIDC.ClientID = testToken, "https://idp.example.com/realms/acme", "console"
	servicetest.Settings[console.Config]{
		FromEnviron: console.ConfigFromEnviron,
		Required:    required,
		Default:     def,
		Every: map[string]string{
			"CONSOLE_OIDC_NAME":          "Acme SSO",
			"CONSOLE_OIDC_CLIENT_SECRET": "s3cret",
			"CONSOLE_OIDC_REDIRECT_URL":  "https://console.example.com/oidc/callback",
			"CONSOLE_OIDC_SCOPES":        "openid email groups",
			"CONSOLE_OIDC_GROUPS_CLAIM":  "roles",
			"CONSOLE_OIDC_ROLES":         "admin=platform-admins; editor=growth,marketing; viewer=*",
			"CONSOLE_OIDC_PII_GROUPS":    "support,privacy",
		},
		Want: func(c *console.Config) {
			c.OIDC.Name, c.OIDC.ClientSecret = "Acme SSO", "s3cret"
			c.OIDC.RedirectURL, c.OIDC.Scopes, c.OIDC.GroupsClaim = "https://console.example.com/oidc/callback", "openid email groups", "roles"
			c.OIDC.Roles, c.OIDC.PIIGroups = "admin=platform-admins; editor=growth,marketing; viewer=*", []string{"support", "privacy"}
		},
		Bad: map[string][]string{
			"CONSOLE_OIDC_ROLES":        {"platform-admins", "owner=x", "admin=", "admin=a;admin=b"},
			"CONSOLE_OIDC_ISSUER":       {"http://idp.example.com", "idp.example.com", "https://"},
			"CONSOLE_OIDC_SCOPES":       {"email profile"},
			"CONSOLE_OIDC_REDIRECT_URL": {"/oidc/callback", "https://console.example.com/callback"},
			"CONSOLE_OIDC_CLIENT_ID":    {""},
		},
	}.Run(t)

	if _, err := console.ConfigFromEnviron(map[string]string{"CONSOLE_TOKEN": testToken, "CONSOLE_OIDC_ISSUER": "http://127.0.0.1:5556/dex", "CONSOLE_OIDC_CLIENT_ID": "c"}); err != nil {
		t.Errorf("an http issuer on loopback: %v", err)
	}
	_, err := console.ConfigFromEnviron(map[string]string{"CONSOLE_TOKEN": testToken, "CONSOLE_OIDC_CLIENT_ID": "c", "CONSOLE_OIDC_ROLES": "viewer=*"})
	servicetest.NamesEach(t, err, "CONSOLE_OIDC_CLIENT_ID", "CONSOLE_OIDC_ROLES")
	if err == nil || !strings.Contains(err.Error(), "CONSOLE_OIDC_ISSUER is empty") {
		t.Errorf("OIDC settings without an issuer: %v", err)
	}
}

// TestOIDCRoleFollowsSettings: a session keeps the person's groups, not a role: another
// console (or this one restarted) with another CONSOLE_OIDC_ROLES gives the same session the
// role the settings give now, and ends it when they give none; CONSOLE_OIDC_REDIRECT_URL, when
// set, is the callback the provider is sent to.
func TestOIDCRoleFollowsSettings(t *testing.T) {
	h, p := newOIDCHarness(t, nil)
	b, page := oidcSignIn(t, h, "/")
	page.contains(t, http.StatusOK, "Signed in as")
	b.signedIn(t, "ada@example.com", "editor")

	demoted := startConsole(t, h.env, func(c *console.Config) {
		c.OIDC.Issuer, c.OIDC.ClientID, c.OIDC.ClientSecret = p.URL, oidcClientID, oidcClientSecret
		c.OIDC.Roles = "admin=platform-admins;viewer=growth"
		c.OIDC.RedirectURL = "https://console.example.com/oidc/callback"
	})
	b.as(demoted).signedIn(t, "ada@example.com", "viewer")
	req, _ := http.NewRequest(http.MethodGet, demoted.srv.URL+"/oidc/login", nil)
	start := demoted.newBrowser(t, false).do(req) // discovers the provider: not a page's budget
	if to, err := url.Parse(start.Location); start.Status != http.StatusFound || err != nil || to.Query().Get("redirect_uri") != "https://console.example.com/oidc/callback" {
		t.Errorf("/oidc/login with CONSOLE_OIDC_REDIRECT_URL: %d %s", start.Status, start.Location)
	}

	gone := startConsole(t, h.env, func(c *console.Config) {
		c.OIDC.Issuer, c.OIDC.ClientID, c.OIDC.Roles = p.URL, oidcClientID, "admin=platform-admins"
	})
	if r := b.as(gone).get("/sources"); r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Location, "/signin") {
		t.Errorf("a session whose groups no longer map to a role: %d %s, want the sign-in", r.Status, r.Location)
	}
}
