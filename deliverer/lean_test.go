package deliverer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// rawServer serves each connection of a loopback listener with handle; its address. The
// listener and the connections are closed when the test ends, and the handlers waited for.
func rawServer(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { defer c.Close(); handle(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// readRaw reads one request off br: its head and body bytes as they came.
func readRaw(br *bufio.Reader) ([]byte, error) {
	var raw []byte
	n := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		raw = append(raw, line...)
		if v, ok := strings.CutPrefix(strings.ToLower(line), "content-length: "); ok {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
		if line == "\r\n" {
			break
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, err
	}
	return append(raw, body...), nil
}

func testMessage(url string) message {
	body := []byte(`{"messageId":"m-1","type":"track"}`)
	return message{url: url, messageID: "m-1", body: body, xsig: schemas.XSignature("s3cret", body),
		headers: map[string]string{"X-Team": "growth", "x-env": " prod\t", "Authorization": "Bearer t0k", "accept": "*/*"},
		stdTS:   "1767323045", stdSig: schemas.StandardWebhooksHeader("m-1", 1767323045, body, "s3cret")}
}

// TestLeanRequestIsNetHTTPs: the lean client sends the bytes net/http sends for the same POST
// (request line with the escaped path and query, Host, User-Agent, Content-Length, the other
// headers sorted, static names canonical and values trimmed, the Standard Webhooks names in
// lower case, Accept-Encoding: gzip, the body): a receiver cannot tell them apart
// (docs/receivers.md#headers).
func TestLeanRequestIsNetHTTPs(t *testing.T) {
	got := make(chan []byte, 4)
	addr := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			raw, err := readRaw(br)
			if err != nil {
				return
			}
			got <- raw
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
		}
	})
	client := testHTTPClient(t, nil)
	m := testMessage("http://" + addr + "/hooks/a%20b/c?team=1&x=%2F#frag")
	deadline := time.Now().Add(5 * time.Second)
	if status, _, err := client.lean.send(context.Background(), m, deadline); err != nil || status != 200 {
		t.Fatalf("lean: %d %v", status, err)
	}
	lean := <-got
	if status, _, err := client.std.send(context.Background(), m, deadline); err != nil || status != 200 {
		t.Fatalf("net/http: %d %v", status, err)
	}
	std := <-got
	if !bytes.Equal(lean, std) {
		t.Fatalf("the lean client sent\n%q\nnet/http sent\n%q", lean, std)
	}
	if !bytes.HasPrefix(lean, []byte("POST /hooks/a%20b/c?team=1&x=%2F HTTP/1.1\r\nHost: "+addr+"\r\nUser-Agent: Tributary/1.0\r\n")) {
		t.Errorf("request head %q", lean)
	}
}

// TestLeanPathForHTTP1TLSEndpoints: an HTTPS endpoint that speaks only HTTP/1.1 is posted to
// by the lean client, which verifies its certificate against WEBHOOK_CA_FILES and keeps the
// connection for the next POST; an endpoint whose certificate does not verify is refused by the
// lean client itself (TLS 1.2 at least, system roots and WEBHOOK_CA_FILES), class tls, and
// receives nothing.
func TestLeanPathForHTTP1TLSEndpoints(t *testing.T) {
	var protos sync.Map
	srv := httptest.NewTLSServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { protos.Store(r.Proto, true) }))
	defer srv.Close()
	client := testHTTPClient(t, func(c *Config) { c.CAFiles = []string{caFile(t, srv)} })
	dest := &schemas.Destination{ID: "d", Settings: schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: srv.URL + "/hook"}}}}
	for i := range 3 {
		res := post(context.Background(), client, 5*time.Second, &request{dest: dest, entries: dest.Settings.Webhooks, messageID: "m", body: []byte(`{}`)}, time.Now())
		if res[0].Class != Success {
			t.Fatalf("POST %d: %s (%v)", i+1, res[0].Class, res[0].Err)
		}
	}
	p := client.lean.target(srv.URL + "/hook").pool
	if p == nil || p.h2.Load() || len(p.idle) != 1 || len(p.open) != 1 {
		t.Fatalf("not posted by the lean client on one kept connection: pool %+v", p)
	}
	if _, ok := protos.Load("HTTP/1.1"); !ok {
		t.Errorf("the endpoint saw no HTTP/1.1 request")
	}

	var reached atomic.Int64
	bad := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	defer bad.Close()
	untrusting := testHTTPClient(t, nil) // httptest's certificate without its CA
	_, _, err := untrusting.lean.send(context.Background(), testMessage(bad.URL+"/hook"), time.Now().Add(5*time.Second))
	if c, _ := Classify(0, nil, err, time.Now()); c != TLSError || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a certificate no CA signed: %s (%v), want tls", c, err)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the endpoint received %d requests through a refused certificate", n)
	}
}

func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestHTTP2HostLearnedOnce: an HTTPS endpoint that picks HTTP/2 when offered it gets every POST
// over HTTP/2 (net/http), and the lean client asks it only once: after its first connection,
// dropped, every POST goes over net/http's one connection.
func TestHTTP2HostLearnedOnce(t *testing.T) {
	var conns atomic.Int64
	var protos sync.Map
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { protos.Store(r.Proto, true) }))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	client := testHTTPClient(t, func(c *Config) { c.CAFiles = []string{caFile(t, srv)} })
	dest := &schemas.Destination{ID: "d", Settings: schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: srv.URL + "/hook"}}}}
	for i := range 5 {
		res := post(context.Background(), client, 5*time.Second, &request{dest: dest, entries: dest.Settings.Webhooks, messageID: "m", body: []byte(`{}`)}, time.Now())
		if res[0].Class != Success {
			t.Fatalf("POST %d: %s (%v)", i+1, res[0].Class, res[0].Err)
		}
	}
	protos.Range(func(k, _ any) bool {
		if k != "HTTP/2.0" {
			t.Errorf("the endpoint saw an %v request", k)
		}
		return true
	})
	if p := client.lean.target(srv.URL + "/hook").pool; p == nil || !p.h2.Load() {
		t.Error("the host is not known to speak HTTP/2")
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2: the lean client's first, dropped, and net/http's", n)
	}
}

// TestLeanStaleConnectionRetriedOnce: an endpoint that closes each keep-alive connection right
// after answering (its idle timeout at zero) costs no failed delivery: each POST that finds its
// reused connection closed is sent again at once on a new one. A new connection closed without
// an answer is not retried: that is the endpoint's failure, one request.
func TestLeanStaleConnectionRetriedOnce(t *testing.T) {
	var answered atomic.Int64
	closing := rawServer(t, func(c net.Conn) {
		if _, err := readRaw(bufio.NewReader(c)); err != nil {
			return
		}
		answered.Add(1)
		_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) // no Connection: close
	})
	client := testHTTPClient(t, nil)
	for i := range 20 {
		m := testMessage("http://" + closing + "/hook")
		if status, _, err := client.lean.send(context.Background(), m, time.Now().Add(5*time.Second)); err != nil || status != 200 {
			t.Fatalf("POST %d: %d %v, want it sent again on a new connection", i+1, status, err)
		}
		time.Sleep(time.Millisecond) // the close reaches the client's socket
	}
	if n := answered.Load(); n != 20 {
		t.Errorf("%d answered, want 20", n)
	}

	var dropped atomic.Int64
	dropping := rawServer(t, func(c net.Conn) {
		if _, err := readRaw(bufio.NewReader(c)); err == nil {
			dropped.Add(1)
		}
	})
	_, _, err := client.lean.send(context.Background(), testMessage("http://"+dropping+"/hook"), time.Now().Add(5*time.Second))
	if c, _ := Classify(0, nil, err, time.Now()); c != ConnError || dropped.Load() != 1 {
		t.Fatalf("a new connection closed without an answer: %s (%v) after %d requests, want connection after 1", c, err, dropped.Load())
	}
}

// TestLeanAnswersReadAsNetHTTP: the lean client and net/http read the same answers alike:
// status, Retry-After, an answer whose body is long or chunked or stalls after the status, a
// header block longer than its buffer, an interim 100 Continue, an HTTP/1.0 answer. No answer
// within the deadline is a timeout, and so is a TLS handshake that never ends.
func TestLeanAnswersReadAsNetHTTP(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	for _, c := range []struct {
		name       string
		answer     string
		status     int
		retryAfter string
		class      Class
		keep       bool // the lean client reuses the connection
	}{
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", 204, "", Success, true},
		{"429 Retry-After", "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n", 429, "7", Status429, true},
		{"503 Retry-After date", "HTTP/1.1 503 Service Unavailable\r\nretry-after: Fri, 31 Dec 2100 23:59:59 GMT\r\nContent-Length: 0\r\n\r\n", 503, "Fri, 31 Dec 2100 23:59:59 GMT", Status5xx, true},
		{"long body", "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(long)) + "\r\n\r\n" + long, 200, "", Success, false},
		{"chunked", "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 404, "", Status4xx, true},
		{"body stalls", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial", 200, "", Success, false},
		{"long header block", "HTTP/1.1 500 Internal Server Error\r\nRetry-After: 3\r\nX-Big: " + strings.Repeat("y", 6000) + "\r\nContent-Length: 0\r\n\r\n", 500, "3", Status5xx, false},
		{"interim answer", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", 201, "", Success, true},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\n\r\nbye", 200, "", Success, false},
		{"body until close", "HTTP/1.1 200 OK\r\n\r\nbye", 200, "", Success, false},
		{"no reason phrase", "HTTP/1.1 202\r\ncontent-length: 0\r\nX-Odd:  spaced \r\n\r\n", 202, "", Success, true},
		{"header block past the bound", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("z", 11<<20) + "\r\n\r\n", 0, "", ConnError, false},
		{"redirect not followed", "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\n\r\n", 302, "", Status4xx, true},
		{"no answer", "", 0, "", Timeout, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var conns atomic.Int64
			addr := rawServer(t, func(conn net.Conn) {
				conns.Add(1)
				br := bufio.NewReader(conn)
				for {
					if _, err := readRaw(br); err != nil {
						return
					}
					_, _ = conn.Write([]byte(c.answer))
					if !strings.HasSuffix(c.answer, "\r\n\r\n") || strings.HasPrefix(c.answer, "HTTP/1.0") || strings.Contains(c.answer, "Content-Length: 100") {
						if !strings.HasSuffix(c.answer, "bye") {
							_, _ = io.Copy(io.Discard, conn) // until the client closes
						}
						return
					}
				}
			})
			client := testHTTPClient(t, nil)
			for _, p := range []struct {
				name string
				p    poster
			}{{"lean", client.lean}, {"net/http", client.std}} {
				wait := 300 * time.Millisecond
				if len(c.answer) > 10<<20 { // 11 MiB to read: time for it under the race detector
					wait = 20 * time.Second
				}
				start := time.Now()
				status, retryAfter, err := p.p.send(context.Background(), testMessage("http://"+addr+"/hook"), start.Add(wait))
				class, _ := classifyAnswer(status, retryAfter, start)
				if err != nil {
					class, _ = Classify(0, nil, err, start)
				}
				if status != c.status || retryAfter != c.retryAfter || class != c.class {
					t.Errorf("%s: %d %q %s (%v), want %d %q %s", p.name, status, retryAfter, class, err, c.status, c.retryAfter, c.class)
				}
				if took := time.Since(start); took > wait+2*time.Second {
					t.Errorf("%s: took %v", p.name, took)
				}
				if p.name == "lean" && c.class != Timeout {
					before := conns.Load()
					if _, _, err := client.lean.send(context.Background(), testMessage("http://"+addr+"/hook"), time.Now().Add(wait)); err != nil && c.class == Success {
						t.Errorf("second POST: %v", err)
					}
					if kept := conns.Load() == before; kept != c.keep {
						t.Errorf("lean: connection reused %v, want %v", kept, c.keep)
					}
				}
			}
		})
	}

	t.Run("TLS handshake never ends", func(t *testing.T) {
		addr := rawServer(t, func(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) })
		client := testHTTPClient(t, nil)
		start := time.Now()
		_, _, err := client.lean.send(context.Background(), testMessage("https://"+addr+"/hook"), start.Add(300*time.Millisecond))
		if c, _ := Classify(0, nil, err, start); c != Timeout || time.Since(start) > 2*time.Second {
			t.Fatalf("%s (%v) after %v, want timeout", c, err, time.Since(start))
		}
	})
}

// TestLeanGuardRefusesPrivateAddresses: without WEBHOOK_ALLOW_PRIVATE the lean client dials
// through the address guard: a loopback address, the name localhost and a name that resolves
// to loopback are refused (blocked_address) and nothing reaches the endpoint.
func TestLeanGuardRefusesPrivateAddresses(t *testing.T) {
	var reached atomic.Int64
	addr := rawServer(t, func(net.Conn) { reached.Add(1) })
	_, port, _ := net.SplitHostPort(addr)
	client := testHTTPClient(t, func(c *Config) { c.AllowPrivate = false })
	for _, host := range []string{"127.0.0.1", "localhost", "localhost.", "127.0.0.1.", "[::1]"} {
		_, _, err := client.lean.send(context.Background(), testMessage("http://"+net.JoinHostPort(strings.Trim(host, "[]"), port)+"/hook"), time.Now().Add(5*time.Second))
		if c, _ := Classify(0, nil, err, time.Now()); c != Blocked || errors.Is(err, errUseStd) {
			t.Errorf("%s: %s (%v), want blocked_address from the lean client", host, c, err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if n := reached.Load(); n != 0 {
		t.Fatalf("%d connections reached a loopback endpoint through the guard", n)
	}
}

// TestLeanPOSTEndsWithTheGrace: the end of the client's stop context (the deliverer's grace)
// ends a POST in progress at once, class connection as with net/http, and fails the next ones
// without a connection.
func TestLeanPOSTEndsWithTheGrace(t *testing.T) {
	addr := rawServer(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) }) // never answers
	cfg := DefaultConfig()
	cfg.AllowPrivate = true
	stop, end := context.WithCancel(context.Background())
	client, err := newWebhookClient(cfg, nil, stop)
	if err != nil {
		t.Fatal(err)
	}
	defer client.close()
	time.AfterFunc(100*time.Millisecond, end)
	start := time.Now()
	_, _, err = client.send(stop, testMessage("http://"+addr+"/hook"), start.Add(10*time.Second))
	if c, _ := Classify(0, nil, err, time.Now()); c != ConnError || time.Since(start) > 2*time.Second {
		t.Fatalf("%s (%v) after %v, want connection at the grace's end", c, err, time.Since(start))
	}
	_, _, err = client.send(stop, testMessage("http://"+addr+"/hook"), time.Now().Add(10*time.Second))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a POST after the grace: %v", err)
	}
}

// TestLeanIdleConnectionsBounded: a host keeps at most DELIVERER_MAX_PER_HOST idle connections;
// idle ones older than 90 s are closed, by the cleaner or when found.
func TestLeanIdleConnectionsBounded(t *testing.T) {
	release := make(chan struct{})
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	defer close(release)
	client := testHTTPClient(t, func(c *Config) { c.MaxPerHost, c.MaxWaitingPerHost = 2, 0 })
	dest := &schemas.Destination{ID: "d", Settings: schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: srv.URL}, {URL: srv.URL}, {URL: srv.URL}, {URL: srv.URL}}}}
	done := make(chan []urlResult)
	go func() {
		done <- post(context.Background(), client, 5*time.Second, &request{dest: dest, entries: dest.Settings.Webhooks, messageID: "m", body: []byte(`{}`)}, time.Now())
	}()
	for conns.Load() < 4 {
		time.Sleep(time.Millisecond)
	}
	release <- struct{}{}
	release <- struct{}{}
	release <- struct{}{}
	release <- struct{}{}
	for _, r := range <-done {
		if r.Class != Success {
			t.Fatalf("%s (%v)", r.Class, r.Err)
		}
	}
	p := client.lean.target(srv.URL).pool
	p.mu.Lock()
	idle, open := len(p.idle), len(p.open)
	p.mu.Unlock()
	if idle != 2 || open != 2 {
		t.Fatalf("%d idle of %d open, want 2 of 2 (DELIVERER_MAX_PER_HOST)", idle, open)
	}
	p.closeIdle(time.Now().Add(idleConnTimeout))
	p.mu.Lock()
	idle, open = len(p.idle), len(p.open)
	p.mu.Unlock()
	if idle != 0 || open != 0 {
		t.Fatalf("%d idle of %d open after 90 s, want none", idle, open)
	}
}
