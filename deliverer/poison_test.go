package deliverer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestPoisonMessageIDsDoNotOpenTheBreaker: deliveries whose messageId no HTTP header may carry
// (a control character, CR LF, a trailing space) reach webhooks.deliveries ahead of legitimate
// ones for the same host — from a producer other than ingest, which refuses them. They are
// dead-lettered at once as invalid_request, nothing is sent for them, and they never count
// toward the host's circuit breaker: the legitimate deliveries behind them arrive promptly,
// none deferred. Before, each was a connection failure (Go refuses the header), retried for
// hours, and a few of them opened the breaker of every destination on the host
// (docs/delivery.md#outcome-one-function-decides).
func TestPoisonMessageIDsDoNotOpenTheBreaker(t *testing.T) {
	rc := newReceiver(t, ok200)
	h := newHarness(t, "1s,2s,3s", destYAML(dest("orders", []string{rc.URL}, ""), dest("audit", []string{rc.URL}, "")))
	dlq := h.reader(schemas.TopicDLQ)
	cfg := h.config()
	cfg.BreakerFailures = 3 // three consecutive failures open it: the poison is ten times that
	reg, _ := h.run(cfg)

	var poison []string
	for i := range 10 {
		n := string(rune('0' + i))
		poison = append(poison, "p"+n+"\a", "x"+n+"\r\nX-Injected: 1", "dd-"+n+" ")
	}
	h.send("orders", poison...)
	sent := time.Now()
	legit := messageIDs(0, 20)
	h.send("orders", legit[:10]...)
	h.send("audit", legit[10:]...)

	// Until the legitimate ones arrived, watch for an open breaker.
	breakerSeen := false
	for deadline := time.Now().Add(10 * time.Second); len(rc.requests()) < len(legit) && time.Now().Before(deadline); {
		breakerSeen = breakerSeen || counter(t, reg, "tributary_deliverer_open_breakers") > 0
		time.Sleep(5 * time.Millisecond)
	}
	got := rc.waitRequests(t, len(legit), time.Second)
	for _, r := range got {
		if late := r.at.Sub(sent); late > 3*time.Second {
			t.Errorf("%s delivered %v after it was sent: held back", r.header.Get("X-Message-Id"), late)
		}
		if !strings.HasPrefix(r.header.Get("X-Message-Id"), "m") {
			t.Errorf("the receiver got message %q", r.header.Get("X-Message-Id"))
		}
	}
	recs := dlq.waitFor(len(poison), 5*time.Second) // at once: not retried
	for _, r := range recs {
		if hdr(r, "reason") != "invalid_request" || hdr(r, "attempt") != "1" || !strings.Contains(hdr(r, "last-error"), "messageId") {
			t.Errorf("DLQ record %q: reason %q attempt %q last-error %q", hdr(r, "message-id"), hdr(r, "reason"), hdr(r, "attempt"), hdr(r, "last-error"))
		}
	}
	if breakerSeen {
		t.Error("a breaker opened")
	}
	if n := counter(t, reg, "tributary_deliverer_deferred_total"); n != 0 {
		t.Errorf("%v records deferred to a tier, want 0", n)
	}
	if n := counter(t, reg, "tributary_deliverer_retried_total"); n != 0 {
		t.Errorf("%v records retried, want 0", n)
	}
	if n := len(rc.requests()); n != len(legit) {
		t.Errorf("%d requests, want the %d legitimate ones only", n, len(legit))
	}
}
