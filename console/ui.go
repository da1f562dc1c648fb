package console

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/platform"
)

// The web UI (docs/console.md#the-web-ui): server-rendered html/template pages embedded in the
// binary, a little hand-written JavaScript (ui/static/app.js) for what a page does live, no
// third-party asset. Sign-in takes the console token, or goes through an OpenID Connect
// provider (oidc.go, docs/console.md#single-sign-on), and sets a session cookie (HttpOnly,
// SameSite=Strict), signed with a key derived from the token, so that every replica accepts it
// and changing the token signs everyone out; signing out revokes the session on every replica
// through tributary.sessions (sessions.go, docs/console.md#sessions). Every form carries a CSRF
// token bound to the session; every page is served with a strict Content-Security-Policy (no
// inline script or style).

//go:embed ui/templates/*.html ui/templates/*/*.html ui/static/*
var uiFiles embed.FS

// uiPartials are templates that are parts of pages, not pages: every page may include them.
var uiPartials = []string{"ui/templates/funnel.html", "ui/templates/message_status.html"}

// Session settings.
const (
	sessionCookie = "tributary_session"
	sessionTTL    = 12 * time.Hour
	csrfField     = "_csrf"
)

// contentSecurityPolicy allows the page's own scripts, styles and fetches only.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ui is the web UI of a console.
type ui struct {
	s        *Service
	key      []byte // signs sessions and CSRF tokens
	pages    map[string]*template.Template
	profiles *audiencesClient // the audiences service's profile API
	oidc     *oidcClient      // sign-in with OpenID Connect (oidc.go); nil when off
}

// session is a signed-in browser.
type session struct {
	id      []byte // random, 16 bytes: what a revocation names (by its hash, sessionKey)
	key     string // sessionKey(id)
	expires time.Time
	csrf    string
	// subject is whom the session was opened for: empty for a sign-in with CONSOLE_TOKEN.
	subject string
}

func newUI(s *Service) (*ui, error) {
	mac := hmac.New(sha256.New, []byte(s.cfg.Token))
	mac.Write([]byte("tributary-console-session-v1"))
	u := &ui{s: s, key: mac.Sum(nil), pages: map[string]*template.Template{},
		profiles: newAudiencesClient(s.cfg.AudiencesURL, s.cfg.AudiencesToken),
		oidc:     newOIDC(s.cfg.OIDC, s.logger, s.now)}
	names, err := fs.Glob(uiFiles, "ui/templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(name, "ui/templates/"), ".html")
		if base == "layout" || strings.Contains(base, ".") || slices.Contains(uiPartials, name) {
			continue // a partial, or a section of a page, is parsed with the pages that use it
		}
		// A page's parts (its tabs, ui/templates/<page>/*.html) and the partials are parsed with it.
		files := append([]string{"ui/templates/layout.html", name}, uiPartials...)
		if parts, _ := fs.Glob(uiFiles, "ui/templates/"+base+"/*.html"); len(parts) > 0 {
			files = append(files, "ui/templates/"+base+"/*.html")
		}
		t, err := template.New("layout.html").Funcs(uiFuncs).ParseFS(uiFiles, files...)
		if err != nil {
			return nil, fmt.Errorf("console UI template %s: %w", name, err)
		}
		u.pages[base] = t
	}
	return u, nil
}

// sign returns the MAC of b under the UI's key.
func (u *ui) sign(parts ...[]byte) []byte {
	mac := hmac.New(sha256.New, u.key)
	for _, p := range parts {
		mac.Write(p)
	}
	return mac.Sum(nil)
}

// newSession returns a cookie value for a new session of subject (empty: the holder of
// CONSOLE_TOKEN). The payload is the expiry (8 bytes), a random id (16 bytes) and the subject.
func (u *ui) newSession(now time.Time, subject string) string {
	payload := make([]byte, 8+16, 8+16+len(subject))
	binary.BigEndian.PutUint64(payload, uint64(now.Add(sessionTTL).Unix()))
	_, _ = rand.Read(payload[8:])
	payload = append(payload, subject...)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(u.sign([]byte("session"), payload))
}

// session returns the request's valid session, or nil.
func (u *ui) session(r *http.Request) *session {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	p, m, ok := strings.Cut(c.Value, ".")
	if !ok {
		return nil
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(m)
	if err1 != nil || err2 != nil || len(payload) < 24 || !hmac.Equal(mac, u.sign([]byte("session"), payload)) {
		return nil
	}
	expires := time.Unix(int64(binary.BigEndian.Uint64(payload)), 0)
	if !u.s.now().Before(expires) {
		return nil
	}
	id := payload[8:24]
	key := sessionKey(id)
	if !u.s.sessions.valid(key) {
		return nil // signed out (on this console or another)
	}
	return &session{id: id, key: key, expires: expires, csrf: enc.EncodeToString(u.sign([]byte("csrf"), id)), subject: string(payload[24:])}
}

// secure reports whether the browser reached the console over HTTPS (directly or through a
// proxy that says so): the cookie is then Secure.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// headers sets the security headers of every UI answer.
func headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// safeNext returns next when it is a path of this console, else "/": a relative reference
// with no scheme, no host, no control character or backslash (browsers drop tabs and newlines
// from URLs, so "/\t/evil.example" would become "//evil.example"), starting with one "/".
func safeNext(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") {
		return "/"
	}
	for _, c := range next {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	return next
}

// page is what every page template gets.
type page struct {
	Title   string
	Nav     string // the section highlighted in the navigation
	CSRF    string
	Flash   string // a one-line result of the last action ("Source app created")
	Error   string // an error of the whole form
	Version string
	Who     *Principal // who is signed in (the layout shows the name and role)
	Data    any
	// Role is the principal's: the page shows only the forms it may use (Can).
	Role Role
}

// Can reports whether the page's principal has role need or a higher one (templates:
// {{if $.Can "editor"}}): the forms it may not use are not shown (permissions.go).
func (p page) Can(need string) bool { return p.Role.allows(Role(need)) }

// render writes the page template name with data.
func (u *ui) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	headers(w)
	t, ok := u.pages[name]
	if !ok {
		http.Error(w, "no page "+name, http.StatusInternalServerError)
		return
	}
	if sess := u.session(r); sess != nil {
		p.CSRF = sess.csrf
	}
	if q := r.URL.Query(); p.Flash == "" && q.Get("done") != "" && hmac.Equal([]byte(q.Get("flash")), []byte(u.flashMAC(q.Get("done")))) {
		p.Flash = q.Get("done")
	}
	p.Version = platform.Version
	if pr, ok := requestPrincipal(r); ok {
		p.Who, p.Role = &pr, pr.Role
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, p); err != nil {
		u.s.logger.Error().Err(err).Str("page", name).Msg("rendering a page failed")
		http.Error(w, "rendering the page failed: see the console's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// signIn serves the sign-in form and checks the token.
func (u *ui) signIn(w http.ResponseWriter, r *http.Request) {
	headers(w)
	next := safeNext(r.FormValue("next"))
	if r.Method == http.MethodGet {
		if u.session(r) != nil {
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
		u.render(w, r, http.StatusOK, "signin", page{Title: "Sign in", Data: u.signInData(next)})
		return
	}
	if !sameOrigin(r) {
		u.forbidden(w, r)
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if subtle.ConstantTimeCompare([]byte(token), []byte(u.s.cfg.Token)) != 1 {
		u.s.metrics.unauthorized.Inc()
		u.s.auditSignInRefused(r.Context(), false, "not the console token")
		msg := "That is not the console token (CONSOLE_TOKEN)."
		if f := u.s.cfg.TokenFile; f != "" {
			msg = "That is not the console token (CONSOLE_TOKEN, kept in " + f + ")."
		}
		u.render(w, r, http.StatusUnauthorized, "signin", page{Title: "Sign in", Error: msg, Data: u.signInData(next)})
		return
	}
	cookie := u.newSession(u.s.now(), "")
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: cookie, Path: "/", MaxAge: int(sessionTTL / time.Second),
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
	u.s.auditSession(r.Context(), actionSignIn, tokenPrincipal, cookie)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signInData is what the sign-in page shows: the token form, and the single sign-on button
// when CONSOLE_OIDC_ISSUER is set.
func (u *ui) signInData(next string) map[string]string {
	d := map[string]string{"Next": next, "TokenFile": u.s.cfg.TokenFile}
	if u.oidc != nil {
		d["Provider"] = u.oidc.cfg.providerName()
		d["LoginURL"] = "/oidc/login?next=" + url.QueryEscape(next)
		if err := u.oidc.unreachable(); err != nil {
			d["ProviderDown"] = u.oidc.cfg.Issuer
		}
	}
	return d
}

// signOut ends the session (a form with the CSRF token): it revokes it on every console
// (tributary.sessions) before it drops the cookie; if Kafka does not take the revocation, the
// session stays (and says so), so that the user can try again rather than believe it ended.
func (u *ui) signOut(w http.ResponseWriter, r *http.Request) {
	headers(w)
	if sess := u.session(r); sess != nil {
		if err := u.s.revokeSession(r.Context(), sess); err != nil {
			u.s.logger.Error().Err(err).Msg("signing out failed")
			u.render(w, r, http.StatusServiceUnavailable, "error", page{Title: "Sign-out failed",
				Error: "Signing out failed: the console could not record it (Kafka did not answer), so your session is still valid. Try again in a moment."})
			return
		}
		u.s.auditSignOut(r.Context(), sess)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// sameOrigin refuses a cross-site POST by its Origin or Sec-Fetch-Site header (SameSite=Strict
// already keeps the cookie off it; the CSRF token is the third lock).
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	return true
}

func (u *ui) forbidden(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusForbidden, "error", page{Title: "Refused", Error: "This form is out of date or came from another site (its CSRF token does not match your session). Go back, reload the page and send it again."})
}

// signedIn wraps a page: without a session, a GET goes to the sign-in form (and back after
// it), anything else is 401; a POST needs the session's CSRF token and a same-origin request.
func (u *ui) signedIn(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess := u.session(r)
		if sess == nil {
			headers(w)
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxImportBody)
			parse := r.ParseForm
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
				// A file upload (the config import): in memory, as bounded as any form.
				parse = func() error { return r.ParseMultipartForm(maxImportBody) }
			}
			if err := parse(); err != nil {
				u.render(w, r, http.StatusBadRequest, "error", page{Title: "Bad request", Error: "The form could not be read: " + err.Error()})
				return
			}
			if !sameOrigin(r) || subtle.ConstantTimeCompare([]byte(r.PostForm.Get(csrfField)), []byte(sess.csrf)) != 1 {
				u.forbidden(w, r)
				return
			}
		}
		p, ok := u.principal(sess)
		if !ok {
			// The subject is no longer a user of this console: the session ends.
			headers(w)
			http.Redirect(w, r, "/signin", http.StatusSeeOther)
			return
		}
		next(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// principal returns who a session acts for, and false when its subject may no longer sign in.
// A person's subject holds the email and the groups of the sign-in (oidc.go, sessionSubject):
// the role is resolved anew on each request, from the user list and CONSOLE_OIDC_ROLES as they
// are now.
func (u *ui) principal(sess *session) (Principal, bool) {
	if sess.subject == "" {
		return tokenPrincipal, true
	}
	return u.s.resolvePerson(personOf(sess.subject))
}

// fail shows an error page for err: an apiError with its status and message.
func (u *ui) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		if ae = kafkaTooLarge(err); ae == nil {
			u.s.logger.Error().Err(err).Str("path", r.URL.Path).Msg("page failed")
			ae = &apiError{Status: http.StatusInternalServerError, Message: "Something failed: see the console's log."}
		}
	}
	u.render(w, r, ae.Status, "error", page{Title: http.StatusText(ae.Status), Error: ae.Message})
}

// redirect sends the browser to path with a one-line result shown on that page.
// The one-line result travels in the URL with its MAC (flash), so that a link cannot make a
// page show a message of the attacker's ("Session expired: paste your token at …").
func (u *ui) redirect(w http.ResponseWriter, r *http.Request, path, done string) {
	headers(w)
	if done != "" {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + "done=" + url.QueryEscape(done) + "&flash=" + u.flashMAC(done)
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// sealTTL is how long a sealed page (a new write key, shown after its redirect) opens.
const sealTTL = 10 * time.Minute

// seal encrypts b for the session, for purpose, until sealTTL from now: a value for a
// redirect's URL that only this session opens, on any replica (the key derives from the
// token), so that a page showing a secret once (a new write key) is the answer of a GET and a
// reload posts nothing again.
func (u *ui) seal(sess *session, purpose string, b []byte) string {
	aead := u.aead()
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+8+len(b)+aead.Overhead())
	_, _ = rand.Read(nonce)
	plain := binary.BigEndian.AppendUint64(nil, uint64(u.s.now().Add(sealTTL).Unix()))
	plain = append(plain, b...)
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, []byte(purpose+"\x00"+sess.key)))
}

// unseal opens a value of seal for the session and purpose, unless it expired.
func (u *ui) unseal(sess *session, purpose, sealed string) ([]byte, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(sealed)
	aead := u.aead()
	if err != nil || sess == nil || len(raw) < aead.NonceSize() {
		return nil, false
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(purpose+"\x00"+sess.key))
	if err != nil || len(plain) < 8 || u.s.now().Unix() > int64(binary.BigEndian.Uint64(plain)) {
		return nil, false
	}
	return plain[8:], true
}

// aead is AES-256-GCM under a key of its own derived from the UI's key.
func (u *ui) aead() cipher.AEAD {
	block, err := aes.NewCipher(u.sign([]byte("seal")))
	if err != nil {
		panic(err) // a 32-byte key: never
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

// flashMAC authenticates a one-line result of this console.
func (u *ui) flashMAC(done string) string {
	return base64.RawURLEncoding.EncodeToString(u.sign([]byte("flash"), []byte(done))[:16])
}

// routes registers the UI's pages on mux: every path but /v1/ (the API).
func (u *ui) routes(mux *http.ServeMux) {
	static, _ := fs.Sub(uiFiles, "ui/static")
	files := http.FileServerFS(static)
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers(w)
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	})))
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/static/favicon.svg", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /signin", u.signIn)
	mux.HandleFunc("POST /signin", u.signIn)
	mux.Handle("POST /signout", u.signedIn(u.signOut))
	mux.HandleFunc("GET /oidc/login", u.oidcStart)
	mux.HandleFunc("GET "+oidcCallback, u.oidcCallback)
	pg := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, u.signedIn(u.permittedPage(pattern, h))) }
	pg("GET /{$}", u.overview)
	u.sourcePages(pg)
	u.destinationPages(pg)
	u.audiencePages(pg)
	u.deletionPages(pg)
	u.auditPages(pg)
	u.teamPages(pg)
	pg("GET /settings", u.settings)
	pg("GET /settings/export", u.exportYAML)
	pg("POST /settings/reencrypt", u.reencrypt)
	pg("POST /settings/import", u.importConfigPage)
	mux.Handle("/", u.signedIn(func(w http.ResponseWriter, r *http.Request) {
		u.render(w, r, http.StatusNotFound, "error", page{Title: "Not found", Error: "There is no page " + r.URL.Path + "."})
	}))
}
