package deliverer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestClassify(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hdr := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	for _, c := range []struct {
		name   string
		status int
		header http.Header
		err    error
		class  Class
		after  time.Duration
	}{
		{"200", 200, nil, nil, Success, 0},
		{"204", 204, nil, nil, Success, 0},
		{"299", 299, nil, nil, Success, 0},
		{"301 is not followed", 301, nil, nil, Status4xx, 0},
		{"400", 400, nil, nil, Status4xx, 0},
		{"401", 401, nil, nil, Status4xx, 0},
		{"404", 404, nil, nil, Status4xx, 0},
		{"408 retryable", 408, nil, nil, Status408, 0},
		{"429 retryable", 429, nil, nil, Status429, 0},
		{"429 Retry-After seconds", 429, hdr("120"), nil, Status429, 2 * time.Minute},
		{"429 Retry-After date", 429, hdr(now.Add(90 * time.Second).Format(http.TimeFormat)), nil, Status429, 90 * time.Second},
		{"429 Retry-After in the past", 429, hdr(now.Add(-time.Hour).Format(http.TimeFormat)), nil, Status429, 0},
		{"429 Retry-After garbage", 429, hdr("soon"), nil, Status429, 0},
		{"500", 500, nil, nil, Status5xx, 0},
		{"503 Retry-After", 503, hdr("7"), nil, Status5xx, 7 * time.Second},
		{"599", 599, nil, nil, Status5xx, 0},
		{"deadline", 0, nil, fmt.Errorf("post: %w", context.DeadlineExceeded), Timeout, 0},
		{"net timeout", 0, nil, &url.Error{Op: "Post", URL: "u", Err: &net.OpError{Op: "dial", Err: timeoutErr{}}}, Timeout, 0},
		{"refused", 0, nil, &url.Error{Op: "Post", URL: "u", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, ConnError, 0},
		{"dns", 0, nil, &url.Error{Op: "Post", URL: "u", Err: &net.DNSError{Err: "no such host", Name: "x"}}, ConnError, 0},
		{"self-signed", 0, nil, &url.Error{Op: "Post", URL: "u", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}, TLSError, 0},
		{"wrong host", 0, nil, x509.HostnameError{Host: "x", Certificate: &x509.Certificate{}}, TLSError, 0},
		{"expired", 0, nil, x509.CertificateInvalidError{Reason: x509.Expired}, TLSError, 0},
		{"guard", 0, nil, &url.Error{Op: "Post", URL: "u", Err: &net.OpError{Op: "dial", Err: fmt.Errorf("%w: 10.0.0.1", ErrBlockedAddress)}}, Blocked, 0},
		{"invalid request", 0, nil, &requestError{errors.New(`net/http: invalid header field value for "X-Message-Id"`)}, InvalidRequest, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			class, after := Classify(c.status, c.header, c.err, now)
			if class != c.class || after != c.after {
				t.Errorf("Classify = %s, %v; want %s, %v", class, after, c.class, c.after)
			}
		})
	}
	for class, retry := range map[Class]bool{Timeout: true, ConnError: true, Status5xx: true, Status408: true, Status429: true,
		Status4xx: false, TLSError: false, Blocked: false, InvalidURL: false, InvalidRequest: false, Unavailable: false, Success: false} {
		if class.Retryable() != retry {
			t.Errorf("%s.Retryable() = %v", class, !retry)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestVerdict(t *testing.T) {
	for _, c := range []struct {
		name    string
		results []urlResult
		want    Class
		after   time.Duration
	}{
		{"one success among failures", []urlResult{{Class: Status5xx}, {Class: Success}, {Class: Status4xx}}, Success, 0},
		{"retryable beats permanent", []urlResult{{Class: Status4xx}, {Class: Timeout}}, Timeout, 0},
		{"all permanent", []urlResult{{Class: TLSError}, {Class: Status4xx}}, TLSError, 0},
		{"longest Retry-After", []urlResult{{Class: Status429, RetryAfter: time.Second}, {Class: Status5xx, RetryAfter: 3 * time.Second}}, Status429, 3 * time.Second},
	} {
		got, after, _ := verdict(c.results)
		if got != c.want || after != c.after {
			t.Errorf("%s: verdict %s %v, want %s %v", c.name, got, after, c.want, c.after)
		}
	}
}

func TestBlockedAddr(t *testing.T) {
	for addr, blocked := range map[string]bool{
		"127.0.0.1": true, "127.9.9.9": true, "::1": true, "10.1.2.3": true, "172.16.0.1": true, "172.31.255.255": true,
		"192.168.1.1": true, "169.254.169.254": true, "fe80::1": true, "fd00::1": true, "fc00::1": true, "224.0.0.1": true,
		"ff02::1": true, "0.0.0.0": true, "::": true, "100.100.100.200": true, "100.64.0.1": true, "::ffff:127.0.0.1": true,
		"::ffff:10.0.0.1": true, "fd00:ec2::254": true, "64:ff9b::a00:1": true, "198.18.0.1": true, "255.255.255.255": true,
		"8.8.8.8": false, "1.1.1.1": false, "172.32.0.1": false, "2606:4700:4700::1111": false, "100.128.0.1": false, "203.0.113.9": false,
	} {
		if got := BlockedAddr(netip.MustParseAddr(addr)) != ""; got != blocked {
			t.Errorf("BlockedAddr(%s) blocked=%v, want %v", addr, got, blocked)
		}
	}
	// IPv6 forms that carry an IPv4 address a relay would reach: checked for that address.
	for addr, blocked := range map[string]bool{
		"2002:7f00:1::1": true, "2002:a00:1::": true, "2002:c0a8:101::1": true, "2002:a9fe:a9fe::": true, // 6to4 of 127/8, 10/8, 192.168/16, metadata
		"2002:808:808::1":                      false,                 // 6to4 of 8.8.8.8
		"2001:0:4136:e378:8000:63bf:80ff:fffe": true,                  // Teredo, client 127.0.0.1 (inverted)
		"2001:0:a00:1::f7f7:f7f7":              true,                  // Teredo, server 10.0.0.1
		"2001:0:4136:e378:8000:63bf:f7f7:f7f7": false,                 // Teredo, server 65.54.227.120, client 8.8.8.8
		"::7f00:1":                             true, "::a00:1": true, // IPv4-compatible
		"64:ff9b:1::a00:1": true, // local-use NAT64
	} {
		if got := BlockedAddr(netip.MustParseAddr(addr)) != ""; got != blocked {
			t.Errorf("BlockedAddr(%s) blocked=%v, want %v (%s)", addr, got, blocked, BlockedAddr(netip.MustParseAddr(addr)))
		}
	}
	// This host's own addresses, public ones included.
	if ifAddrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifAddrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && BlockedAddr(p.Addr()) == "" {
				t.Errorf("BlockedAddr(%s), an address of this host, is not blocked", p.Addr())
			}
		}
	}
	// IPv4 addresses spelled oddly are refused before any lookup, whatever they point at.
	for host, odd := range map[string]bool{
		"2130706433": true, "0x7f000001": true, "0177.0.0.1": true, "127.1": true, "0x7f.1": true, "10.0x1": true, "017700000001": true,
		"127.0.0.1": false, "hooks.example.com": false, "1password.com": false, "[::1]": false, "8.8.8.8": false, "example.123abc": false,
	} {
		if got := oddIPv4(host); got != odd {
			t.Errorf("oddIPv4(%q) = %v, want %v", host, got, odd)
		}
	}
	dialled := false
	dial := guardDial(func(context.Context, string, string) (net.Conn, error) {
		dialled = true
		return nil, errors.New("dialled")
	}, true)
	for _, addr := range []string{"2130706433:80", "0x7f000001:443", "0177.0.0.1:80", "127.1:8080"} {
		if _, err := dial(context.Background(), "tcp", addr); !errors.Is(err, ErrBlockedAddress) || dialled {
			t.Errorf("dial(%s) = %v (dialled %v), want ErrBlockedAddress before any lookup", addr, err, dialled)
		}
		if c := classifyError(fmt.Errorf("Post: %w", fmt.Errorf("dial: %w", ErrBlockedAddress))); c != Blocked || c.Retryable() {
			t.Errorf("a refused odd address classifies as %s, want %s (not retried)", c, Blocked)
		}
	}
	if err := guardControl("tcp", "169.254.169.254:80", nil); !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("guardControl(metadata) = %v", err)
	}
	if err := guardControl("tcp", "93.184.216.34:443", nil); err != nil {
		t.Errorf("guardControl(public) = %v", err)
	}
}

func TestHostsBoundAndBreaker(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := newHosts(2, 0, 3, 10*time.Second, time.Minute, func(start task) { start() })
	ok1, _, _ := h.acquire("a:80", 0, now)
	ok2, _, _ := h.acquire("a:80", 0, now)
	ok3, why, _ := h.acquire("a:80", 0, now)
	if !ok1 || !ok2 || ok3 || why != refusedBusy {
		t.Fatalf("bound: %v %v %v %s", ok1, ok2, ok3, why)
	}
	if ok, _, _ := h.acquire("b:80", 0, now); !ok {
		t.Fatal("another host must not be limited by a's bound")
	}
	h.release("a:80", hostDown, signalNone, 0, 0, now)
	h.release("a:80", hostDown, signalNone, 0, 0, now)
	if ok, _, _ := h.acquire("a:80", 0, now); !ok {
		t.Fatal("two failures of three: still closed")
	}
	h.release("a:80", hostDown, signalNone, 0, 0, now) // third consecutive failure: opens
	ok, why, wait := h.acquire("a:80", 0, now.Add(time.Second))
	if ok || why != refusedBreaker || wait != 9*time.Second {
		t.Fatalf("open breaker: %v %s %v", ok, why, wait)
	}
	if len(h.openBreakers()) != 1 {
		t.Fatal("open breakers gauge")
	}
	later := now.Add(11 * time.Second)
	if ok, _, _ := h.acquire("a:80", 0, later); !ok {
		t.Fatal("after the cooldown one trial is admitted")
	}
	if ok, why, _ := h.acquire("a:80", 0, later); ok || why != refusedBreaker {
		t.Fatal("only one trial at a time")
	}
	h.release("a:80", hostDown, signalNone, 0, 0, later) // trial failed: reopen for twice the cooldown
	if _, _, wait := h.acquire("a:80", 0, later); wait != 20*time.Second {
		t.Fatalf("reopened for %v, want 20s", wait)
	}
	again := later.Add(21 * time.Second)
	if ok, _, _ := h.acquire("a:80", 0, again); !ok {
		t.Fatal("second trial")
	}
	h.release("a:80", hostUp, signalNone, 0, 0, again)
	if len(h.openBreakers()) != 0 {
		t.Fatal("a successful trial closes the breaker")
	}
}

func TestTrackerCommitsOnlyBelowTheLowestUnfinished(t *testing.T) {
	tr := newTracker()
	k := partKey{"t", 0}
	tr.assign(map[string][]int32{"t": {0}})
	gen := tr.genOf(k)
	rec := func(o int64) *kgo.Record { return &kgo.Record{Topic: "t", Partition: 0, Offset: o, LeaderEpoch: 1} }
	p0, p1, p2 := tr.add(rec(10), gen), tr.add(rec(11), gen), tr.add(rec(12), gen)
	tr.finish(p1)
	tr.finish(p2)
	if m := tr.commitMarks(true, nil); len(m) != 0 {
		t.Fatalf("committed past the unfinished offset 10: %v", m)
	}
	tr.finish(p0)
	if m := tr.commitMarks(true, nil); m["t"][0].Offset != 13 {
		t.Fatalf("marks %v, want offset 13", m)
	}
	if m := tr.commitMarks(true, nil); len(m) != 0 {
		t.Fatalf("nothing new to commit: %v", m)
	}
	p3 := tr.add(rec(13), gen)
	tr.drop(map[string][]int32{"t": {0}})
	tr.finish(p3) // finished after revocation: ignored
	if m := tr.commitMarks(false, nil); len(m) != 0 {
		t.Fatalf("revoked partition committed: %v", m)
	}
	// A record of the revoked partition dispatched after the revocation (a poll or a tier's
	// hold under way): delivered, maybe twice, but never committed by this member.
	late := tr.add(rec(14), gen)
	tr.finish(late)
	if m := tr.commitMarks(false, nil); len(m) != 0 {
		t.Fatalf("a record added after its partition was revoked was committed: %v", m)
	}
	// Assigned back: a new generation, read again from the committed offset 13. A record of the
	// old generation that comes late (offset 30, fetched before the revocation) is not tracked,
	// so it cannot move the mark past 13..29 while they are unfinished.
	tr.assign(map[string][]int32{"t": {0}})
	gen2 := tr.genOf(k)
	if gen2 == gen || gen2 == 0 {
		t.Fatalf("generation %d after %d", gen2, gen)
	}
	old := tr.add(rec(30), gen)
	tr.finish(old)
	again := tr.add(rec(13), gen2)
	if m := tr.commitMarks(false, nil); len(m) != 0 {
		t.Fatalf("an old generation's record moved the new generation's mark: %v", m)
	}
	tr.finish(again)
	if m := tr.commitMarks(true, nil); m["t"][0].Offset != 14 {
		t.Fatalf("marks %v after the partition came back, want offset 14", m)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("RETRY_SCHEDULE", "1s,2s,2s")
	t.Setenv("RETRY_WINDOW", "1m")
	t.Setenv("DELIVERY_TIMEOUT", "2s")
	t.Setenv("WEBHOOK_ALLOW_PRIVATE", "true")
	t.Setenv("DELIVERER_MAX_PER_HOST", "4")
	c, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	delays, topics := c.tiers()
	if len(c.RetrySchedule) != 3 || len(delays) != 2 || topics[1] != "webhooks.retry.2s" || c.RetryWindow != time.Minute ||
		c.Timeout != 2*time.Second || !c.AllowPrivate || c.MaxPerHost != 4 {
		t.Fatalf("config %+v", c)
	}
	t.Setenv("DELIVERY_TIMEOUT", "fast")
	t.Setenv("RETRY_SCHEDULE", "1s,-2s")
	if _, err := ConfigFromEnv(); err == nil {
		t.Fatal("bad settings accepted")
	}
}

func TestAttemptRecordIsJSON(t *testing.T) {
	d := &delivery{destID: "hooks", messageID: "m\"1\a\u00e9", attempt: 3}
	res := &urlResult{URL: "https://user:s3cret@x.example.com/a?b=c&token=abc123", Status: 503, Class: Status5xx, Latency: 12345 * time.Microsecond, Host: "x.example.com:443"}
	b := appendAttemptRecord(nil, d, res, hostLimit{limit: 32, paused: 5 * time.Second}, outcome{}, time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC))
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	// Credentials in the URL never reach the attempt log: user, password and query values are
	// redacted.
	want := map[string]any{"destinationId": "hooks", "messageId": "m\"1\a\u00e9", "url": "https://xxxxx:xxxxx@x.example.com/a?b=xxxxx&token=xxxxx", "attempt": 3.0,
		"status": 503.0, "latencyMs": 12.345, "errorClass": "status_5xx", "error": "status_5xx: HTTP 503 from x.example.com:443", "concurrencyLimit": 32.0, "pausedForMs": 5000.0, "at": "2026-01-02T03:04:05.006Z"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("attempt record\n%v\nwant\n%v", got, want)
	}
	// A test delivery's records say so.
	d.test = true
	got = nil
	if err := json.Unmarshal(appendAttemptRecord(nil, d, res, hostLimit{limit: 32}, outcome{}, time.Now()), &got); err != nil || got["test"] != true {
		t.Fatalf("test delivery's attempt record %v (%v): no \"test\":true", got, err)
	}
}

// TestTLSFailureDoesNotCountTowardTheBreaker: a refused certificate (or a request that never
// reached the host) neither opens nor closes a host's breaker; timeouts, connection errors and
// 5xx count as failures, answers as successes.
func TestTLSFailureDoesNotCountTowardTheBreaker(t *testing.T) {
	for c, want := range map[Class]hostOutcome{
		Success: hostUp, Status4xx: hostUp, Status408: hostUp, Status429: hostUp,
		Timeout: hostDown, ConnError: hostDown, Status5xx: hostDown,
		TLSError: hostUnknown, Blocked: hostUnknown, InvalidURL: hostUnknown, InvalidRequest: hostUnknown,
	} {
		if got := outcomeOf(c); got != want {
			t.Errorf("outcomeOf(%s) = %d, want %d", c, got, want)
		}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := newHosts(10, 0, 3, 10*time.Second, time.Minute, func(start task) { start() })
	for _, out := range []hostOutcome{hostDown, hostDown, hostUnknown, hostUnknown, hostUnknown} {
		h.acquire("a:443", 0, now)
		h.release("a:443", out, signalNone, 0, 0, now)
	}
	if len(h.openBreakers()) != 0 {
		t.Fatal("TLS failures opened the breaker")
	}
	h.acquire("a:443", 0, now)
	h.release("a:443", hostDown, signalNone, 0, 0, now)
	if len(h.openBreakers()) != 1 {
		t.Fatal("the third failure, TLS failures between, must open the breaker (they do not reset the count either)")
	}
}

// TestReleaseHandsAWaiterOn: a request's end hands the first waiter it lets in to the caller
// (releaseInto: its goroutine runs it next, no goroutine is started for it), starts any other
// in a goroutine of its own, and without a place to hand it to (release) starts every one.
func TestReleaseHandsAWaiterOn(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var spawned []string
	h := newHosts(1, 4, 3, 10*time.Second, time.Minute, func(start task) { start() })
	waiterNamed := func(name string) waiter {
		return waiter{start: func() task { spawned = append(spawned, name); return nil }, refuse: func(string, time.Duration) {}}
	}
	if ok, _, _ := h.acquire("a:80", 0, now); !ok {
		t.Fatal("the first request must get the slot")
	}
	for _, name := range []string{"first", "second"} {
		if res, why, _, _ := h.enqueue("a:80", waiterNamed(name), now); res != queued {
			t.Fatalf("enqueue %s: %v %s", name, res, why)
		}
	}
	var next task
	h.releaseInto(&next, "a:80", hostUp, signalAnswered, time.Millisecond, 0, now)
	if next == nil || len(spawned) != 0 {
		t.Fatalf("the waiter let in must be handed to the caller, not spawned: next %v, spawned %v", next != nil, spawned)
	}
	if again := next(); again != nil || !slices.Equal(spawned, []string{"first"}) {
		t.Fatalf("the handed waiter is the first in line: ran %v", spawned)
	}
	// Its own end, with nowhere to hand the next one to, starts it.
	h.release("a:80", hostUp, signalAnswered, time.Millisecond, 0, now)
	if !slices.Equal(spawned, []string{"first", "second"}) {
		t.Fatalf("release must start the next waiter: ran %v", spawned)
	}
	// A hand-off place already taken is not overwritten: the waiter gets a goroutine.
	if res, _, _, _ := h.enqueue("a:80", waiterNamed("third"), now); res != queued {
		t.Fatal("enqueue third")
	}
	taken := task(func() task { return nil })
	next = taken
	h.releaseInto(&next, "a:80", hostUp, signalAnswered, time.Millisecond, 0, now)
	if !slices.Equal(spawned, []string{"first", "second", "third"}) {
		t.Fatalf("with the place taken the waiter must be spawned: ran %v", spawned)
	}
}
