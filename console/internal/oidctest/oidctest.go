// Package oidctest is an OpenID Connect provider for tests, in process: discovery
// (/.well-known/openid-configuration), its keys (/jwks), an authorization endpoint (/authorize)
// that approves its User at once and sends the browser back with a code and the state, and a
// token endpoint (/token) that checks the client, the redirect URL and the PKCE verifier
// (S256; a code asked for without a challenge is refused) and answers an ID token signed with
// go-jose, carrying the nonce it was given. SetClaims lets a test alter a token before it is
// signed (an expired one, another audience, another nonce).
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// User is whom the provider signs in.
type User struct {
	Subject string
	Email   string
	// EmailVerified is the email_verified claim; nil leaves it out.
	EmailVerified *bool
	// Groups are the "groups" claim; nil leaves it out.
	Groups []string
}

// Provider is a running test provider.
type Provider struct {
	// URL is the issuer (the test server's URL).
	URL          string
	ClientID     string
	ClientSecret string

	srv    *httptest.Server
	key    *rsa.PrivateKey
	signer jose.Signer

	mu     sync.Mutex
	user   User
	claims func(map[string]any)
	grants map[string]grant
	tokens int // ID tokens issued
}

// SetUser sets whom /authorize approves from now on.
func (p *Provider) SetUser(u User) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.user = u
}

// SetClaims sets a function that may change each ID token's claims before they are signed
// (nil: none).
func (p *Provider) SetClaims(f func(claims map[string]any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.claims = f
}

// grant is an authorization code's request.
type grant struct {
	redirect, challenge, nonce string
	user                       User
}

// KeyID is the key id of the provider's signing key.
const KeyID = "oidctest-key"

// New starts a provider for clientID and clientSecret; Close stops it.
func New(clientID, clientSecret string) *Provider {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", KeyID))
	if err != nil {
		panic(err)
	}
	p := &Provider{ClientID: clientID, ClientSecret: clientSecret, key: key, signer: signer, grants: map[string]grant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.jwks)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	p.URL = p.srv.URL
	return p
}

// Close stops the provider.
func (p *Provider) Close() { p.srv.Close() }

// Tokens returns how many ID tokens the provider issued.
func (p *Provider) Tokens() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tokens
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// oauthError answers an OAuth 2.0 error (RFC 6749 section 5.2).
func oauthError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                p.URL,
		"authorization_endpoint":                p.URL + "/authorize",
		"token_endpoint":                        p.URL + "/token",
		"jwks_uri":                              p.URL + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"scopes_supported":                      []string{"openid", "email", "profile", "groups"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p.key.PublicKey, KeyID: KeyID, Algorithm: "RS256", Use: "sig"}}})
}

// authorize approves User at once: back to the redirect URL with a code and the state. A
// request without a PKCE challenge (S256) is refused as the redirect's error.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Host == "" {
		http.Error(w, "no redirect_uri", http.StatusBadRequest)
		return
	}
	if q.Get("client_id") != p.ClientID {
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	}
	back := redirect.Query()
	back.Set("state", q.Get("state"))
	switch {
	case q.Get("response_type") != "code":
		back.Set("error", "unsupported_response_type")
	case !slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		back.Set("error", "invalid_scope")
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		back.Set("error", "invalid_request")
		back.Set("error_description", "PKCE (S256) is required")
	default:
		code := rand.Text()
		p.mu.Lock()
		p.grants[code] = grant{redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), user: p.user}
		p.mu.Unlock()
		back.Set("code", code)
	}
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// token exchanges a code: the client (HTTP Basic or the form), the code, its redirect URL and
// the PKCE verifier are checked; a code is used once.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || secret != p.ClientSecret {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "only authorization_code")
		return
	}
	p.mu.Lock()
	g, ok := p.grants[r.PostForm.Get("code")]
	delete(p.grants, r.PostForm.Get("code"))
	alter := p.claims
	p.mu.Unlock()
	if !ok {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or used code")
		return
	}
	if r.PostForm.Get("redirect_uri") != g.redirect {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorization request's")
		return
	}
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if r.PostForm.Get("code_verifier") == "" || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "PKCE verifier does not match the code challenge")
		return
	}
	now := time.Now()
	claims := map[string]any{"iss": p.URL, "sub": g.user.Subject, "aud": p.ClientID, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	if g.user.Email != "" {
		claims["email"] = g.user.Email
	}
	if g.user.EmailVerified != nil {
		claims["email_verified"] = *g.user.EmailVerified
	}
	if g.user.Groups != nil {
		claims["groups"] = g.user.Groups
	}
	if alter != nil {
		alter(claims)
	}
	raw, err := jwt.Signed(p.signer).Claims(claims).Serialize()
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	p.mu.Lock()
	p.tokens++
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"access_token": rand.Text(), "token_type": "Bearer", "expires_in": 300, "id_token": raw})
}
