package analytics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/analytics"
)

var (
	uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	timeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
)

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		key   string
		set   func(c *analytics.Client)
		field string
	}{
		{"empty write key", "", nil, "writeKey"},
		{"FlushAt and Size differ", "wk", func(c *analytics.Client) { c.FlushAt, c.Size = 10, 30 }, "Size"},
		{"FlushAt negative", "wk", func(c *analytics.Client) { c.FlushAt = -1 }, "FlushAt"},
		{"Size too big", "wk", func(c *analytics.Client) { c.Size = analytics.MaxBatchMessages + 1 }, "Size"},
		{"FlushAfter negative", "wk", func(c *analytics.Client) { c.FlushAfter = -time.Second }, "FlushAfter"},
		{"Endpoint not http", "wk", func(c *analytics.Client) { c.Endpoint = "ftp://x" }, "Endpoint"},
		{"Endpoint no host", "wk", func(c *analytics.Client) { c.Endpoint = "http://" }, "Endpoint"},
		{"QueueSize below FlushAt", "wk", func(c *analytics.Client) { c.QueueSize, c.FlushAt = 5, 10 }, "QueueSize"},
		{"QueueSize negative", "wk", func(c *analytics.Client) { c.QueueSize = -1 }, "QueueSize"},
		{"CloseTimeout negative", "wk", func(c *analytics.Client) { c.CloseTimeout = -1 }, "CloseTimeout"},
		{"retry intervals inverted", "wk", func(c *analytics.Client) {
			c.RetryInitialInterval, c.RetryMaxInterval = time.Minute, time.Second
		}, "RetryInitialInterval"},
		{"MaxConcurrentRequests negative", "wk", func(c *analytics.Client) { c.MaxConcurrentRequests = -2 }, "MaxConcurrentRequests"},
		{"Kafka without brokers", "wk", func(c *analytics.Client) { c.Kafka = &analytics.KafkaTransport{} }, "Kafka.Brokers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := analytics.New(tc.key)
			if tc.set != nil {
				tc.set(c)
			}
			err := c.Track(&analytics.Track{UserId: "u", Event: "e"})
			var ce *analytics.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("Track = %v, want a *ConfigError for %s", err, tc.field)
			}
			if err := c.Flush(context.Background()); !errors.As(err, &ce) {
				t.Fatalf("Flush = %v, want the *ConfigError", err)
			}
			if err := c.Close(); !errors.As(err, &ce) {
				t.Fatalf("Close = %v, want the *ConfigError", err)
			}
		})
	}
}

func TestValidation(t *testing.T) {
	s := newServer(t)
	c, _ := newClient(t, s, nil)
	for _, tc := range []struct {
		name       string
		call       func() error
		typ, field string
	}{
		{"identify without ids", func() error { return c.Identify(&analytics.Identify{Traits: map[string]any{"a": 1}}) }, "identify", "userId"},
		{"track without ids", func() error { return c.Track(&analytics.Track{Event: "e"}) }, "track", "userId"},
		{"track without event", func() error { return c.Track(&analytics.Track{UserId: "u"}) }, "track", "event"},
		{"page without ids", func() error { return c.Page(&analytics.Page{Name: "Home"}) }, "page", "userId"},
		{"screen without ids", func() error { return c.Screen(&analytics.Screen{Name: "Home"}) }, "screen", "userId"},
		{"group without ids", func() error { return c.Group(&analytics.Group{GroupId: "g"}) }, "group", "userId"},
		{"group without groupId", func() error { return c.Group(&analytics.Group{AnonymousId: "a"}) }, "group", "groupId"},
		{"alias without userId", func() error { return c.Alias(&analytics.Alias{PreviousId: "p"}) }, "alias", "userId"},
		{"alias without previousId", func() error { return c.Alias(&analytics.Alias{UserId: "u"}) }, "alias", "previousId"},
		{"bad timestamp", func() error { return c.Track(&analytics.Track{UserId: "u", Event: "e", Timestamp: "yesterday"}) }, "track", "timestamp"},
		{"NaN property", func() error {
			return c.Track(&analytics.Track{UserId: "u", Event: "e", Properties: map[string]any{"x": map[string]any{"y": nan()}}})
		}, "track", "properties"},
		{"unencodable context", func() error {
			return c.Page(&analytics.Page{UserId: "u", Context: map[string]any{"ch": make(chan int)}})
		}, "page", "context"},
		{"nil track", func() error { return c.Track(nil) }, "track", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ve *analytics.ValidationError
			if !errors.As(err, &ve) || ve.Type != tc.typ || ve.Field != tc.field {
				t.Fatalf("got %v, want a *ValidationError for %s.%s", err, tc.typ, tc.field)
			}
			if tc.field != "" && !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %q does not name %s", err, tc.field)
			}
		})
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(s.requests()); n != 0 {
		t.Fatalf("invalid messages were sent: %d requests", n)
	}
	var ve *analytics.ValidationError
	err := c.Track(&analytics.Track{UserId: "u", Event: "e", Properties: map[string]any{"x": map[string]any{"y": nan()}}})
	if errors.As(err, &ve); !strings.Contains(ve.Reason, `"x.y"`) {
		t.Fatalf("reason %q does not locate the bad value", ve.Reason)
	}
}

func nan() float64 { var z float64; return z / z }

func TestWireFormat(t *testing.T) {
	s := newServer(t)
	c, _ := newClient(t, s, func(c *analytics.Client) { c.FlushAt = 6 })
	historical := "2019-03-04T05:06:07.1+02:00"
	calls := []func() error{
		func() error {
			return c.Identify(&analytics.Identify{UserId: "u1", Traits: map[string]any{"email": "a@example.com", "plan": "pro"}})
		},
		func() error {
			return c.Track(&analytics.Track{UserId: "u1", Event: "Order Completed", Properties: map[string]any{"revenue": 9.99, "items": []any{"a", 2}},
				Timestamp: historical, Integrations: analytics.Integrations{"All": false, "Webhooks": true}})
		},
		func() error {
			return c.Page(&analytics.Page{AnonymousId: "anon-1", Name: "Pricing", Category: "Docs",
				Traits: map[string]any{"url": "https://example.com/pricing", "path": "/pricing"}, Context: map[string]any{"ip": "203.0.113.9", "library": "overridden?"}})
		},
		func() error { return c.Screen(&analytics.Screen{UserId: "u1", Name: "Home"}) },
		func() error {
			return c.Group(&analytics.Group{UserId: "u1", GroupId: "acme", Traits: map[string]any{"employees": 42}})
		},
		func() error { return c.Alias(&analytics.Alias{UserId: "u1", PreviousId: "anon-1"}) },
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	r := s.next(t)
	if r.Method != http.MethodPost || r.Path != "/v1/batch" {
		t.Fatalf("%s %s, want POST /v1/batch", r.Method, r.Path)
	}
	if r.User != "wk_test" || r.Password != "" {
		t.Fatalf("basic auth %q:%q, want the write key as user name", r.User, r.Password)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if r.Header.Get("Content-Encoding") != "" {
		t.Fatal("a small batch was compressed")
	}
	if !timeRE.MatchString(r.Batch.SentAt) || r.Batch.SentAt[len(r.Batch.SentAt)-1] != 'Z' {
		t.Fatalf("sentAt %q is not RFC 3339 UTC with milliseconds", r.Batch.SentAt)
	}
	ms := r.Batch.Batch
	if len(ms) != 6 {
		t.Fatalf("%d messages, want 6", len(ms))
	}
	ids := map[any]bool{}
	for i, m := range ms {
		want := []string{"identify", "track", "page", "screen", "group", "alias"}[i]
		if m["type"] != want {
			t.Fatalf("message %d type %v, want %s", i, m["type"], want)
		}
		id, _ := m["messageId"].(string)
		if !uuidRE.MatchString(id) || ids[id] {
			t.Fatalf("messageId %q is not a fresh UUID v4", id)
		}
		ids[id] = true
		lib := m["context"].(map[string]any)["library"]
		if fmt.Sprint(lib) != fmt.Sprint(map[string]any{"name": analytics.LibraryName, "version": analytics.Version}) {
			t.Fatalf("context.library = %v", lib)
		}
		if ts, _ := m["timestamp"].(string); i != 1 && ts != "2024-05-01T10:00:00.000Z" {
			t.Fatalf("message %d timestamp %q, want the call time", i, ts)
		}
	}
	if ms[1]["timestamp"] != historical {
		t.Fatalf("historical timestamp sent as %v, want %q as given", ms[1]["timestamp"], historical)
	}
	if fmt.Sprint(ms[1]["integrations"]) != "map[All:false Webhooks:true]" {
		t.Fatalf("integrations %v", ms[1]["integrations"])
	}
	if p := ms[2]["properties"].(map[string]any); p["url"] != "https://example.com/pricing" || ms[2]["name"] != "Pricing" || ms[2]["category"] != "Docs" {
		t.Fatalf("page: %v", ms[2])
	}
	if ctx := ms[2]["context"].(map[string]any); ctx["ip"] != "203.0.113.9" {
		t.Fatalf("page context %v", ctx)
	}
	if ms[4]["groupId"] != "acme" || ms[5]["previousId"] != "anon-1" || ms[0]["traits"].(map[string]any)["plan"] != "pro" {
		t.Fatalf("group/alias/identify fields: %v %v %v", ms[4], ms[5], ms[0])
	}
}

func TestFlushByCount(t *testing.T) {
	s := newServer(t)
	c, _ := newClient(t, s, func(c *analytics.Client) { c.FlushAt = 3 })
	for i := range 2 {
		if err := c.Track(&analytics.Track{UserId: "u", Event: fmt.Sprint("e", i)}); err != nil {
			t.Fatal(err)
		}
	}
	s.quiet(t, 100*time.Millisecond)
	if err := c.Track(&analytics.Track{UserId: "u", Event: "e2"}); err != nil {
		t.Fatal(err)
	}
	if r := s.next(t); len(r.Batch.Batch) != 3 {
		t.Fatalf("%d messages, want 3", len(r.Batch.Batch))
	}
	for i := range 7 {
		_ = c.Track(&analytics.Track{UserId: "u", Event: fmt.Sprint("f", i)})
	}
	for range 2 {
		if r := s.next(t); len(r.Batch.Batch) != 3 {
			t.Fatalf("%d messages, want 3", len(r.Batch.Batch))
		}
	}
	s.quiet(t, 50*time.Millisecond) // the seventh waits for more, or for the timer
}

func TestSizeIsFlushAt(t *testing.T) {
	s := newServer(t)
	c, _ := newClient(t, s, func(c *analytics.Client) { c.Size = 2 })
	for i := range 4 {
		_ = c.Track(&analytics.Track{UserId: "u", Event: fmt.Sprint("e", i)})
	}
	for range 2 {
		if r := s.next(t); len(r.Batch.Batch) != 2 {
			t.Fatalf("%d messages, want 2 (Size)", len(r.Batch.Batch))
		}
	}
}

func TestFlushByTime(t *testing.T) {
	s := newServer(t)
	c, clk := newClient(t, s, nil) // FlushAt 20, FlushAfter 5s
	for i := range 2 {
		if err := c.Track(&analytics.Track{UserId: "u", Event: fmt.Sprint("e", i)}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(4900 * time.Millisecond)
	s.quiet(t, 100*time.Millisecond)
	clk.Advance(100 * time.Millisecond)
	if r := s.next(t); len(r.Batch.Batch) != 2 {
		t.Fatalf("%d messages, want 2", len(r.Batch.Batch))
	}

	// A count flush restarts the interval.
	c2, clk2 := newClient(t, s, func(c *analytics.Client) { c.FlushAt = 2 })
	_ = c2.Track(&analytics.Track{UserId: "u", Event: "a"})
	clk2.Advance(3 * time.Second)
	_ = c2.Track(&analytics.Track{UserId: "u", Event: "b"}) // count flush at t=3s
	s.next(t)
	_ = c2.Track(&analytics.Track{UserId: "u", Event: "c"})
	clk2.Advance(2500 * time.Millisecond) // t=5.5s: 2.5s since the last flush
	s.quiet(t, 100*time.Millisecond)
	clk2.Advance(2500 * time.Millisecond) // t=8s
	if r := s.next(t); len(r.Batch.Batch) != 1 || r.Batch.Batch[0]["event"] != "c" {
		t.Fatalf("got %v, want the one message c", r.Batch.Batch)
	}
}

func TestOneMessageMode(t *testing.T) {
	s := newServer(t)
	c, _ := newClient(t, s, func(c *analytics.Client) { c.FlushAt = 1 })
	for i := range 3 {
		if err := c.Track(&analytics.Track{UserId: "u", Event: fmt.Sprint("e", i)}); err != nil {
			t.Fatal(err)
		}
		r := s.next(t) // sent without waiting for the timer: the clock never moves
		if len(r.Batch.Batch) != 1 || r.Batch.Batch[0]["event"] != fmt.Sprint("e", i) {
			t.Fatalf("request %d: %v", i, r.Batch.Batch)
		}
	}
}

func TestSplitAt500KB(t *testing.T) {
	s := newServer(t)
	c, _ := newClient(t, s, func(c *analytics.Client) { c.FlushAt = 100 })
	big := strings.Repeat("x", 30_000)
	const n = 40 // 40 × ~30 KB = 1.2 MB: three batches
	for i := range n {
		if err := c.Track(&analytics.Track{UserId: "u", Event: fmt.Sprint("e", i), Properties: map[string]any{"blob": big}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs := s.requests()
	if len(reqs) < 3 {
		t.Fatalf("%d requests, want the 1.2 MB split in at least 3", len(reqs))
	}
	var events []any
	for _, r := range reqs {
		if len(r.Body) > analytics.MaxBatchBytes {
			t.Fatalf("a batch of %d bytes, more than %d", len(r.Body), analytics.MaxBatchBytes)
		}
		if len(r.Body) < 400<<10 && r != reqs[len(reqs)-1] {
			t.Fatalf("a batch of only %d bytes before the last: splitting too early", len(r.Body))
		}
		if r.Header.Get("Content-Encoding") != "gzip" || r.WireBytes >= len(r.Body)/10 {
			t.Fatalf("a %d-byte batch sent as %d bytes with Content-Encoding %q: want gzip", len(r.Body), r.WireBytes, r.Header.Get("Content-Encoding"))
		}
		for _, m := range r.Batch.Batch {
			events = append(events, m["event"])
		}
	}
	for i, e := range events {
		if e != fmt.Sprint("e", i) {
			t.Fatalf("message %d is %v: lost, duplicated or reordered", i, e)
		}
	}
	if len(events) != n {
		t.Fatalf("%d messages arrived, want %d", len(events), n)
	}
}

func TestRefuses32KB(t *testing.T) {
	s := newServer(t)
	c, _ := newClient(t, s, nil)
	err := c.Track(&analytics.Track{UserId: "u", Event: "big", Properties: map[string]any{"blob": strings.Repeat("x", 32<<10)}})
	if !errors.Is(err, analytics.ErrMessageTooLarge) {
		t.Fatalf("Track = %v, want ErrMessageTooLarge", err)
	}
	var ve *analytics.ValidationError
	if !errors.As(err, &ve) || ve.Type != "track" {
		t.Fatalf("Track = %v, want a *ValidationError", err)
	}
	// Just under the limit passes.
	err = c.Track(&analytics.Track{UserId: "u", Event: "fits", Properties: map[string]any{"blob": strings.Repeat("x", 32<<10-300)}})
	if err != nil {
		t.Fatalf("a message under 32 KB: %v", err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ms := s.messages()
	if len(ms) != 1 || ms[0]["event"] != "fits" {
		t.Fatalf("sent %d messages, want only the one that fits", len(ms))
	}
}

// fastRetries keeps retry tests quick.
func fastRetries(c *analytics.Client) {
	c.RetryInitialInterval = time.Millisecond
	c.RetryMaxInterval = 5 * time.Millisecond
}

func TestRetriesThenSucceeds(t *testing.T) {
	s := newServer(t)
	s.respond = func(n int, w http.ResponseWriter, _ *request) {
		switch n {
		case 1:
			http.Error(w, "boom", http.StatusInternalServerError)
		case 2:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case 3:
			http.Error(w, "slow", http.StatusRequestTimeout)
		default:
			_, _ = w.Write([]byte(`{"success":true}`))
		}
	}
	cb := &recorder{}
	c, _ := newClient(t, s, func(c *analytics.Client) { fastRetries(c); c.Callback = cb; c.FlushAt = 2 })
	_ = c.Track(&analytics.Track{UserId: "u", Event: "a"})
	_ = c.Track(&analytics.Track{UserId: "u", Event: "b"})
	if err := c.Flush(context.Background()); err != nil {
		t.Fatalf("Flush = %v after the retries succeeded", err)
	}
	reqs := s.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d attempts, want 4", len(reqs))
	}
	for _, r := range reqs[1:] {
		if r.Batch.Batch[0]["messageId"] != reqs[0].Batch.Batch[0]["messageId"] {
			t.Fatal("a retry changed the messageId: receivers cannot de-duplicate")
		}
	}
	if ok, failed := cb.counts(); ok != 2 || failed != 0 {
		t.Fatalf("callback: %d successes, %d failures; want 2, 0", ok, failed)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	s := newServer(t)
	s.respond = func(n int, w http.ResponseWriter, _ *request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = w.Write([]byte(`{"success":true}`))
	}
	c, _ := newClient(t, s, func(c *analytics.Client) { fastRetries(c); c.FlushAt = 1 })
	_ = c.Track(&analytics.Track{UserId: "u", Event: "a"})
	first := s.next(t)
	_ = first
	start := time.Now()
	s.next(t)
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Fatalf("retried after %v, want the 1 s of Retry-After", waited)
	}
}

func TestGivesUp(t *testing.T) {
	s := newServer(t)
	s.respond = func(_ int, w http.ResponseWriter, _ *request) { http.Error(w, "down", http.StatusBadGateway) }
	cb := &recorder{}
	c, _ := newClient(t, s, func(c *analytics.Client) { fastRetries(c); c.MaxRetries = 2; c.Callback = cb })
	_ = c.Track(&analytics.Track{UserId: "u", Event: "a"})
	err := c.Flush(context.Background())
	var herr *analytics.HTTPError
	if !errors.As(err, &herr) || herr.Status != http.StatusBadGateway {
		t.Fatalf("Flush = %v, want it to report the 502", err)
	}
	if n := len(s.requests()); n != 3 {
		t.Fatalf("%d attempts, want 1 + MaxRetries = 3", n)
	}
	var gu *analytics.GiveUpError
	if ok, failed := cb.counts(); ok != 0 || failed != 1 || !errors.As(cb.failures[0], &gu) || gu.Attempts != 3 {
		t.Fatalf("callback: %d ok, %d failed (%v); want one *GiveUpError after 3 attempts", ok, failed, cb.failures)
	}
}

func TestNoRetryOn4xx(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusRequestEntityTooLarge} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			s := newServer(t)
			s.respond = func(_ int, w http.ResponseWriter, _ *request) { http.Error(w, `{"error":"no"}`, status) }
			cb := &recorder{}
			c, _ := newClient(t, s, func(c *analytics.Client) { fastRetries(c); c.Callback = cb })
			_ = c.Track(&analytics.Track{UserId: "u", Event: "a"})
			err := c.Flush(context.Background())
			var herr *analytics.HTTPError
			if !errors.As(err, &herr) || herr.Status != status || !strings.Contains(herr.Body, "no") {
				t.Fatalf("Flush = %v, want the %d", err, status)
			}
			if n := len(s.requests()); n != 1 {
				t.Fatalf("%d attempts, want 1", n)
			}
			if _, failed := cb.counts(); failed != 1 {
				t.Fatalf("%d failures reported", failed)
			}
		})
	}
}

func TestNetworkErrorRetried(t *testing.T) {
	s := newServer(t)
	s.respond = func(n int, w http.ResponseWriter, _ *request) {
		if n == 1 { // cut the connection without an answer
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		_, _ = w.Write([]byte(`{"success":true}`))
	}
	c, _ := newClient(t, s, fastRetries)
	_ = c.Track(&analytics.Track{UserId: "u", Event: "a"})
	if err := c.Flush(context.Background()); err != nil {
		t.Fatalf("Flush = %v", err)
	}
	if n := len(s.requests()); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
}

func TestRejectedMessagesFailAlone(t *testing.T) {
	s := newServer(t)
	s.respond = func(_ int, w http.ResponseWriter, _ *request) {
		_, _ = w.Write([]byte(`{"success":true,"rejected":[{"index":1,"code":"invalid_message","reason":"userId: required"}]}`))
	}
	cb := &recorder{}
	// The three go in the one batch Flush sends: with FlushAt 3 the third call could start the
	// batch in the background first, and Flush, finding nothing queued, returned nil (flaky).
	c, _ := newClient(t, s, func(c *analytics.Client) { c.Callback = cb })
	ms := []*analytics.Track{{UserId: "u", Event: "a"}, {UserId: "u", Event: "b"}, {UserId: "u", Event: "c"}}
	for _, m := range ms {
		_ = c.Track(m)
	}
	err := c.Flush(context.Background())
	var rej *analytics.RejectedError
	if !errors.As(err, &rej) || rej.Code != "invalid_message" {
		t.Fatalf("Flush = %v, want the rejection", err)
	}
	if ok, failed := cb.counts(); ok != 2 || failed != 1 || cb.failed[0] != analytics.Message(ms[1]) {
		t.Fatalf("callback: %d ok, %d failed, want 2 ok and message b failed", ok, failed)
	}
	if len(s.requests()) != 1 {
		t.Fatal("a rejection was retried")
	}
}

func TestCloseDrains(t *testing.T) {
	s := newServer(t)
	cb := &recorder{}
	c, _ := newClient(t, s, func(c *analytics.Client) { c.Callback = cb })
	for i := range 55 {
		if err := c.Track(&analytics.Track{UserId: "u", Event: fmt.Sprint("e", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if n := len(s.messages()); n != 55 {
		t.Fatalf("%d messages sent by Close, want 55", n)
	}
	if ok, _ := cb.counts(); ok != 55 {
		t.Fatalf("%d successes reported before Close returned, want 55", ok)
	}
	if err := c.Track(&analytics.Track{UserId: "u", Event: "late"}); !errors.Is(err, analytics.ErrClosed) {
		t.Fatalf("Track after Close = %v, want ErrClosed", err)
	}
	if err := c.Flush(context.Background()); !errors.Is(err, analytics.ErrClosed) {
		t.Fatalf("Flush after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); !errors.Is(err, analytics.ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
}

func TestCloseIsBounded(t *testing.T) {
	s := newServer(t)
	release := make(chan struct{})
	s.respond = func(_ int, w http.ResponseWriter, r *request) {
		<-release // a server that never answers in time
		_, _ = w.Write([]byte(`{"success":true}`))
	}
	defer close(release)
	cb := &recorder{}
	c, _ := newClient(t, s, func(c *analytics.Client) {
		c.Callback = cb
		c.FlushAt = 2
		c.CloseTimeout = 200 * time.Millisecond
	})
	for i := range 5 {
		_ = c.Track(&analytics.Track{UserId: "u", Event: fmt.Sprint("e", i)})
	}
	start := time.Now()
	err := c.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %v with CloseTimeout 200ms", took)
	}
	if !errors.Is(err, analytics.ErrClosed) {
		t.Fatalf("Close = %v, want it to report messages failed with ErrClosed", err)
	}
	ok, failed := cb.counts()
	if ok != 0 || failed != 5 {
		t.Fatalf("callback: %d ok, %d failed, want 5 failures", ok, failed)
	}
	for _, e := range cb.failures {
		if !errors.Is(e, analytics.ErrClosed) {
			t.Fatalf("failure %v, want ErrClosed", e)
		}
	}
}

func TestQueueFull(t *testing.T) {
	s := newServer(t)
	release := make(chan struct{})
	s.respond = func(_ int, w http.ResponseWriter, r *request) {
		<-release
		_, _ = w.Write([]byte(`{"success":true}`))
	}
	c, _ := newClient(t, s, func(c *analytics.Client) { c.FlushAt = 1; c.QueueSize = 3 })
	for i := range 3 {
		if err := c.Track(&analytics.Track{UserId: "u", Event: fmt.Sprint("e", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Track(&analytics.Track{UserId: "u", Event: "overflow"}); !errors.Is(err, analytics.ErrQueueFull) {
		t.Fatalf("Track on a full queue = %v, want ErrQueueFull", err)
	}
	close(release)
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Track(&analytics.Track{UserId: "u", Event: "room again"}); err != nil {
		t.Fatalf("Track once the queue drained: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(s.messages()); n != 4 {
		t.Fatalf("%d messages sent, want 4 (the refused one is not)", n)
	}
}

func TestBlockWhenFull(t *testing.T) {
	s := newServer(t)
	release := make(chan struct{})
	s.respond = func(_ int, w http.ResponseWriter, r *request) {
		<-release
		_, _ = w.Write([]byte(`{"success":true}`))
	}
	c, _ := newClient(t, s, func(c *analytics.Client) { c.FlushAt = 1; c.QueueSize = 2; c.BlockWhenFull = true })
	_ = c.Track(&analytics.Track{UserId: "u", Event: "a"})
	_ = c.Track(&analytics.Track{UserId: "u", Event: "b"})
	returned := make(chan error)
	go func() { returned <- c.Track(&analytics.Track{UserId: "u", Event: "c"}) }()
	select {
	case err := <-returned:
		t.Fatalf("Track on a full queue returned %v, want it to wait", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-returned; err != nil {
		t.Fatalf("Track after room was made: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(s.messages()); n != 3 {
		t.Fatalf("%d messages, want 3", n)
	}
}

func TestBlockedCallsEndOnClose(t *testing.T) {
	s := newServer(t)
	release := make(chan struct{})
	s.respond = func(_ int, w http.ResponseWriter, r *request) { <-release }
	defer close(release)
	c, _ := newClient(t, s, func(c *analytics.Client) {
		c.FlushAt, c.QueueSize, c.BlockWhenFull, c.CloseTimeout = 1, 1, true, 100*time.Millisecond
	})
	_ = c.Track(&analytics.Track{UserId: "u", Event: "a"})
	returned := make(chan error)
	go func() { returned <- c.Track(&analytics.Track{UserId: "u", Event: "b"}) }()
	time.Sleep(50 * time.Millisecond)
	_ = c.Close()
	if err := <-returned; !errors.Is(err, analytics.ErrClosed) {
		t.Fatalf("blocked Track = %v after Close, want ErrClosed", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	s := newServer(t)
	cb := &recorder{}
	c, _ := newClient(t, s, func(c *analytics.Client) {
		c.Callback = cb
		c.MaxConcurrentRequests = 3
		c.BlockWhenFull = true
		c.QueueSize = 200
	})
	const workers, each = 8, 300
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				var err error
				switch i % 3 {
				case 0:
					err = c.Track(&analytics.Track{UserId: fmt.Sprint("u", w), Event: "e", Properties: map[string]any{"i": i}})
				case 1:
					err = c.Identify(&analytics.Identify{UserId: fmt.Sprint("u", w), Traits: map[string]any{"i": i}})
				default:
					if i%30 == 2 {
						err = c.Flush(context.Background())
					} else {
						err = c.Page(&analytics.Page{AnonymousId: fmt.Sprint("a", w), Name: "p"})
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[any]bool{}
	for _, m := range s.messages() {
		if seen[m["messageId"]] {
			t.Fatalf("message %v sent twice", m["messageId"])
		}
		seen[m["messageId"]] = true
	}
	want := workers * (each - each/30)
	if len(seen) != want {
		t.Fatalf("%d messages arrived, want %d", len(seen), want)
	}
	if ok, failed := cb.counts(); ok != want || failed != 0 {
		t.Fatalf("callback: %d ok, %d failed", ok, failed)
	}
}

func TestIntegrationsHelpers(t *testing.T) {
	got := analytics.NewIntegrations().DisableAll().Enable("Webhooks").Disable("Other").Set("Custom", map[string]any{"x": 1})
	want := analytics.Integrations{"All": false, "Webhooks": true, "Other": false, "Custom": map[string]any{"x": 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	if fmt.Sprint(analytics.NewIntegrations().EnableAll()) != "map[All:true]" {
		t.Fatal("EnableAll")
	}
}

func TestTimeFormat(t *testing.T) {
	ts := time.Date(2019, 3, 4, 5, 6, 7, 890123456, time.FixedZone("CEST", 2*3600))
	if got := analytics.Time(ts); got != "2019-03-04T03:06:07.890Z" {
		t.Fatalf("Time = %q", got)
	}
}

func TestFlushHonoursContext(t *testing.T) {
	s := newServer(t)
	release := make(chan struct{})
	s.respond = func(_ int, w http.ResponseWriter, r *request) {
		<-release
		_, _ = w.Write([]byte(`{"success":true}`))
	}
	c, _ := newClient(t, s, nil)
	_ = c.Track(&analytics.Track{UserId: "u", Event: "e"})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush = %v, want the context's error", err)
	}
	close(release)
	if err := c.Flush(context.Background()); err != nil {
		t.Fatalf("Flush = %v once the server answered", err)
	}
	if n := len(s.messages()); n != 1 {
		t.Fatalf("%d messages, want 1 (the first Flush went on sending)", n)
	}
}
