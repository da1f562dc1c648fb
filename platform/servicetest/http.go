package servicetest

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// CallTimeout bounds one request of Call, its answer read in full.
const CallTimeout = 30 * time.Second

// Answer is an HTTP answer, read in full.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Decode decodes the answer's JSON body into v; it decodes nothing when v is nil or the body
// is empty. A body that is not JSON (or not v's shape) fails the test.
func (a Answer) Decode(t testing.TB, v any) {
	t.Helper()
	if v == nil || len(a.Body) == 0 {
		return
	}
	if err := json.Unmarshal(a.Body, v); err != nil {
		t.Fatalf("decoding an answer %d: %v: %s", a.Status, err, a.Body)
	}
}

// Call sends a request to an HTTP service under test and reads its answer in full: method to
// url, with body (none when ""; else sent as application/json) and header, pairs of names and
// values set in order. A "Host" pair sets the request's Host; a pair whose value is "" is not
// sent (Bearer("") for a request without a token). A request that gets no answer within
// CallTimeout (a refused connection, a server that hangs) fails the test. It must be called
// from the test's goroutine.
func Call(t testing.TB, method, url, body string, header ...string) Answer {
	t.Helper()
	return call(t, &http.Client{Timeout: CallTimeout}, method, url, body, header...)
}

// Call is Call through the Env's HTTP client (Env.HTTPClient): on the virtual network with
// Options.Virtual. It fails the Env's test.
func (e *Env) Call(method, url, body string, header ...string) Answer {
	e.T.Helper()
	return call(e.T, e.HTTPClient(), method, url, body, header...)
}

// Get is Get through the Env's HTTP client (Env.HTTPClient).
func (e *Env) Get(url, token string, v any) int {
	e.T.Helper()
	a := e.Call(http.MethodGet, url, "", "Authorization", Bearer(token))
	a.Decode(e.T, v)
	return a.Status
}

// Post is Post through the Env's HTTP client (Env.HTTPClient).
func (e *Env) Post(url, token, body string, v any) int {
	e.T.Helper()
	a := e.Call(http.MethodPost, url, body, "Authorization", Bearer(token))
	a.Decode(e.T, v)
	return a.Status
}

func call(t testing.TB, client *http.Client, method, url, body string, header ...string) Answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if len(header)%2 != 0 {
		t.Fatalf("%s %s: header %q is not pairs of names and values", method, url, header)
	}
	for i := 0; i < len(header); i += 2 {
		switch name, value := header[i], header[i+1]; {
		case value == "":
		case http.CanonicalHeaderKey(name) == "Host":
			req.Host = value
		default:
			req.Header.Set(name, value)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Get GETs url with token as a bearer token (none when "") and decodes the JSON answer into v
// (Answer.Decode); it returns the status. It must be called from the test's goroutine.
func Get(t testing.TB, url, token string, v any) int {
	t.Helper()
	a := Call(t, http.MethodGet, url, "", "Authorization", Bearer(token))
	a.Decode(t, v)
	return a.Status
}

// Post POSTs body (JSON) to url with token as a bearer token (none when "") and decodes the
// JSON answer into v (Answer.Decode); it returns the status. It must be called from the test's
// goroutine.
func Post(t testing.TB, url, token, body string, v any) int {
	t.Helper()
	a := Call(t, http.MethodPost, url, body, "Authorization", Bearer(token))
	a.Decode(t, v)
	return a.Status
}

// Bearer is the Authorization value that presents token: "Bearer <token>", or "" (Call sends
// no Authorization) when token is "".
func Bearer(token string) string {
	if token == "" {
		return ""
	}
	return "Bearer " + token
}

// Basic is the Authorization value of HTTP basic authentication as user with an empty
// password: how a Segment library presents a write key.
func Basic(user string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"))
}

// WaitReady waits until GET url (a service's /readyz) answers 200, failing the test after
// timeout. Refused connections count as not ready yet: the service may still be starting.
func WaitReady(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	waitReady(t, &http.Client{Timeout: time.Second}, url, timeout)
}

// WaitReady is WaitReady through the Env's HTTP client (Env.HTTPClient).
func (e *Env) WaitReady(url string, timeout time.Duration) {
	e.T.Helper()
	waitReady(e.T, &http.Client{Timeout: time.Second, Transport: e.HTTPClient().Transport}, url, timeout)
}

func waitReady(t testing.TB, client *http.Client, url string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, url+" to answer 200", func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
