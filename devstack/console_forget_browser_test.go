package devstack_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleForgetsInABrowser: a source debugger open in a browser while a user is deleted
// (SUPPRESS_WITH_DELETE, processed by the real router) removes the user's events from its list
// and its detail pane, keeps the other user's, and never shows the suppressed user's later
// events (docs/console.md#what-the-console-forgets).
func TestConsoleForgetsInABrowser(t *testing.T) {
	cs := startConsoleStack(t, "", nil)
	b := newUIBrowser(t, cs.api)
	key := cs.createSource(t, "shop")
	b.open("/")
	b.do("signing in",
		chromedp.SendKeys(chromedp.ID("token"), consoleTestToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Sections"]`)))
	b.open("/sources/shop")
	b.waitText("#live-status", "Live", 10*time.Second)
	cs.mustSend(t, key, "/v1/track", `{"userId":"keep-me","event":"Kept Checkout"}`)
	cs.mustSend(t, key, "/v1/track", `{"userId":"forget-me","event":"Forgotten Checkout","properties":{"email":"forget.me@example.com"}}`)
	b.waitText("#live-events", "Forgotten Checkout", 10*time.Second)
	b.waitText("#live-events", "Kept Checkout", 10*time.Second)
	if !eval[bool](b, `(() => { const e = [...document.querySelectorAll("#live-events li button")].find(b => b.textContent.includes("Forgotten Checkout")); if (e) e.click(); return !!e; })()`) {
		t.Fatal("no button of the event")
	}
	b.do("opening the event", chromedp.WaitVisible(chromedp.ID("event-detail")))
	if d := b.text("#event-detail"); !strings.Contains(d, "forget.me@example.com") {
		t.Fatalf("event detail: %s", d)
	}

	var created struct {
		Data struct {
			RegulateID string `json:"regulateId"`
		} `json:"data"`
	}
	cs.must(t, http.StatusOK, &created, http.MethodPost, "/v1/regulations", `{"regulationType":"SUPPRESS_WITH_DELETE","subjectType":"USER_ID","subjectIds":["forget-me"]}`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		page := eval[string](b, `document.querySelector("main").textContent`)
		if !strings.Contains(page, "Forgotten Checkout") && !strings.Contains(page, "forget.me@example.com") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the debugger still shows the deleted user's event:\n%s", page)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !eval[bool](b, `document.getElementById("event-detail").hidden`) {
		t.Error("the detail pane of the forgotten event is still shown")
	}
	cs.mustSend(t, key, "/v1/track", `{"userId":"forget-me","event":"Suppressed Checkout"}`)
	cs.mustSend(t, key, "/v1/track", `{"userId":"keep-me","event":"Later Checkout"}`)
	b.waitText("#live-events", "Later Checkout", 10*time.Second)
	if page := eval[string](b, `document.querySelector("main").textContent`); strings.Contains(page, "Suppressed Checkout") || !strings.Contains(page, "Kept Checkout") {
		t.Errorf("after the deletion, the debugger shows:\n%s", page)
	}
	// Reloaded, the page shows the same.
	b.open("/sources/shop")
	b.waitText("#live-events", "Later Checkout", 10*time.Second)
	if page := eval[string](b, `document.body.innerHTML`); strings.Contains(page, "forget.me@example.com") || strings.Contains(page, "Suppressed Checkout") {
		t.Errorf("the reloaded debugger shows the deleted user's events")
	}
	b.noProblems("the debugger after a deletion")
}
