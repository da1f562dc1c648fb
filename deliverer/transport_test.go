package deliverer

import (
	"bufio"
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestStaleConnectionRetriedAtOnce: a server that closes a keep-alive connection just as the
// next request arrives on it (what every server's idle timeout does, sooner or later) costs no
// attempt: the POST goes again at once on a new connection.
func TestStaleConnectionRetriedAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var answered, dropped atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // answers the first request of each connection; closes it on the second
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = req.Body.Read(make([]byte, 4096))
					if n > 0 {
						dropped.Add(1)
						return
					}
					answered.Add(1)
					_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
				}
			}()
		}
	}()
	client := testHTTPClient(t, nil)
	dest := &schemas.Destination{ID: "d", Settings: schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: "http://" + ln.Addr().String() + "/hook"}}}}
	for i := range 5 {
		res := post(context.Background(), client, 5*time.Second, &request{dest: dest, entries: dest.Settings.Webhooks, messageID: "m", body: []byte(`{}`)}, time.Now())
		if res[0].Class != Success {
			t.Fatalf("POST %d on a connection the server closed: %s (%v), want it sent again on a new one", i+1, res[0].Class, res[0].Err)
		}
	}
	if answered.Load() != 5 || dropped.Load() != 4 {
		t.Errorf("%d answered, %d dropped: want 5 and 4", answered.Load(), dropped.Load())
	}
}

// TestHTTP2WhenOffered: an HTTPS endpoint that offers HTTP/2 (ALPN) gets it, through the
// guarded dialer and the deliverer's own TLS settings.
func TestHTTP2WhenOffered(t *testing.T) {
	var proto atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		proto.Store(r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	client := testHTTPClient(t, func(c *Config) { c.CAFiles = []string{ca} })
	dest := &schemas.Destination{ID: "d", Settings: schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: srv.URL + "/hook"}}}}
	res := post(context.Background(), client, 5*time.Second, &request{dest: dest, entries: dest.Settings.Webhooks, messageID: "m", body: []byte(`{}`)}, time.Now())
	if res[0].Class != Success {
		t.Fatalf("POST: %s (%v)", res[0].Class, res[0].Err)
	}
	if got := proto.Load(); got != "HTTP/2.0" {
		t.Errorf("the endpoint saw %v, want HTTP/2.0", got)
	}
}

// testHTTPClient is the deliverer's HTTP client with loopback allowed (and mutate applied to
// its config), closed when the test ends.
func testHTTPClient(tb testing.TB, mutate func(*Config)) *webhookClient {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.AllowPrivate = true
	if mutate != nil {
		mutate(&cfg)
	}
	client, err := newWebhookClient(cfg, nil, context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(client.close)
	return client
}
