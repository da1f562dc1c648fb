package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// liveStreams is the console's tributary_console_live_streams gauge.
func (h *harness) liveStreams(t testing.TB) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "tributary_console_live_streams" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no tributary_console_live_streams")
	return 0
}

// stream is an open live stream, or the answer that refused one.
type stream struct {
	status int
	header http.Header
	first  string // the stream's first event (up to its blank line), or the error body
	cancel func()
}

// openStream opens path with c (the API's token when token is set) and reads its first event.
func openStream(t *testing.T, c *http.Client, url, token string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &stream{status: resp.StatusCode, header: resp.Header, cancel: func() { cancel(); resp.Body.Close() }}
	t.Cleanup(s.cancel)
	rd := bufio.NewReader(resp.Body)
	var b strings.Builder
	for {
		line, err := rd.ReadString('\n')
		b.WriteString(line)
		if err != nil || line == "\n" {
			break
		}
	}
	s.first = b.String()
	return s
}

// TestLiveStreamLimits: the console keeps at most CONSOLE_MAX_STREAMS live streams and
// CONSOLE_MAX_STREAMS_PER_SESSION per UI session (and for the API's callers together); one more
// is refused, with 429 and the error body on the API, with an "event: refused" the page shows
// in the UI; a stream that ends gives its place back.
func TestLiveStreamLimits(t *testing.T) {
	h := newHarness(t, func(c *console.Config) { c.MaxStreams, c.MaxStreamsPerSession = 3, 2 })
	api := h.srv.URL + "/v1/sources/web/events/live"
	page := h.srv.URL + "/sources/web/live"
	user1, user2 := h.signIn(t), h.signIn(t)

	api1 := openStream(t, h.srv.Client(), api, testToken)
	api2 := openStream(t, h.srv.Client(), api, testToken)
	for _, s := range []*stream{api1, api2} {
		if s.status != http.StatusOK || !strings.Contains(s.first, ": watching source web") {
			t.Fatalf("a stream within the limits: %d %q", s.status, s.first)
		}
	}
	api3 := openStream(t, h.srv.Client(), api, testToken)
	var e struct{ Code, Message string }
	if api3.status != http.StatusTooManyRequests || json.Unmarshal([]byte(api3.first), &e) != nil || e.Code != "too_many_streams" ||
		!strings.Contains(e.Message, "the API's callers have 2 live streams open") || !strings.Contains(e.Message, "CONSOLE_MAX_STREAMS_PER_SESSION") ||
		api3.header.Get("Retry-After") == "" {
		t.Fatalf("a third API stream (the API's callers have 2): %d %v %q", api3.status, api3.header, api3.first)
	}
	u1a := openStream(t, user1.c, page, "")
	if u1a.status != http.StatusOK || !strings.Contains(u1a.first, ": watching source web") {
		t.Fatalf("a UI stream within the limits: %d %q", u1a.status, u1a.first)
	}
	refused := openStream(t, user2.c, page, "")
	if refused.status != http.StatusOK || !strings.Contains(refused.first, "event: refused") || !strings.Contains(refused.first, "CONSOLE_MAX_STREAMS)") ||
		!strings.Contains(refused.first, "retry: 60000") {
		t.Fatalf("a fourth stream (the console has 3): %d %q", refused.status, refused.first)
	}
	if got := h.liveStreams(t); got != 3 {
		t.Errorf("tributary_console_live_streams %v, want 3", got)
	}

	api1.cancel()
	servicetest.Eventually(t, 5*time.Second, "the closed stream's place", func() bool { return h.liveStreams(t) == 2 })
	if s := openStream(t, user1.c, page, ""); s.status != http.StatusOK || !strings.Contains(s.first, ": watching source web") {
		t.Fatalf("a second stream of user 1, once one ended: %q", s.first)
	}
	api2.cancel()
	servicetest.Eventually(t, 5*time.Second, "the closed stream's place", func() bool { return h.liveStreams(t) == 2 })
	if s := openStream(t, user1.c, page, ""); !strings.Contains(s.first, "event: refused") || !strings.Contains(s.first, "CONSOLE_MAX_STREAMS_PER_SESSION") {
		t.Fatalf("a third stream of user 1 (2 per session): %q", s.first)
	}
	if s := openStream(t, user2.c, page, ""); !strings.Contains(s.first, ": watching source web") {
		t.Fatalf("user 2's stream, within both limits: %q", s.first)
	}
}

// TestLiveStreamClientNotReading: a client that opens a stream and never reads it is dropped
// once a write has waited StreamWriteTimeout, and the stream's goroutines end.
func TestLiveStreamClientNotReading(t *testing.T) {
	h := newHarness(t, func(c *console.Config) { c.StreamWriteTimeout = 300 * time.Millisecond })

	conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096) // a small window: the console's writes block soon
	fmt.Fprintf(conn, "GET /v1/sources/web/events/live HTTP/1.1\r\nHost: console\r\nAuthorization: Bearer %s\r\n\r\n", testToken)
	servicetest.Eventually(t, 5*time.Second, "the stream", func() bool { return h.liveStreams(t) == 1 })
	if !goroutineIn("console.(*Service).streamEvents") {
		t.Fatal("no goroutine in streamEvents while the stream is open")
	}

	// Large events, more than the sockets' buffers hold; the client reads none of them.
	pad := strings.Repeat("x", 30<<10)
	for i := range 8 {
		var recs []*kgo.Record
		for j := range 25 {
			recs = append(recs, &kgo.Record{Topic: schemas.TopicEvents, Key: []byte("u1"),
				Value:   fmt.Appendf(nil, `{"type":"track","event":"Big","userId":"u1","messageId":"m-%d-%d","properties":{"pad":%q}}`, i, j, pad),
				Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("web")}, {Key: schemas.HeaderType, Value: []byte("track")}}})
		}
		h.env.Produce(recs...)
		if h.liveStreams(t) == 0 {
			break
		}
	}
	servicetest.Eventually(t, 10*time.Second, "the stream of a client that does not read to end", func() bool { return h.liveStreams(t) == 0 })
	servicetest.Eventually(t, 5*time.Second, "the stream's goroutine to end", func() bool { return !goroutineIn("console.(*Service).streamEvents") })
}

// goroutineIn reports whether a goroutine's stack has fn.
func goroutineIn(fn string) bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Contains(string(buf[:n]), fn)
		}
		buf = make([]byte, 2*len(buf))
	}
}
