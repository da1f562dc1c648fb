package servicetest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// fatalRecorder stands in for a testing.TB to see how a helper fails a test: Fatalf records
// the message and ends the goroutine, as testing.T's does.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalOf runs f on a fatalRecorder in a goroutine and returns what it failed with ("" if it
// returned).
func fatalOf(t *testing.T, f func(tb testing.TB)) string {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.fatal
}

// TestEventually: a condition that comes to hold returns after as many checks as it took; one
// that never does fails after the timeout, naming what was awaited and, for a func() string,
// its last answer. Time is virtual.
func TestEventually(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		checks := 0
		start := time.Now()
		if msg := fatalOf(t, func(tb testing.TB) {
			servicetest.Eventually(tb, time.Second, "three checks", func() bool { checks++; return checks == 3 })
		}); msg != "" {
			t.Fatalf("a condition that holds at the third check failed: %s", msg)
		}
		if checks != 3 || time.Since(start) != 2*servicetest.EventuallyPoll {
			t.Errorf("held after %d checks and %v, want 3 and %v", checks, time.Since(start), 2*servicetest.EventuallyPoll)
		}

		start = time.Now()
		msg := fatalOf(t, func(tb testing.TB) {
			servicetest.Eventually(tb, time.Second, "a bool that never holds", func() bool { return false })
		})
		if msg != "waited 1s for a bool that never holds" {
			t.Errorf("never-holding func() bool failed with %q", msg)
		}
		if took := time.Since(start); took < time.Second || took > time.Second+servicetest.EventuallyPoll {
			t.Errorf("failed after %v, want the timeout of 1s", took)
		}

		n := 0
		msg = fatalOf(t, func(tb testing.TB) {
			servicetest.Eventually(tb, 100*time.Millisecond, "a profile", func() string { n++; return fmt.Sprintf("answer %d", n) })
		})
		if want := fmt.Sprintf("waited 100ms for a profile: answer %d", n); msg != want {
			t.Errorf("never-holding func() string failed with %q, want %q", msg, want)
		}
		if msg := fatalOf(t, func(tb testing.TB) {
			servicetest.Eventually(tb, time.Second, "an empty answer", func() string { return "" })
		}); msg != "" {
			t.Errorf("a func() string answering \"\" failed: %s", msg)
		}
	})
}

// TestConsistently: a condition that holds throughout returns at the end of the period, having
// checked it at its start, every EventuallyPoll and at its end; one that stops holding fails
// at the first check that sees it, naming what and, for a func() string, its answer. Time is
// virtual.
func TestConsistently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		checks := 0
		start := time.Now()
		if msg := fatalOf(t, func(tb testing.TB) {
			servicetest.Consistently(tb, 50*time.Millisecond, "a bool that holds", func() bool { checks++; return true })
		}); msg != "" {
			t.Fatalf("a condition that always holds failed: %s", msg)
		}
		if took := time.Since(start); checks != 4 || took != 50*time.Millisecond {
			t.Errorf("returned after %d checks and %v, want 4 (at 0, 20, 40, 50 ms) and 50ms", checks, took)
		}
		checks = 0
		start = time.Now()
		msg := fatalOf(t, func(tb testing.TB) {
			servicetest.Consistently(tb, time.Second, "the view empty", func() bool { checks++; return checks < 3 })
		})
		if msg != "the view empty did not hold throughout 1s" || time.Since(start) != 2*servicetest.EventuallyPoll {
			t.Errorf("a bool that stops holding at the third check failed with %q after %v", msg, time.Since(start))
		}
		msg = fatalOf(t, func(tb testing.TB) {
			servicetest.Consistently(tb, time.Second, "no write", func() string { return "version 2" })
		})
		if msg != "no write did not hold throughout 1s: version 2" {
			t.Errorf("a func() string that does not hold failed with %q", msg)
		}
	})
}

// TestNextMillisecond: after NextMillisecond the clock is in the next millisecond, less than a
// millisecond later. Time is virtual.
func TestNextMillisecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(300 * time.Microsecond)
		before := time.Now()
		servicetest.NextMillisecond()
		if after := time.Now(); after.UnixMilli() != before.UnixMilli()+1 || after.Sub(before) > time.Millisecond {
			t.Errorf("NextMillisecond went from %v to %v", before, after)
		}
	})
}

// TestCall: Call sends the method, body (as JSON), headers (Host as the request's host,
// empty values left out) and reads the answer in full; Decode decodes it (as Get and Post do);
// a refused connection fails the test naming the request.
func TestCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", fmt.Sprintf("%s|%s|%s|%s|%q", r.Method, r.Host, r.Header.Get("Content-Type"), r.Header.Get("X-Extra"), r.Header.Values("Authorization")))
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"got":%q}`, b)
	}))
	defer srv.Close()

	a := servicetest.Call(t, http.MethodPost, srv.URL+"/x", `{"a":1}`, "Authorization", servicetest.Bearer("tok"), "Host", "api.example.test", "X-Extra", "1")
	if want := `POST|api.example.test|application/json|1|["Bearer tok"]`; a.Status != http.StatusAccepted || a.Header.Get("X-Seen") != want {
		t.Errorf("answer %d %q, want 202 %q", a.Status, a.Header.Get("X-Seen"), want)
	}
	var got struct{ Got string }
	a.Decode(t, &got)
	if got.Got != `{"a":1}` {
		t.Errorf("decoded %+v", got)
	}

	a = servicetest.Call(t, http.MethodGet, srv.URL, "", "Authorization", servicetest.Bearer(""))
	if seen := a.Header.Get("X-Seen"); !strings.HasPrefix(seen, "GET|") || !strings.HasSuffix(seen, "||[]") {
		t.Errorf("a GET without body or token was sent as %q", seen)
	}
	if status := servicetest.Post(t, srv.URL, "tok", `{"b":2}`, &got); status != http.StatusAccepted || got.Got != `{"b":2}` {
		t.Errorf("Post: %d %+v", status, got)
	}
	got.Got = ""
	if status := servicetest.Get(t, srv.URL, "", &got); status != http.StatusAccepted || got.Got != "" {
		t.Errorf("Get: %d %+v", status, got)
	}
	if b := servicetest.Basic("wk_web"); b != "Basic d2tfd2ViOg==" {
		t.Errorf("Basic = %q", b)
	}

	addr := servicetest.FreeAddr(t) // nothing listens there
	if msg := fatalOf(t, func(tb testing.TB) { servicetest.Call(tb, http.MethodGet, "http://"+addr+"/readyz", "") }); !strings.HasPrefix(msg, "GET http://"+addr+"/readyz: ") {
		t.Errorf("a refused connection failed with %q", msg)
	}
	if msg := fatalOf(t, func(tb testing.TB) { servicetest.Call(tb, http.MethodGet, srv.URL, "", "Authorization") }); !strings.Contains(msg, "not pairs") {
		t.Errorf("an odd header list failed with %q", msg)
	}
}

// TestWaitReady: WaitReady returns once the URL answers 200, waiting through refused
// connections and other statuses, and fails after its timeout if it never does.
func TestWaitReady(t *testing.T) {
	var answers atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answers.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	servicetest.WaitReady(t, srv.URL+"/readyz", 5*time.Second)
	if n := answers.Load(); n != 3 {
		t.Errorf("ready after %d answers, want 3", n)
	}
	addr := servicetest.FreeAddr(t)
	if msg := fatalOf(t, func(tb testing.TB) { servicetest.WaitReady(tb, "http://"+addr+"/readyz", 100*time.Millisecond) }); msg != "waited 100ms for http://"+addr+"/readyz to answer 200" {
		t.Errorf("a service that never starts failed with %q", msg)
	}
}
