package deliverer

import (
	"compress/gzip"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestBothClientsKeepTheAnswer: the lean client and net/http both keep the answer's headers
// (at most schemas.MaxAnswerHeaders, by name, values cut) and the first schemas.MaxAnswerBody
// bytes of its body, cut on a whole character, gzip undone; and the lean client still reuses
// the connection after an answer longer than what it keeps.
func TestBothClientsKeepTheAnswer(t *testing.T) {
	long := strings.Repeat("é", schemas.MaxAnswerBody) // 2 bytes each: cut at 4096 bytes, on a whole "é"
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 25 {
			w.Header().Set("X-H"+strconv.Itoa(100+i), "v")
		}
		w.Header().Set("X-Long", strings.Repeat("x", 1000))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		switch r.URL.Path {
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(500)
			zw := gzip.NewWriter(w)
			_, _ = zw.Write([]byte("compressed boom"))
			_ = zw.Close()
		default:
			w.WriteHeader(500)
			_, _ = w.Write([]byte(long))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	client := testHTTPClient(t, nil)
	for _, c := range []struct {
		name string
		p    poster
	}{{"lean", client.lean}, {"net/http", client.std}} {
		t.Run(c.name, func(t *testing.T) {
			for _, path := range []string{"/long", "/long", "/gzip"} {
				m := testMessage(srv.URL + path)
				m.answer = newAnswer()
				status, _, err := c.p.send(context.Background(), m, time.Now().Add(5*time.Second))
				if err != nil || status != 500 {
					t.Fatalf("%s: %d %v", path, status, err)
				}
				rec := appendAttemptRecord(nil, &delivery{destID: "d", messageID: "m"}, &urlResult{Status: 500, Class: Status5xx, answer: m.answer}, hostLimit{}, outcome{}, time.Now())
				got, err := schemas.DecodeAttemptRecord(rec)
				if err != nil {
					t.Fatalf("%s: %v", rec, err)
				}
				want := long[:schemas.MaxAnswerBody]
				if path == "/gzip" {
					want = "compressed boom"
				}
				if got.ResponseBody != want {
					t.Errorf("%s: body %d bytes %q…, want %d bytes", path, len(got.ResponseBody), got.ResponseBody[:min(20, len(got.ResponseBody))], len(want))
				}
				if len(got.ResponseHeaders) != schemas.MaxAnswerHeaders || got.ResponseHeaders["X-H100"] != "v" || got.ResponseHeaders["Content-Type"] == "" {
					t.Errorf("%s: headers %v: want the first %d by name", path, got.ResponseHeaders, schemas.MaxAnswerHeaders)
				}
				m.answer.release()
			}
		})
	}
	if n := conns.Load(); n > 3 { // the lean client's first POST, net/http's, and net/http's gzip (its own pool)
		t.Errorf("%d connections: an answer longer than what is kept closed the connection", n)
	}
}

// TestEmptySuccessKeepsNoAnswer: an attempt record keeps nothing of an empty 2xx answer (no
// headers: most answers are one, and the record stays small), and still keeps the headers and
// body of a 2xx that has a body and of a failure without one, with both clients.
func TestEmptySuccessKeepsNoAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req-1")
		switch r.URL.Path {
		case "/empty":
			w.WriteHeader(200)
		case "/nocontent":
			w.WriteHeader(204)
		case "/body":
			w.WriteHeader(200)
			_, _ = w.Write([]byte(`{"ok":true}`))
		default:
			w.WriteHeader(503)
		}
	}))
	defer srv.Close()
	client := testHTTPClient(t, nil)
	for _, c := range []struct {
		name string
		p    poster
	}{{"lean", client.lean}, {"net/http", client.std}} {
		for _, tc := range []struct {
			path      string
			status    int
			headers   bool
			body      string
			errorKind Class
		}{
			{"/empty", 200, false, "", Success},
			{"/nocontent", 204, false, "", Success},
			{"/body", 200, true, `{"ok":true}`, Success},
			{"/fail", 503, true, "", Status5xx},
		} {
			m := testMessage(srv.URL + tc.path)
			m.answer = newAnswer()
			status, _, err := c.p.send(context.Background(), m, time.Now().Add(5*time.Second))
			if err != nil || status != tc.status {
				t.Fatalf("%s %s: %d %v", c.name, tc.path, status, err)
			}
			rec := appendAttemptRecord(nil, &delivery{destID: "d", messageID: "m"}, &urlResult{Status: status, Class: tc.errorKind, answer: m.answer}, hostLimit{}, outcome{}, time.Now())
			got, err := schemas.DecodeAttemptRecord(rec)
			if err != nil {
				t.Fatalf("%s: %v", rec, err)
			}
			if (got.ResponseHeaders["X-Request-Id"] == "req-1") != tc.headers || got.ResponseBody != tc.body {
				t.Errorf("%s %s: kept headers %v body %q; want headers %v body %q", c.name, tc.path, got.ResponseHeaders, got.ResponseBody, tc.headers, tc.body)
			}
			m.answer.release()
		}
	}
}
