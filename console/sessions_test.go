package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// as returns a browser of h with b's cookies and CSRF token: the same session, sent to another
// console (or replayed by whoever copied the cookie).
func (b *browser) as(h *harness) *browser {
	u, _ := url.Parse(b.h.srv.URL)
	c := h.newBrowser(b.t, false)
	to, _ := url.Parse(h.srv.URL)
	c.c.Jar.SetCookies(to, b.c.Jar.Cookies(u))
	c.csrf = b.csrf
	return c
}

// TestSignOutRevokesSession: after sign-out, the old session cookie and its CSRF token are
// refused at once by the console that signed out (a page goes to sign-in, a form POST is 401 and
// changes nothing) and within a second by another console on the same broker; a console that
// starts afterwards refuses it too (the view is rebuilt from tributary.sessions). Other
// sessions stay valid.
func TestSignOutRevokesSession(t *testing.T) {
	a := newHarness(t, nil)
	b := startConsole(t, a.env, nil)

	user := a.signIn(t)
	other := a.signIn(t)
	stolen := user.as(a) // a copy of the cookie, as whoever took it has it
	onB := user.as(b)
	if p := onB.get("/"); p.Status != http.StatusOK {
		t.Fatalf("the session on the other console: %d", p.Status)
	}

	if p := user.post("/signout", nil); p.Status != http.StatusSeeOther || p.Location != "/signin" {
		t.Fatalf("sign-out: %d %s %s", p.Status, p.Location, p.Body)
	}
	// At once, on this console.
	if p := stolen.post("/sources/new", url.Values{"id": {"after-signout"}, "name": {"x"}}); p.Status != http.StatusUnauthorized {
		t.Errorf("a form POST with the signed-out cookie and its CSRF token: %d, want 401: %s", p.Status, p.Body)
	}
	if p := stolen.get("/sources"); p.Status != http.StatusSeeOther || p.Location != "/signin?next=%2Fsources" {
		t.Errorf("a page with the signed-out cookie: %d %s, want the sign-in", p.Status, p.Location)
	}
	// Within a second, on the other console.
	start := time.Now()
	servicetest.Eventually(t, 5*time.Second, "the revocation on the other console", func() bool { return onB.get("/").Status == http.StatusSeeOther })
	if took := time.Since(start); took > time.Second {
		t.Errorf("the other console refused the session after %s, want within 1s", took)
	}
	if p := onB.post("/sources/new", url.Values{"id": {"after-signout-b"}, "name": {"x"}}); p.Status != http.StatusUnauthorized {
		t.Errorf("a form POST to the other console: %d, want 401", p.Status)
	}
	// A console started afterwards reads the revocation before it is ready.
	c := startConsole(t, a.env, nil)
	if p := user.as(c).get("/"); p.Status != http.StatusSeeOther {
		t.Errorf("a console started after the sign-out accepts the session: %d", p.Status)
	}
	for _, id := range []string{"after-signout", "after-signout-b"} {
		if _, ok := a.env.Store.Snapshot().SourceByID(id); ok {
			t.Errorf("a refused form created source %s", id)
		}
	}
	// Another browser's session is not affected.
	if p := other.get("/"); p.Status != http.StatusOK {
		t.Errorf("another session after a sign-out: %d", p.Status)
	}
}

// TestTokenChangeSignsEveryoneOut: a console with another CONSOLE_TOKEN refuses the sessions
// of the old one.
func TestTokenChangeSignsEveryoneOut(t *testing.T) {
	a := newHarness(t, nil)
	user := a.signIn(t)
	b := startConsole(t, a.env, func(c *console.Config) { c.Token = "a-new-console-token-9f8e7d6c5b4a" })
	if p := user.as(b).get("/"); p.Status != http.StatusSeeOther {
		t.Errorf("a session of the old token: %d, want the sign-in", p.Status)
	}
}

// TestSignOutEndsLiveStream: a live stream of the UI ends when its session is signed out.
func TestSignOutEndsLiveStream(t *testing.T) {
	h := newHarness(t, nil)
	user := h.signIn(t)
	s := openStream(t, user.as(h).c, h.srv.URL+"/sources/web/live", "")
	if !strings.Contains(s.first, ": watching source web") {
		t.Fatalf("the stream: %d %q", s.status, s.first)
	}
	user.post("/signout", nil)
	servicetest.Eventually(t, 2*time.Second, "the signed-out session's stream to end", func() bool { return h.liveStreams(t) == 0 })
}
