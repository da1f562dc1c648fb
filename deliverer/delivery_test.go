package deliverer_test

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/schemas"
)

func ok200(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusOK) }

// docs/receivers.md#what-arrives: method, headers, static headers, the exact body, X-Signature present
// and correct with a secret, absent without; Standard Webhooks with both secrets of a rotation.
func TestDeliveryRequestShape(t *testing.T) {
	signed, plain, std := newReceiver(t, ok200), newReceiver(t, ok200), newReceiver(t, ok200)
	h := newHarness(t, "1s,2s,3s", destYAML(
		dest("signed", []string{signed.URL + "/hooks/segment?team=1"}, ", sharedSecret: s3cret"),
		dest("plain", []string{plain.URL}, ""),
		dest("std", []string{std.URL}, ", sharedSecret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, standardWebhooks: true, previousSharedSecret: old-secret"),
	))
	h.run(h.config())
	h.send("signed", "m-signed")
	h.send("plain", "m-plain")
	h.send("std", "m-std")

	r := signed.waitRequests(t, 1, 10*time.Second)[0]
	if string(r.body) != string(body("m-signed")) {
		t.Errorf("body %s, want the record's exact bytes", r.body)
	}
	if r.path != "/hooks/segment" {
		t.Errorf("path %q", r.path)
	}
	for k, want := range map[string]string{
		"User-Agent": "Tributary/1.0", "Content-Type": "application/json", "X-Team": "growth", "X-Env": "test",
		"X-Message-Id": "m-signed", "X-Signature": schemas.XSignature("s3cret", body("m-signed")),
	} {
		if got := r.header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if sig := r.header.Get("X-Signature"); !schemas.VerifyXSignature("s3cret", r.body, sig) || strings.ToLower(sig) != sig {
		t.Errorf("X-Signature %q does not verify or is not lowercase hex", sig)
	}

	p := plain.waitRequests(t, 1, 10*time.Second)[0]
	if _, has := p.header["X-Signature"]; has {
		t.Errorf("X-Signature sent without a shared secret: %v", p.header)
	}
	if p.header.Get("webhook-signature") != "" {
		t.Error("Standard Webhooks headers sent without standardWebhooks")
	}

	s := std.waitRequests(t, 1, 10*time.Second)[0]
	ts, err := strconv.ParseInt(s.header.Get("webhook-timestamp"), 10, 64)
	if err != nil || time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
		t.Errorf("webhook-timestamp %q", s.header.Get("webhook-timestamp"))
	}
	sigs := s.header.Get("webhook-signature")
	if s.header.Get("webhook-id") != "m-std" || len(strings.Fields(sigs)) != 2 ||
		!schemas.VerifyStandardWebhooks("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "m-std", ts, s.body, sigs) ||
		!schemas.VerifyStandardWebhooks("old-secret", "m-std", ts, s.body, sigs) {
		t.Errorf("standard webhooks headers id=%q sig=%q", s.header.Get("webhook-id"), sigs)
	}
	if s.header.Get("X-Signature") != schemas.XSignature("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", s.body) {
		t.Error("X-Signature must be sent beside Standard Webhooks")
	}
}

// docs/delivery.md#one-attempt: several URLs; one success is enough and the failed URL is not retried.
func TestSeveralURLsOneSuccessIsEnough(t *testing.T) {
	bad := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(500) })
	good := newReceiver(t, ok200)
	h := newHarness(t, "1s,2s,3s", destYAML(dest("multi", []string{bad.URL, good.URL}, "")))
	reg, _ := h.run(h.config())
	h.send("multi", "m1")
	good.waitRequests(t, 1, 10*time.Second)
	bad.waitRequests(t, 1, 10*time.Second)
	time.Sleep(2500 * time.Millisecond) // past the first retry's due time
	if n, m := len(good.requests()), len(bad.requests()); n != 1 || m != 1 {
		t.Fatalf("good got %d, failing URL got %d requests; want 1 and 1 (no retry)", n, m)
	}
	if got := counter(t, reg, "tributary_deliverer_retried_total"); got != 0 {
		t.Fatalf("retried %v, want 0", got)
	}
	if got := counter(t, reg, "tributary_deliverer_delivered_total", "destination", "multi"); got != 1 {
		t.Fatalf("delivered %v, want 1", got)
	}
}

// docs/delivery.md#retry-tiers: a 5xx is retried until success; each retry starts no earlier than its delay and
// no later than delay + 1 s (tier timing); every attempt is in webhooks.attempts.
//
// It runs in virtual time (testing/synctest, kfake's virtual network): the delays are exact,
// and it takes no real time, under the race detector too.
func TestFiveHundredRetriedUntilSuccessOnTime(t *testing.T) {
	synctest.Test(t, testFiveHundredRetriedUntilSuccessOnTime)
}

func testFiveHundredRetriedUntilSuccessOnTime(t *testing.T) {
	const port = 9100
	h := newVirtualHarness(t, "1s,2s,3s", destYAML(dest("flaky", []string{"http://localhost:9100/hook"}, "")))
	rc := &receiver{h.env.VirtualReceiver(port, func(n int, _ *http.Request, w http.ResponseWriter) {
		if n <= 3 {
			w.WriteHeader([]int{500, 502, 503}[n-1])
			return
		}
		w.WriteHeader(204)
	})}
	attempts := h.reader(schemas.TopicAttempts)
	h.run(h.config())
	h.send("flaky", "m1")
	got := rc.waitRequests(t, 4, 20*time.Second)
	for i, delay := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
		gap := got[i+1].at.Sub(got[i].at)
		if gap < delay || gap > delay+time.Second {
			t.Errorf("retry %d started %v after the failure, want within [%v, %v]", i+1, gap, delay, delay+time.Second)
		}
		if got[i+1].header.Get("X-Message-Id") != "m1" {
			t.Errorf("retry %d lost X-Message-Id", i+1)
		}
	}
	recs := attempts.waitFor(4, 10*time.Second)
	for i, r := range recs[:4] {
		if !strings.Contains(string(r.Value), `"attempt":`+strconv.Itoa(i+1)) || string(r.Key) != "flaky" {
			t.Errorf("attempt record %d: %s", i+1, r.Value)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	if n := len(rc.requests()); n != 4 {
		t.Fatalf("%d requests, want 4 (no retry after success)", n)
	}
}

// docs/delivery.md#retry-tiers: no answer within 5 s (DELIVERY_TIMEOUT, compressed here) is retried.
func TestTimeoutRetried(t *testing.T) {
	rc := newReceiver(t, func(n int, r *http.Request, w http.ResponseWriter) {
		if n == 1 {
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
			return
		}
		w.WriteHeader(200)
	})
	h := newHarness(t, "1s,2s,3s", destYAML(dest("slow", []string{rc.URL}, "")))
	cfg := h.config()
	cfg.Timeout = 300 * time.Millisecond
	reg, _ := h.run(cfg)
	h.send("slow", "m1")
	rc.waitRequests(t, 2, 10*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for counter(t, reg, "tributary_deliverer_delivered_total") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("not delivered after the timeout")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := counter(t, reg, "tributary_deliverer_attempts_total", "status", "timeout"); n != 1 {
		t.Fatalf("timeout attempts %v, want 1", n)
	}
}

// docs/delivery.md#tls: a self-signed certificate fails the handshake: no request is sent, the
// error is recorded, and the record goes to the DLQ (not retried).
func TestSelfSignedCertificateRefused(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { got.Add(1) }))
	defer srv.Close()
	h := newHarness(t, "1s,2s,3s", destYAML(dest("tls", []string{srv.URL}, "")))
	dlq := h.reader(schemas.TopicDLQ)
	h.run(h.config())
	h.send("tls", "m1")
	r := dlq.waitFor(1, 10*time.Second)[0]
	if hdr(r, "reason") != "tls" || !strings.Contains(hdr(r, "last-error"), "certificate") {
		t.Fatalf("DLQ reason %q, last-error %q", hdr(r, "reason"), hdr(r, "last-error"))
	}
	time.Sleep(1500 * time.Millisecond)
	if n := got.Load(); n != 0 {
		t.Fatalf("the server received %d requests through a refused certificate", n)
	}
}

// A 4xx other than 408/429 is permanent: one request, then the DLQ with reason and status.
func TestFourHundredNotRetried(t *testing.T) {
	rc := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(404) })
	h := newHarness(t, "1s,2s,3s", destYAML(dest("gone", []string{rc.URL}, "")))
	dlq := h.reader(schemas.TopicDLQ)
	h.run(h.config())
	h.send("gone", "m1")
	r := dlq.waitFor(1, 10*time.Second)[0]
	if hdr(r, "reason") != "status_4xx" || hdr(r, "last-status") != "404" || hdr(r, "message-id") != "m1" || string(r.Value) != string(body("m1")) {
		t.Fatalf("DLQ record: reason %q status %q headers %v", hdr(r, "reason"), hdr(r, "last-status"), r.Headers)
	}
	time.Sleep(1500 * time.Millisecond)
	if n := len(rc.requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// RETRY_WINDOW: no attempt starts later than the window after the first; what still fails goes
// to the DLQ.
func TestRetryWindowExpiryToDLQ(t *testing.T) {
	rc := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(503) })
	h := newHarness(t, "1s,1s,1s,1s,1s,1s,1s,1s", destYAML(dest("down", []string{rc.URL}, "")))
	dlq := h.reader(schemas.TopicDLQ)
	cfg := h.config()
	cfg.RetryWindow = 2500 * time.Millisecond
	h.run(cfg)
	h.send("down", "m1")
	r := dlq.waitFor(1, 15*time.Second)[0]
	if hdr(r, "reason") != "retry_window_expired" || hdr(r, "last-status") != "503" {
		t.Fatalf("reason %q status %q", hdr(r, "reason"), hdr(r, "last-status"))
	}
	reqs := rc.requests()
	if last := reqs[len(reqs)-1].at.Sub(reqs[0].at); last > cfg.RetryWindow {
		t.Fatalf("an attempt started %v after the first, past the %v window", last, cfg.RetryWindow)
	}
	if len(reqs) < 3 {
		t.Fatalf("%d attempts inside the window, want 3", len(reqs))
	}
}

// 429 with Retry-After: the next attempt waits at least as long as asked (within the window).
func TestRetryAfterHonoured(t *testing.T) {
	rc := newReceiver(t, func(n int, _ *http.Request, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(429)
			return
		}
		w.WriteHeader(200)
	})
	h := newHarness(t, "1s,2s,3s", destYAML(dest("busy", []string{rc.URL}, "")))
	h.run(h.config())
	h.send("busy", "m1")
	got := rc.waitRequests(t, 2, 10*time.Second)
	if gap := got[1].at.Sub(got[0].at); gap < 2*time.Second || gap > 3*time.Second {
		t.Fatalf("retry after %v, want 2 s (Retry-After) to 3 s", gap)
	}
}

// The address guard refuses loopback unless WEBHOOK_ALLOW_PRIVATE; the name localhost, resolved
// at dial time, is refused too, and so are both written as absolute names with a trailing dot
// ("127.0.0.1.", "localhost.": before, looked up in DNS and retried as connection failures).
// Nothing reaches the server.
func TestPrivateAddressGuard(t *testing.T) {
	rc := newReceiver(t, ok200)
	byName := strings.Replace(rc.URL, "127.0.0.1", "localhost", 1)
	asNumber := strings.Replace(rc.URL, "127.0.0.1", "2130706433", 1) // 127.0.0.1 spelled as one number
	ipDot := strings.Replace(rc.URL, "127.0.0.1", "127.0.0.1.", 1)
	nameDot := strings.Replace(rc.URL, "127.0.0.1", "localhost.", 1)
	h := newHarness(t, "1s,2s,3s", destYAML(dest("ip", []string{rc.URL}, ""), dest("name", []string{byName}, ""), dest("number", []string{asNumber}, ""),
		dest("ipdot", []string{ipDot}, ""), dest("namedot", []string{nameDot}, "")))
	dlq := h.reader(schemas.TopicDLQ)
	cfg := h.config()
	cfg.AllowPrivate = false
	h.run(cfg)
	h.send("ip", "m1")
	h.send("name", "m2")
	h.send("number", "m3")
	h.send("ipdot", "m4")
	h.send("namedot", "m5")
	recs := dlq.waitFor(5, 10*time.Second)
	for _, r := range recs {
		if hdr(r, "reason") != "blocked_address" || hdr(r, "attempt") != "1" { // at once: not retried
			t.Errorf("%s: reason %q (%s)", hdr(r, "message-id"), hdr(r, "reason"), hdr(r, "last-error"))
		}
	}
	if n := len(rc.requests()); n != 0 {
		t.Fatalf("%d requests reached a loopback server through the guard", n)
	}
}

// maxRequestsPerSecond paces a destination without dropping anything.
func TestRateLimitPacesWithoutDropping(t *testing.T) {
	rc := newReceiver(t, ok200)
	h := newHarness(t, "1s,2s,3s", destYAML(dest("paced", []string{rc.URL}, ", maxRequestsPerSecond: 20")))
	h.run(h.config())
	h.send("paced", messageIDs(0, 60)...)
	got := rc.waitRequests(t, 60, 20*time.Second)
	if took := got[59].at.Sub(got[0].at); took < 1900*time.Millisecond {
		t.Fatalf("60 requests in %v at 20/s, want >= ~2 s (burst 20, then paced)", took)
	}
}

// WEBHOOK_CA_FILES: an endpoint whose certificate chains to an extra trusted CA is delivered to.
func TestExtraTrustedCA(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { got.Add(1) }))
	defer srv.Close()
	pemFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, "1s,2s,3s", destYAML(dest("private-ca", []string{srv.URL}, "")))
	cfg := h.config()
	cfg.CAFiles = []string{pemFile}
	reg, _ := h.run(cfg)
	h.send("private-ca", "m1")
	deadline := time.Now().Add(10 * time.Second)
	for counter(t, reg, "tributary_deliverer_delivered_total") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("not delivered through the extra CA (requests %d)", got.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cfg.CAFiles = []string{filepath.Join(t.TempDir(), "missing.pem")}
	if _, err := deliverer.New(cfg, deliverer.Deps{Config: func() deliverer.Destinations { return h.store.Snapshot() }}); err == nil || !strings.Contains(err.Error(), "WEBHOOK_CA_FILES") {
		t.Fatalf("a missing CA file: %v", err)
	}
}
