package deliverer_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// logLines parses the JSON log lines written to b.
func logLines(b *servicetest.Buffer) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if l != "" && json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestFailuresAreLogged: a destination whose endpoint answers 503 used to produce no log line
// until its messages reached the DLQ, hours later. Now its first failure is a warn line (the
// destination, the host, the status, when the message is retried) — once, not once per
// attempt — and a line says when it delivers again. No line holds the URL's path or query
// (a token there is a secret) or the body.
func TestFailuresAreLogged(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	h := newHarness(t, "1s,1s,1s,1s,1s,1s,1s,1s,1s,1s", `
sources: [{id: web, writeKey: wk}]
destinations:
  - id: order-hooks
    type: webhooks
    sources: [web]
    settings: {webhooks: [{url: "`+srv.URL+`/hooks?token=s3cr3t-token"}], sharedSecret: hush}
`)
	var logs servicetest.Buffer
	h.logger = zerolog.New(&logs).Level(zerolog.InfoLevel)
	h.run(h.config())
	h.send("order-hooks", messageIDs(0, 20)...)

	find := func(msgPrefix string) map[string]any {
		for _, l := range logLines(&logs) {
			if m, _ := l["message"].(string); strings.HasPrefix(m, msgPrefix) {
				return l
			}
		}
		return nil
	}
	deadline := time.Now().Add(20 * time.Second)
	for find("destination order-hooks failing") == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	first := find("destination order-hooks failing")
	if first == nil {
		t.Fatalf("no failure line:\n%v", logLines(&logs))
	}
	if first["level"] != "warn" || first["destination"] != "order-hooks" || first["host"] != host ||
		first["status"] != float64(503) || first["next_retry"] == nil ||
		!strings.Contains(first["message"].(string), "503 Service Unavailable") {
		t.Errorf("failure line %v", first)
	}
	time.Sleep(2500 * time.Millisecond) // more attempts fail: no more lines within 30 s
	n := 0
	for _, l := range logLines(&logs) {
		if m, _ := l["message"].(string); strings.HasPrefix(m, "destination order-hooks") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d lines about order-hooks while it keeps failing, want 1 (then a summary every 30 s)", n)
	}
	failing.Store(false)
	deadline = time.Now().Add(20 * time.Second)
	for find("destination order-hooks delivers again") == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if rec := find("destination order-hooks delivers again"); rec == nil || rec["failed"].(float64) < 20 {
		t.Errorf("recovery line %v (want one counting at least the 20 first failures)", rec)
	}
	all := ""
	for _, l := range logLines(&logs) {
		b, _ := json.Marshal(l)
		all += string(b) + "\n"
	}
	for _, secret := range []string{"s3cr3t-token", "/hooks", "hush"} {
		if strings.Contains(all, secret) {
			t.Errorf("the log holds %q:\n%s", secret, all)
		}
	}
}
