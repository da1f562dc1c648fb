package analytics_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tributary-cdp/tributary/analytics"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// request is one request the test server received.
type request struct {
	Method, Path, User, Password string
	Header                       http.Header
	Body                         []byte // after gunzip
	WireBytes                    int    // as received
	Batch                        struct {
		Batch  []map[string]any `json:"batch"`
		SentAt string           `json:"sentAt"`
	}
}

// server is an httptest server standing in for ingest: it records every request and answers
// with respond (200 {"success":true} when nil).
type server struct {
	*httptest.Server
	t       testing.TB
	mu      sync.Mutex
	reqs    []*request
	arrived chan *request
	respond func(n int, w http.ResponseWriter, r *request) // n counts requests from 1
}

func newServer(t testing.TB) *server {
	s := &server{t: t, arrived: make(chan *request, 10000)}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

func (s *server) handle(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := &request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), WireBytes: len(raw)}
	req.User, req.Password, _ = r.BasicAuth()
	req.Body = raw
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			s.t.Errorf("bad gzip body: %v", err)
			return
		}
		req.Body, _ = io.ReadAll(zr)
	}
	if err := json.Unmarshal(req.Body, &req.Batch); err != nil {
		s.t.Errorf("body is not a batch: %v: %s", err, req.Body)
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	n := len(s.reqs)
	respond := s.respond
	s.mu.Unlock()
	if respond != nil {
		respond(n, w, req)
	} else {
		_, _ = io.WriteString(w, `{"success":true}`)
	}
	s.arrived <- req
}

// requests returns what arrived so far.
func (s *server) requests() []*request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*request(nil), s.reqs...)
}

// messages returns every message of every request, in arrival order.
func (s *server) messages() []map[string]any {
	var ms []map[string]any
	for _, r := range s.requests() {
		ms = append(ms, r.Batch.Batch...)
	}
	return ms
}

// next waits for the next request.
func (s *server) next(t testing.TB) *request {
	t.Helper()
	select {
	case r := <-s.arrived:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no request within 10s")
		return nil
	}
}

// quiet fails if a request arrives within d.
func (s *server) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case r := <-s.arrived:
		t.Fatalf("unexpected request with %d messages", len(r.Batch.Batch))
	case <-time.After(d):
	}
}

// newClient returns a client of s with a manual clock, closed at the end of the test.
func newClient(t testing.TB, s *server, set func(c *analytics.Client)) (*analytics.Client, *analytics.ManualClock) {
	c := analytics.New("wk_test")
	c.Endpoint = s.URL
	clk := analytics.NewManualClock(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	analytics.UseClock(c, clk)
	if set != nil {
		set(c)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, clk
}

// recorder is a Callback that records outcomes.
type recorder struct {
	mu       sync.Mutex
	ok       []analytics.Message
	failed   []analytics.Message
	failures []error
}

func (r *recorder) Success(m analytics.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ok = append(r.ok, m)
}

func (r *recorder) Failure(m analytics.Message, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, m)
	r.failures = append(r.failures, err)
}

func (r *recorder) counts() (ok, failed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ok), len(r.failed)
}
