package analytics_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tributary-cdp/tributary/analytics"
)

// captureStderr runs fn with os.Stderr redirected and returns what was written.
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	orig := os.Stderr
	os.Stderr = w
	var out strings.Builder
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(&out, r) })
	defer func() {
		os.Stderr = orig
		_ = w.Close()
		wg.Wait()
		_ = r.Close()
	}()
	fn()
	os.Stderr = orig
	_ = w.Close()
	wg.Wait()
	return out.String()
}

func runSomeCalls(t *testing.T) {
	s := newServer(t)
	s.respond = func(n int, w http.ResponseWriter, _ *request) {
		if n == 1 {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{"success":true}`))
	}
	c := analytics.New("wk_secret_key")
	c.Endpoint = s.URL
	fastRetries(c)
	_ = c.Track(&analytics.Track{UserId: "u", Event: "Secret Event", Properties: map[string]any{"card": "4242"}})
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDebugEnvLogsToStderr(t *testing.T) {
	t.Setenv("DEBUG", "analytics")
	out := captureStderr(t, func() { runSomeCalls(t) })
	if !strings.Contains(out, "retrying") || !strings.Contains(out, "sent 1 messages") {
		t.Fatalf("DEBUG=analytics logged %q, want the retry and the send", out)
	}
	for _, secret := range []string{"wk_secret_key", "Secret Event", "4242"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the log contains %q: %s", secret, out)
		}
	}
}

func TestSilentByDefault(t *testing.T) {
	t.Setenv("DEBUG", "other-lib")
	if out := captureStderr(t, func() { runSomeCalls(t) }); out != "" {
		t.Fatalf("logged without DEBUG=analytics: %q", out)
	}
}

type lines struct {
	mu  sync.Mutex
	log []string
}

func (l *lines) Logf(format string, _ ...any)   { l.add("log: " + format) }
func (l *lines) Errorf(format string, _ ...any) { l.add("error: " + format) }
func (l *lines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.log = append(l.log, s)
}

func TestLoggerInterface(t *testing.T) {
	s := newServer(t)
	s.respond = func(_ int, w http.ResponseWriter, _ *request) { http.Error(w, "down", http.StatusServiceUnavailable) }
	l := &lines{}
	c := analytics.New("wk")
	c.Endpoint, c.Logger, c.MaxRetries = s.URL, l, 1
	fastRetries(c)
	_ = c.Track(&analytics.Track{UserId: "u", Event: "e"})
	_ = c.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.log) == 0 || !strings.HasPrefix(l.log[len(l.log)-1], "error: giving up") {
		t.Fatalf("log %q, want it to end with the give-up error", l.log)
	}
}

// No goroutine the client starts outlives Close: the flusher, the senders, the HTTP
// connections of its own client.
func TestNoGoroutineOutlivesClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := newServer(t)
	for _, conc := range []int{1, 4} {
		c := analytics.New("wk")
		c.Endpoint = s.URL
		c.MaxConcurrentRequests = conc
		c.FlushAt = 3
		for range 10 {
			_ = c.Track(&analytics.Track{UserId: "u", Event: "e"})
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A client never used starts nothing that outlives Close either.
	if err := analytics.New("wk").Close(); err != nil {
		t.Fatal(err)
	}
	s.Close() // the test server's own goroutines
	time.Sleep(10 * time.Millisecond)
}
