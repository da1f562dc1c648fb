package ingest

import (
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// slowBody opens a request whose headers arrive and whose body does not (one byte of it), as a
// slow-body attacker does, and returns the connection (closed at the end of the test).
func slowBody(t *testing.T, h *harness, key string, extra ...string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := "POST /v1/track HTTP/1.1\r\nHost: ingest\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
	if key != "" {
		head += "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(key+":")) + "\r\n"
	}
	for _, e := range extra {
		head += e + "\r\n"
	}
	if _, err := fmt.Fprint(c, head+"\r\n{"); err != nil {
		t.Fatal(err)
	}
	return c
}

// settle gives the server a moment to take the slow requests in.
func settle() { time.Sleep(200 * time.Millisecond) }

// TestSlowBodiesCannotTakeTheSlots: the in-flight slot used to be taken before the write key was
// checked and before the body was read, so connections trickling a body — even with an invalid
// key — made real requests get 503 overloaded. Now a write key in the headers is checked first
// (an unknown one is refused 401 at once and takes nothing), and one client address holds at
// most INGEST_MAX_IN_FLIGHT_PER_IP requests (429 beyond).
func TestSlowBodiesCannotTakeTheSlots(t *testing.T) {
	track := []byte(`{"type":"track","event":"Signed Up","userId":"u1"}`)
	t.Run("unknown keys take no slot", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.MaxInFlight, c.MaxInFlightPerIP = 4, 0 })
		for range 20 {
			slowBody(t, h, "wk_attacker")
		}
		settle()
		if status, resp := h.post("/v1/track", track, basic(testKey)); status != http.StatusOK {
			t.Errorf("a real request beside 20 slow bodies with an unknown key: %d %s, want 200", status, resp)
		}
		if status, _ := h.post("/v1/track", track, basic("wk_attacker")); status != http.StatusUnauthorized {
			t.Errorf("an unknown key: %d, want 401", status)
		}
	})
	t.Run("a refused slow body is answered and closed at once", func(t *testing.T) {
		// Go's server reads up to 256 KB of an unread body before it writes the answer, to keep
		// the connection: for a body trickling in, the 401 came only once the whole body had.
		h := newHarness(t, func(c *Config) { c.MaxInFlight, c.MaxInFlightPerIP = 4, 0 })
		c := slowBody(t, h, "wk_attacker")
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		got, err := io.ReadAll(c) // the answer, then the end of the connection
		if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 401") {
			t.Fatalf("answer to an unknown key with a slow body: %q, %v; want a 401 and the connection closed at once", got, err)
		}
	})
	t.Run("one address holds at most its share", func(t *testing.T) {
		h := newHarness(t, func(c *Config) {
			c.MaxInFlight, c.MaxInFlightPerIP = 16, 3
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		})
		for range 3 {
			slowBody(t, h, testKey, "X-Forwarded-For: 203.0.113.7")
		}
		settle()
		if status, resp := h.post("/v1/track", track, map[string]string{"Authorization": basic(testKey)["Authorization"], "X-Forwarded-For": "203.0.113.7"}); status != http.StatusTooManyRequests {
			t.Errorf("a fourth request from the same address: %d %s, want 429", status, resp)
		}
		if status, resp := h.post("/v1/track", track, map[string]string{"Authorization": basic(testKey)["Authorization"], "X-Forwarded-For": "198.51.100.20"}); status != http.StatusOK {
			t.Errorf("a request from another address: %d %s, want 200", status, resp)
		}
	})
	t.Run("a private peer without trusted proxies gets the larger private bound", func(t *testing.T) {
		// It is most likely a load balancer relaying every client: bounding it like one client
		// would bound the whole ingest.
		h := newHarness(t, func(c *Config) { c.MaxInFlight, c.MaxInFlightPerIP, c.MaxInFlightPerPrivateIP = 16, 3, 8 })
		for range 4 {
			slowBody(t, h, testKey)
		}
		settle()
		if status, resp := h.post("/v1/track", track, basic(testKey)); status != http.StatusOK {
			t.Errorf("a fifth request from the loopback peer: %d %s, want 200", status, resp)
		}
	})
	t.Run("one private peer's slow bodies leave slots to the others", func(t *testing.T) {
		// Without INGEST_TRUSTED_PROXIES a private peer used to be unbounded: its slow bodies (a
		// valid key) took every slot, and every other peer got 503 overloaded. Now it holds at
		// most INGEST_MAX_IN_FLIGHT_PER_PRIVATE_IP, never more than three quarters of
		// INGEST_MAX_IN_FLIGHT (here unset: the three-quarter share, 12 of 16).
		h := newHarness(t, func(c *Config) { c.MaxInFlight, c.MaxInFlightPerIP, c.MaxInFlightPerPrivateIP = 16, 3, 0 })
		for range 20 {
			slowBody(t, h, testKey)
		}
		settle()
		if status, resp := h.post("/v1/track", track, basic(testKey)); status != http.StatusTooManyRequests {
			t.Errorf("one more request from the peer holding 12 slow bodies: %d %s, want 429", status, resp)
		}
		other := fromAddress(t, "127.0.0.2")
		for i := range 4 { // the quarter left to the others
			if status, resp := postFrom(t, other, h, track, basic(testKey)); status != http.StatusOK {
				t.Errorf("request %d from another peer beside 20 slow bodies of one private peer: %d %s, want 200", i+1, status, resp)
			}
		}
	})
	t.Run("the default private bound leaves a quarter of the slots", func(t *testing.T) {
		c := DefaultConfig()
		if got, want := c.privatePeerBound(), c.MaxInFlight*3/4; got != want || got < c.MaxInFlightPerIP {
			t.Errorf("default private-peer bound %d, want %d (three quarters of INGEST_MAX_IN_FLIGHT, more than INGEST_MAX_IN_FLIGHT_PER_IP)", got, want)
		}
		c.MaxInFlight = 100 // an operator who lowers the global bound keeps a quarter for the others
		if got := c.privatePeerBound(); got != 75 {
			t.Errorf("private-peer bound with INGEST_MAX_IN_FLIGHT=100: %d, want 75", got)
		}
		c.MaxInFlight = 0
		if got := c.privatePeerBound(); got != c.MaxInFlightPerPrivateIP {
			t.Errorf("private-peer bound without a global bound: %d, want %d", got, c.MaxInFlightPerPrivateIP)
		}
	})
	t.Run("keys only in the body share a smaller pool", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.MaxInFlight, c.MaxInFlightPerIP = 16, 0 }) // body-key pool: 2
		for range 2 {
			slowBody(t, h, "")
		}
		settle()
		body := []byte(`{"type":"track","event":"Signed Up","userId":"u1","writeKey":"` + testKey + `"}`)
		if status, _ := h.post("/v1/track", body, nil); status != http.StatusServiceUnavailable {
			t.Errorf("a body-key request with its pool taken: %d, want 503", status)
		}
		if status, resp := h.post("/v1/track", track, basic(testKey)); status != http.StatusOK {
			t.Errorf("a request with its key in the headers: %d %s, want 200 (its own pool)", status, resp)
		}
	})
}

// fromAddress is an HTTP client whose connections come from the loopback address local (Linux
// routes all of 127.0.0.0/8 to the loopback interface): another peer than the test's own.
func fromAddress(t *testing.T, local string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// postFrom posts body to /v1/track of h with headers through c.
func postFrom(t *testing.T, c *http.Client, h *harness, body []byte, headers map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/track", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
