package devstack_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestConsoleRetryNowInABrowser (docs/console.md#the-web-ui): a message fails and waits in a
// 30 s retry tier; in the browser, the Messages tab finds it by user, its page shows it retrying
// with the endpoint's 503 and "Retry now"; the endpoint is back, "Retry now" delivers it within
// 2 s (not at its tier), and the page, reloaded, shows it delivered. No console error or CSP
// violation on the way. Its own stack: the walk of TestConsoleInABrowser dead-letters within
// seconds (RETRY_WINDOW 3s), so nothing waits there long enough to be retried by hand.
func TestConsoleRetryNowInABrowser(t *testing.T) {
	var mu sync.Mutex
	up := false
	var got []time.Time
	rc := servicetest.NewReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("X-Message-Id") != "rn-browser-1" {
			return
		}
		got = append(got, time.Now())
		if !up {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("maintenance until 11:00"))
		}
	})
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	cs := startConsoleStack(t, "", map[string]string{"RETRY_SCHEDULE": "30s"})
	b := newUIBrowser(t, cs.api)
	key := cs.createSource(t, "web")
	cs.createDestination(t, "hooks", "retry-now-browser-secret", []string{"web"}, rc.URL+"/segment")
	cs.mustSend(t, key, "/v1/track", `{"type":"track","userId":"rn-user","event":"Plan Upgraded","messageId":"rn-browser-1"}`)

	b.open("/")
	b.do("signing in",
		chromedp.SendKeys(chromedp.ID("token"), consoleTestToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Sections"]`)))
	// The message, found by its user, retrying after the 503 (a page does not refresh itself).
	for until := time.Now().Add(15 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		b.open("/destinations/hooks/messages/rn-browser-1")
		if strings.Contains(eval[string](b, `document.body.textContent`), "maintenance until 11:00") {
			break
		}
		if time.Now().After(until) {
			t.Fatal("the message page does not show the endpoint's 503 after 15 s")
		}
	}
	b.open("/destinations/hooks?tab=messages&userId=rn-user")
	b.do("opening the message from the table", chromedp.Click(chromedp.CSS(`section[aria-labelledby=msgs] table a[href="/destinations/hooks/messages/rn-browser-1"]`)),
		chromedp.WaitVisible(chromedp.ID("attempts")))
	if got := b.text("section[aria-labelledby=what]"); !strings.Contains(got, "retrying") || !strings.Contains(got, "Plan Upgraded") {
		t.Errorf("the waiting message's page: %q", got)
	}
	b.shot("message-retrying")
	b.noProblems("the waiting message's page")

	mu.Lock()
	up = true
	mu.Unlock()
	start := time.Now()
	b.do("retry now", chromedp.Click(chromedp.CSS(`form[action$="/retry"] button`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
	b.waitText(".flash", "Sent now", 2*time.Second)
	servicetest.Eventually(t, 2*time.Second, "the message delivered by retry now", func() bool { return count() >= 2 })
	t.Logf("delivered %v after retry now", time.Since(start))
	for until := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		b.open("/destinations/hooks/messages/rn-browser-1")
		if strings.Contains(b.text("section[aria-labelledby=what]"), "delivered") {
			break
		}
		if time.Now().After(until) {
			t.Fatalf("the message page does not show it delivered: %q", b.text("section[aria-labelledby=what]"))
		}
	}
	b.shot("message-delivered")
	b.noProblems("retry now")
	if n := count(); n != 2 {
		t.Errorf("the endpoint got the message %d times, want 2: the first attempt and the retry now", n)
	}
}
