package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/rs/zerolog"
	"golang.org/x/oauth2"
)

// Sign-in with OpenID Connect (docs/console.md#single-sign-on), beside the console token.
//
// GET /oidc/login sets a short-lived cookie (oidcLoginCookie: HttpOnly, SameSite=Lax, path
// /oidc/, encrypted with the UI's key) holding the state, the nonce, the PKCE verifier and the
// page to return to, and sends the browser to the provider's authorization endpoint (code flow,
// PKCE S256). GET /oidc/callback checks the state against the cookie, exchanges the code with the
// verifier, verifies the ID token (signature against the provider's keys, issuer, audience =
// the client id, expiry) and its nonce, requires a verified email, reads the groups claim, and
// resolves the person (resolvePerson: the console's user list, then groupPrincipal). The
// session's subject is the email and the groups that matter to this console (sessionSubject),
// inside the signed session cookie, so each request resolves the role anew (ui.principal): a
// change of CONSOLE_OIDC_ROLES or of the user list applies to open sessions at once.
//
// The provider is discovered at the first sign-in, not at start: the console starts whether or
// not the provider answers, and a sign-in while it does not answer says so (503) and tries again
// (at most every oidcRetry).

// OIDC settings.
const (
	oidcLoginCookie = "tributary_oidc"
	oidcLoginTTL    = 10 * time.Minute // how long a sign-in at the provider may take
	oidcRetry       = 5 * time.Second  // how often discovery is tried again after a failure
	oidcTimeout     = 10 * time.Second // each request to the provider
	oidcCallback    = "/oidc/callback"
	maxEmailLength  = 254
)

// oidcRoleOrder is the order in which CONSOLE_OIDC_ROLES is matched: the highest role first.
var oidcRoleOrder = []Role{RoleAdmin, RoleEditor, RoleViewer}

// anyGroup in CONSOLE_OIDC_ROLES or CONSOLE_OIDC_PII_GROUPS matches everyone.
const anyGroup = "*"

// scopes returns CONSOLE_OIDC_SCOPES as a list (space- or comma-separated).
func (c OIDCConfig) scopes() []string {
	return strings.Fields(strings.ReplaceAll(c.Scopes, ",", " "))
}

// providerName is what the sign-in button names: CONSOLE_OIDC_NAME, else the issuer's host.
func (c OIDCConfig) providerName() string {
	if c.Name != "" {
		return c.Name
	}
	if u, err := url.Parse(c.Issuer); err == nil && u.Host != "" {
		return u.Hostname()
	}
	return "single sign-on"
}

// parseOIDCRoles reads CONSOLE_OIDC_ROLES: "<role>=<group>,<group>;<role>=..." (roles admin,
// editor, viewer; each at most once; "*" for any group).
func parseOIDCRoles(s string) (map[Role][]string, error) {
	roles := map[Role][]string{}
	for entry := range strings.SplitSeq(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, list, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("CONSOLE_OIDC_ROLES: %q is not <role>=<group>,<group> (e.g. admin=platform-admins;editor=growth,marketing;viewer=*)", entry)
		}
		role := Role(strings.TrimSpace(name))
		if !slices.Contains(oidcRoleOrder, role) {
			return nil, fmt.Errorf("CONSOLE_OIDC_ROLES: unknown role %q in %q (admin, editor or viewer)", role, entry)
		}
		if _, dup := roles[role]; dup {
			return nil, fmt.Errorf("CONSOLE_OIDC_ROLES: role %s given twice (list its groups once, comma-separated)", role)
		}
		var groups []string
		for g := range strings.SplitSeq(list, ",") {
			if g = strings.TrimSpace(g); g != "" {
				groups = append(groups, g)
			}
		}
		if len(groups) == 0 {
			return nil, fmt.Errorf("CONSOLE_OIDC_ROLES: role %s has no group (%q)", role, entry)
		}
		roles[role] = groups
	}
	return roles, nil
}

// validate returns every unusable OIDC setting, each naming its variable.
func (c OIDCConfig) validate() error {
	var errs []error
	if _, err := parseOIDCRoles(c.Roles); err != nil {
		errs = append(errs, err)
	}
	for _, g := range c.PIIGroups {
		if g == "" {
			errs = append(errs, errors.New("CONSOLE_OIDC_PII_GROUPS: an empty group name"))
			break
		}
	}
	if c.Issuer == "" {
		for _, set := range [][2]string{{"CONSOLE_OIDC_CLIENT_ID", c.ClientID}, {"CONSOLE_OIDC_ROLES", c.Roles}} {
			if set[1] != "" {
				errs = append(errs, fmt.Errorf("%s: set but CONSOLE_OIDC_ISSUER is empty (single sign-on is off without it)", set[0]))
			}
		}
		return errors.Join(errs...)
	}
	if u, err := url.Parse(c.Issuer); err != nil || u.Host == "" || (u.Scheme != "https" && (u.Scheme != "http" || !loopbackHost(u.Hostname()))) {
		errs = append(errs, fmt.Errorf("CONSOLE_OIDC_ISSUER: %q is not an https URL (http only on loopback), e.g. https://accounts.example.com", c.Issuer))
	}
	if c.ClientID == "" {
		errs = append(errs, errors.New("CONSOLE_OIDC_CLIENT_ID: required with CONSOLE_OIDC_ISSUER: the console's client id at the provider"))
	}
	if c.RedirectURL != "" {
		if u, err := url.Parse(c.RedirectURL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || !strings.HasSuffix(u.Path, oidcCallback) {
			errs = append(errs, fmt.Errorf("CONSOLE_OIDC_REDIRECT_URL: %q is not the console's callback, an absolute URL ending in %s (e.g. https://console.example.com%s)", c.RedirectURL, oidcCallback, oidcCallback))
		}
	}
	if !slices.Contains(c.scopes(), oidc.ScopeOpenID) {
		errs = append(errs, fmt.Errorf("CONSOLE_OIDC_SCOPES: %q must include openid (e.g. openid email profile)", c.Scopes))
	}
	if c.GroupsClaim == "" {
		errs = append(errs, errors.New("CONSOLE_OIDC_GROUPS_CLAIM: must not be empty (e.g. groups)"))
	}
	return errors.Join(errs...)
}

// loopbackHost says whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// oidcClient is the console's relying party: the settings, the role mapping, and the provider
// once discovered.
type oidcClient struct {
	cfg    OIDCConfig
	roles  map[Role][]string
	known  map[string]bool // the groups named in the role mapping or the PII groups
	client *http.Client
	logger zerolog.Logger
	now    func() time.Time

	mu       sync.Mutex
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	failed   time.Time // the last failed discovery
	err      error     // its error
}

// newOIDC returns the relying party of cfg, nil when single sign-on is off. cfg is valid.
func newOIDC(cfg OIDCConfig, logger zerolog.Logger, now func() time.Time) *oidcClient {
	roles, _ := parseOIDCRoles(cfg.Roles)
	o := &oidcClient{cfg: cfg, roles: roles, known: map[string]bool{}, client: &http.Client{Timeout: oidcTimeout}, logger: logger, now: now}
	for _, groups := range roles {
		for _, g := range groups {
			o.known[g] = true
		}
	}
	for _, g := range cfg.PIIGroups {
		o.known[g] = true
	}
	if cfg.Issuer == "" {
		return nil
	}
	logger.Info().Str("issuer", cfg.Issuer).Str("roles", cfg.Roles).Strs("pii_groups", cfg.PIIGroups).
		Msg("single sign-on with OpenID Connect: the provider is discovered at the first sign-in")
	return o
}

// discover returns the provider and the ID token verifier, discovering the provider the first
// time (and again after a failure, at most every oidcRetry).
func (o *oidcClient) discover(ctx context.Context) (*oidc.Provider, *oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider != nil {
		return o.provider, o.verifier, nil
	}
	if o.err != nil && o.now().Sub(o.failed) < oidcRetry {
		return nil, nil, o.err
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, o.client), oidcTimeout)
	defer cancel()
	p, err := oidc.NewProvider(ctx, o.cfg.Issuer)
	if err != nil {
		o.failed, o.err = o.now(), err
		o.logger.Warn().Err(err).Str("issuer", o.cfg.Issuer).Msg("the OpenID Connect provider did not answer its discovery: sign-in with it fails until it does")
		return nil, nil, err
	}
	// The key set fetches the provider's keys with this context's client (its cancellation is
	// dropped by go-oidc), and again when a token names a key it does not know.
	o.provider, o.err = p, nil
	o.verifier = p.VerifierContext(oidc.ClientContext(context.Background(), o.client), &oidc.Config{ClientID: o.cfg.ClientID, Now: o.now})
	o.logger.Info().Str("issuer", o.cfg.Issuer).Msg("OpenID Connect provider discovered")
	return o.provider, o.verifier, nil
}

// unreachable returns the error of the last discovery while the provider has not answered one,
// for the sign-in page; nil once discovered or before the first try.
func (o *oidcClient) unreachable() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider != nil {
		return nil
	}
	return o.err
}

// oauth2Config is the code flow's configuration for a callback at redirect.
func (o *oidcClient) oauth2Config(p *oidc.Provider, redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: redirect, Scopes: o.cfg.scopes()}
}

// redirectURL is CONSOLE_OIDC_REDIRECT_URL, else the callback on the request's own host.
func (o *oidcClient) redirectURL(r *http.Request) string {
	if o.cfg.RedirectURL != "" {
		return o.cfg.RedirectURL
	}
	scheme := "http"
	if secure(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host + oidcCallback
}

// groupPrincipal returns the principal a person's identity-provider groups map to
// (CONSOLE_OIDC_ROLES: the highest role one of its groups has; CONSOLE_OIDC_PII_GROUPS: the PII
// grant), and false when none does or single sign-on is off.
func (s *Service) groupPrincipal(email string, groups []string) (Principal, bool) {
	if s.ui == nil || s.ui.oidc == nil {
		return Principal{}, false
	}
	o := s.ui.oidc
	member := func(of []string) bool {
		return slices.Contains(of, anyGroup) || slices.ContainsFunc(groups, func(g string) bool { return slices.Contains(of, g) })
	}
	for _, role := range oidcRoleOrder {
		if member(o.roles[role]) {
			return Principal{Name: email, Role: role, PII: member(o.cfg.PIIGroups)}, true
		}
	}
	return Principal{}, false
}

// sessionSubject is the subject of a session signed in through OIDC: the email, a newline and
// the person's groups that this console's settings name, comma-separated (a group named in
// CONSOLE_OIDC_ROLES has no comma), so that the cookie stays small whatever the provider sends.
func (o *oidcClient) sessionSubject(email string, groups []string) string {
	var kept []string
	for _, g := range groups {
		if o.known[g] && !slices.Contains(kept, g) {
			kept = append(kept, g)
		}
	}
	return email + "\n" + strings.Join(kept, ",")
}

// personOf splits a session's subject (sessionSubject) into the email and the groups.
func personOf(subject string) (email string, groups []string) {
	email, list, _ := strings.Cut(subject, "\n")
	if list != "" {
		groups = strings.Split(list, ",")
	}
	return email, groups
}

// oidcLogin is what the login cookie holds between /oidc/login and /oidc/callback.
type oidcLogin struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
	Expires  int64  `json:"e"`
}

// oidcLoginPurpose binds the login cookie's encryption to its use.
const oidcLoginPurpose = "oidc-login"

// sealLogin encrypts l with the UI's key (AES-256-GCM), so that the browser can neither read
// the PKCE verifier nor change any field.
func (u *ui) sealLogin(l oidcLogin) string {
	plain, _ := json.Marshal(l)
	aead := u.aead()
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, []byte(oidcLoginPurpose)))
}

// openLogin opens the request's login cookie, unless it is missing, altered or expired.
func (u *ui) openLogin(r *http.Request) (oidcLogin, bool) {
	var l oidcLogin
	c, err := r.Cookie(oidcLoginCookie)
	if err != nil {
		return l, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	aead := u.aead()
	if err != nil || len(raw) < aead.NonceSize() {
		return l, false
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(oidcLoginPurpose))
	if err != nil || json.Unmarshal(plain, &l) != nil || u.s.now().Unix() > l.Expires {
		return oidcLogin{}, false
	}
	return l, true
}

// setLoginCookie sets (value non-empty) or drops the login cookie. SameSite=Lax: the callback
// is a top-level navigation from the provider's site, which a Strict cookie would not follow.
func setLoginCookie(w http.ResponseWriter, r *http.Request, value string) {
	maxAge := int(oidcLoginTTL / time.Second)
	if value == "" {
		maxAge = -1
	}
	http.SetCookie(w, &http.Cookie{Name: oidcLoginCookie, Value: value, Path: "/oidc/", MaxAge: maxAge,
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteLaxMode})
}

// oidcStart serves GET /oidc/login?next=…: the login cookie, then the provider.
func (u *ui) oidcStart(w http.ResponseWriter, r *http.Request) {
	headers(w)
	o := u.oidc
	if o == nil {
		u.render(w, r, http.StatusNotFound, "error", page{Title: "Not found", Error: "Single sign-on is not set up on this console (CONSOLE_OIDC_ISSUER): sign in with the console token."})
		return
	}
	p, _, err := o.discover(r.Context())
	if err != nil {
		u.render(w, r, http.StatusServiceUnavailable, "error", page{Title: "Sign-in unavailable",
			Error: fmt.Sprintf("Sign-in with %s is unavailable: the identity provider (%s) did not answer (%v). Try again in a moment, or sign in with the console token.", o.cfg.providerName(), o.cfg.Issuer, err)})
		return
	}
	l := oidcLogin{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier(),
		Next: safeNext(r.URL.Query().Get("next")), Expires: u.s.now().Add(oidcLoginTTL).Unix()}
	setLoginCookie(w, r, u.sealLogin(l))
	to := o.oauth2Config(p, o.redirectURL(r)).AuthCodeURL(l.State, oidc.Nonce(l.Nonce), oauth2.S256ChallengeOption(l.Verifier))
	http.Redirect(w, r, to, http.StatusFound)
}

// oidcFail renders a refused sign-in: "sign-in failed: <why>".
func (u *ui) oidcFail(w http.ResponseWriter, r *http.Request, status int, why string) {
	u.s.logger.Info().Int("status", status).Str("why", why).Msg("a single sign-on was refused")
	u.s.auditSignInRefused(r.Context(), true, why)
	u.render(w, r, status, "error", page{Title: "Sign-in failed", Error: "sign-in failed: " + why})
}

// oidcCallback serves GET /oidc/callback: the provider's answer.
func (u *ui) oidcCallback(w http.ResponseWriter, r *http.Request) {
	headers(w)
	o := u.oidc
	if o == nil {
		u.render(w, r, http.StatusNotFound, "error", page{Title: "Not found", Error: "Single sign-on is not set up on this console (CONSOLE_OIDC_ISSUER)."})
		return
	}
	q := r.URL.Query()
	l, ok := u.openLogin(r)
	setLoginCookie(w, r, "") // one use
	if e := q.Get("error"); e != "" {
		u.oidcFail(w, r, http.StatusForbidden, fmt.Sprintf("the identity provider answered %q: %s", e, q.Get("error_description")))
		return
	}
	if !ok {
		u.oidcFail(w, r, http.StatusBadRequest, "the sign-in took longer than 10 minutes, or began in another browser: sign in again")
		return
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(l.State)) != 1 {
		u.oidcFail(w, r, http.StatusBadRequest, "state does not match")
		return
	}
	code := q.Get("code")
	if code == "" {
		u.oidcFail(w, r, http.StatusBadRequest, "the identity provider sent no code")
		return
	}
	p, verifier, err := o.discover(r.Context())
	if err != nil {
		u.oidcFail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("the identity provider did not answer: %v", err))
		return
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(r.Context(), o.client), oidcTimeout)
	defer cancel()
	tok, err := o.oauth2Config(p, o.redirectURL(r)).Exchange(ctx, code, oauth2.VerifierOption(l.Verifier))
	if err != nil {
		status := http.StatusBadGateway
		if _, refused := errors.AsType[*oauth2.RetrieveError](err); refused {
			status = http.StatusBadRequest
		}
		u.oidcFail(w, r, status, fmt.Sprintf("the identity provider did not take the code: %v", err))
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		u.oidcFail(w, r, http.StatusBadGateway, "the identity provider sent no ID token")
		return
	}
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		u.oidcFail(w, r, http.StatusUnauthorized, fmt.Sprintf("the ID token is not valid: %v", err))
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(l.Nonce)) != 1 {
		u.oidcFail(w, r, http.StatusUnauthorized, "the ID token's nonce does not match")
		return
	}
	email, groups, err := o.person(idt)
	if err != nil {
		u.oidcFail(w, r, http.StatusForbidden, err.Error())
		return
	}
	pr, ok := u.s.resolvePerson(email, groups)
	if !ok {
		u.oidcFail(w, r, http.StatusForbidden, email+" is not a user of this console (neither in its user list nor in a group of CONSOLE_OIDC_ROLES): ask its admin")
		return
	}
	cookie := u.newSession(u.s.now(), o.sessionSubject(email, groups))
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: cookie, Path: "/",
		MaxAge: int(sessionTTL / time.Second), HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
	u.s.auditSession(r.Context(), actionSignIn, pr, cookie)
	u.s.logger.Info().Str("who", pr.Name).Str("role", string(pr.Role)).Bool("pii", pr.PII).Msg("signed in with OpenID Connect")
	// A page, not a redirect: the browser came from the provider's site, and a redirect would
	// carry on that cross-site navigation, on which the Strict session cookie is not sent. The
	// page's own navigation (a meta refresh, and a link) is same-site.
	u.render(w, r, http.StatusOK, "signedin", page{Title: "Signed in", Data: map[string]any{"Next": l.Next, "Who": pr}})
}

// person reads the verified ID token's email (which must be verified when the provider says
// whether it is) and groups (CONSOLE_OIDC_GROUPS_CLAIM: a list of strings or one string).
func (o *oidcClient) person(idt *oidc.IDToken) (string, []string, error) {
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return "", nil, fmt.Errorf("the ID token's claims do not decode: %v", err)
	}
	email, _ := claims["email"].(string)
	email = strings.TrimSpace(email)
	if email == "" {
		return "", nil, errors.New("the identity provider sent no email (CONSOLE_OIDC_SCOPES needs email)")
	}
	if len(email) > maxEmailLength || strings.ContainsFunc(email, func(c rune) bool { return c < 0x20 || c == 0x7f }) || !strings.Contains(email, "@") {
		return "", nil, fmt.Errorf("the identity provider sent an email that is not one: %q", email)
	}
	switch v := claims["email_verified"].(type) {
	case nil:
	case bool:
		if !v {
			return "", nil, fmt.Errorf("the email %s is not verified at the identity provider", email)
		}
	case string: // some providers send "true"
		if v != "true" {
			return "", nil, fmt.Errorf("the email %s is not verified at the identity provider", email)
		}
	default:
		return "", nil, fmt.Errorf("the ID token's email_verified is not a boolean")
	}
	var groups []string
	switch v := claims[o.cfg.GroupsClaim].(type) {
	case string:
		groups = []string{v}
	case []any:
		for _, g := range v {
			if s, ok := g.(string); ok {
				groups = append(groups, s)
			}
		}
	}
	return email, groups, nil
}
