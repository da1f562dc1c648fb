package servicetest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Request is one request a Receiver received.
type Request struct {
	// At is when the receiver read its body.
	At     time.Time
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Receiver is a webhook endpoint on loopback (an httptest.Server) that records every request
// and answers with a test's function. Its methods are safe for concurrent use.
type Receiver struct {
	*httptest.Server
	// URL is the receiver's base URL, http://host:port.
	URL     string
	respond func(n int, r *http.Request, w http.ResponseWriter)

	mu   sync.Mutex
	reqs []Request
}

// NewReceiver starts a receiver, closed on t.Cleanup. respond answers request n (counted from
// 1, in the order their bodies were read); nil answers 200 with no body.
func NewReceiver(t testing.TB, respond func(n int, r *http.Request, w http.ResponseWriter)) *Receiver {
	rc := &Receiver{respond: respond}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	rc.URL = rc.Server.URL
	t.Cleanup(rc.Close)
	return rc
}

// VirtualReceiver is a Receiver on the Env's virtual network (Options.Virtual) at
// localhost:port, for a test inside a testing/synctest bubble whose service dials through
// Env.Network; it is closed on t.Cleanup. Its embedded Server is nil.
func (e *Env) VirtualReceiver(port int, respond func(n int, r *http.Request, w http.ResponseWriter)) *Receiver {
	e.T.Helper()
	if e.Network == nil {
		e.T.Fatal("VirtualReceiver needs an Env with Options.Virtual")
	}
	ln, err := e.Network.Listen("tcp", "localhost:"+strconv.Itoa(port))
	if err != nil {
		e.T.Fatal(err)
	}
	rc := &Receiver{respond: respond, URL: "http://" + ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(rc.serve)}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	e.T.Cleanup(func() {
		_ = srv.Close()
		<-served
	})
	return rc
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, Request{At: time.Now(), Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: b})
	n := len(rc.reqs)
	rc.mu.Unlock()
	if rc.respond != nil {
		rc.respond(n, r, w)
	}
}

// Requests returns a copy of every request received so far.
func (rc *Receiver) Requests() []Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Request(nil), rc.reqs...)
}

// WaitRequests waits until the receiver has at least n requests and returns them all; it fails
// the test after timeout.
func (rc *Receiver) WaitRequests(t testing.TB, n int, timeout time.Duration) []Request {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := rc.Requests()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver got %d requests, want %d", len(got), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
