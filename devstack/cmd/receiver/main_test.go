package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// The body of schemas/signature_test.go's vectors.
var testBody = []byte(`{"version":1,"type":"track","userId":"u1","event":"Signed Up","timestamp":"2026-01-02T03:04:05.678Z","messageId":"m-1"}`)

// testNow is the receiver's clock in these tests.
var testNow = time.Unix(1767323045, 0)

// syncBuffer collects log lines written from several goroutines.
type syncBuffer struct{ servicetest.Buffer }

// lines returns the JSON log lines written so far.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		out = append(out, m)
	}
	return out
}

func testConfig(t *testing.T, environ map[string]string) config {
	t.Helper()
	cfg, err := loadConfig(environ)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func testHandler(t *testing.T, environ map[string]string) (*handler, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	h := newHandler(testConfig(t, environ), zerolog.New(logs))
	h.now = func() time.Time { return testNow }
	return h, logs
}

func post(h http.Handler, body []byte, header map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// standardHeaders returns the headers of a delivery signed the Standard Webhooks way with
// secrets (and X-Signature with the first), as the deliverer sends them.
func standardHeaders(id string, ts int64, body []byte, secrets ...string) map[string]string {
	return map[string]string{
		schemas.HeaderXMessageID:       id,
		schemas.HeaderXSignature:       schemas.XSignature(secrets[0], body),
		schemas.HeaderWebhookID:        id,
		schemas.HeaderWebhookTimestamp: strconv.FormatInt(ts, 10),
		schemas.HeaderWebhookSignature: schemas.StandardWebhooksHeader(id, ts, body, secrets...),
	}
}

func TestReceiverVerifies(t *testing.T) {
	xOnly := map[string]string{"RECEIVER_SHARED_SECRET": "s3cret"}
	xRotating := map[string]string{"RECEIVER_SHARED_SECRET": "new", "RECEIVER_PREVIOUS_SHARED_SECRET": "s3cret"}
	std := func(secret string) map[string]string {
		return map[string]string{"RECEIVER_SHARED_SECRET": secret, "RECEIVER_STANDARD_WEBHOOKS": "true"}
	}
	ts := testNow.Unix()
	tampered := bytes.Replace(testBody, []byte("Signed Up"), []byte("Signed Out"), 1)
	with := func(h map[string]string, k, v string) map[string]string {
		c := map[string]string{}
		for hk, hv := range h {
			c[hk] = hv
		}
		if v == "" {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	tests := []struct {
		name    string
		environ map[string]string
		body    []byte
		header  map[string]string
		status  int
		reason  string
	}{
		{"no secret: unsigned accepted", map[string]string{}, testBody, nil, 200, ""},
		{"X-Signature good", xOnly, testBody, map[string]string{"X-Signature": "ed0ffccbf3f1bad4a5fa3343d636f8c216ffc219"}, 200, ""},
		{"X-Signature upper-case hex", xOnly, testBody, map[string]string{"X-Signature": "ED0FFCCBF3F1BAD4A5FA3343D636F8C216FFC219"}, 200, ""},
		{"X-Signature missing", xOnly, testBody, nil, 401, "missing X-Signature"},
		{"X-Signature wrong secret", xOnly, testBody, map[string]string{"X-Signature": schemas.XSignature("other", testBody)}, 401, "bad X-Signature"},
		{"X-Signature tampered body", xOnly, tampered, map[string]string{"X-Signature": schemas.XSignature("s3cret", testBody)}, 401, "bad X-Signature"},
		{"X-Signature from the previous secret", xRotating, testBody, map[string]string{"X-Signature": schemas.XSignature("s3cret", testBody)}, 200, ""},
		{"X-Signature from the new secret", xRotating, testBody, map[string]string{"X-Signature": schemas.XSignature("new", testBody)}, 200, ""},

		{"Standard Webhooks good", std("new"), testBody, standardHeaders("m-1", ts, testBody, "new"), 200, ""},
		// Tributary moved to "new" and still signs with "old": a receiver that has not
		// switched yet accepts, although X-Signature (current secret only) would not verify.
		{"Standard Webhooks rotation, receiver on the old secret", std("old"), testBody, standardHeaders("m-1", ts, testBody, "new", "old"), 200, ""},
		{"Standard Webhooks rotation, receiver on the new secret", std("new"), testBody, standardHeaders("m-1", ts, testBody, "new", "old"), 200, ""},
		{"Standard Webhooks whsec_ secret", std("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), testBody, standardHeaders("m-1", ts, testBody, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), 200, ""},
		{"Standard Webhooks 4 minutes old", std("new"), testBody, standardHeaders("m-1", ts-240, testBody, "new"), 200, ""},
		{"Standard Webhooks wrong secret", std("other"), testBody, standardHeaders("m-1", ts, testBody, "new", "old"), 401, "bad webhook-signature"},
		{"Standard Webhooks tampered body", std("new"), tampered, standardHeaders("m-1", ts, testBody, "new"), 401, "bad webhook-signature"},
		{"Standard Webhooks id changed", std("new"), testBody, with(standardHeaders("m-1", ts, testBody, "new"), "webhook-id", "m-2"), 401, "bad webhook-signature"},
		{"Standard Webhooks timestamp changed", std("new"), testBody, with(standardHeaders("m-1", ts, testBody, "new"), "webhook-timestamp", strconv.FormatInt(ts+1, 10)), 401, "bad webhook-signature"},
		{"Standard Webhooks 6 minutes old (replay)", std("new"), testBody, standardHeaders("m-1", ts-360, testBody, "new"), 401, "off the clock"},
		{"Standard Webhooks 6 minutes ahead", std("new"), testBody, standardHeaders("m-1", ts+360, testBody, "new"), 401, "off the clock"},
		{"Standard Webhooks timestamp not a number", std("new"), testBody, with(standardHeaders("m-1", ts, testBody, "new"), "webhook-timestamp", "yesterday"), 401, "not Unix seconds"},
		{"Standard Webhooks signature missing", std("new"), testBody, with(standardHeaders("m-1", ts, testBody, "new"), "webhook-signature", ""), 401, "missing webhook-id"},
		{"Standard Webhooks, only X-Signature sent", std("new"), testBody, map[string]string{"X-Signature": schemas.XSignature("new", testBody)}, 401, "missing webhook-id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, logs := testHandler(t, tc.environ)
			w := post(h, tc.body, tc.header)
			if w.Code != tc.status {
				t.Fatalf("status %d (%s), want %d", w.Code, strings.TrimSpace(w.Body.String()), tc.status)
			}
			lines := logs.lines(t)
			if len(lines) != 1 {
				t.Fatalf("want one log line per webhook, got %d:\n%s", len(lines), logs)
			}
			if tc.status != 200 {
				if !strings.Contains(w.Body.String(), tc.reason) || !strings.Contains(lines[0]["reason"].(string), tc.reason) {
					t.Fatalf("answer %q / log reason %q, want %q", w.Body.String(), lines[0]["reason"], tc.reason)
				}
				if lines[0]["signature_ok"] != false || lines[0]["level"] != "warn" {
					t.Fatalf("refusal log line: %v", lines[0])
				}
			}
			for _, secret := range []string{"s3cret", "new", "old", "whsec_"} {
				if strings.Contains(logs.String(), secret) {
					t.Fatalf("a secret is in the logs: %s", logs)
				}
			}
		})
	}
}

func TestReceiverLogsOneLinePerWebhook(t *testing.T) {
	h, logs := testHandler(t, map[string]string{"RECEIVER_SHARED_SECRET": "s3cret"})
	hdr := map[string]string{"X-Signature": schemas.XSignature("s3cret", testBody), "X-Message-Id": "m-1"}
	if w := post(h, testBody, hdr); w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	lines := logs.lines(t)
	if len(lines) != 1 {
		t.Fatalf("want one line, got %d", len(lines))
	}
	want := map[string]any{"message": "webhook", "level": "info", "type": "track", "message_id": "m-1",
		"user_id": "u1", "event": "Signed Up", "verify": "x-signature", "signature_ok": true,
		"duplicate": false, "status": float64(200), "path": "/webhook"}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("%s = %v, want %v", k, lines[0][k], v)
		}
	}
	if strings.Contains(logs.String(), "2026-01-02T03:04:05.678Z") {
		t.Error("the log holds more of the body than the fields it names")
	}
}

func TestReceiverDeduplicates(t *testing.T) {
	t.Run("by X-Message-Id", func(t *testing.T) {
		h, logs := testHandler(t, map[string]string{"RECEIVER_SHARED_SECRET": "s3cret"})
		hdr := map[string]string{"X-Signature": schemas.XSignature("s3cret", testBody), "X-Message-Id": "m-1"}
		for i := 0; i < 3; i++ {
			if w := post(h, testBody, hdr); w.Code != 200 {
				t.Fatalf("attempt %d: status %d; a duplicate must still get 2xx or it is retried", i, w.Code)
			}
		}
		hdr["X-Message-Id"] = "m-2"
		post(h, testBody, hdr)
		var dups []bool
		for _, l := range logs.lines(t) {
			dups = append(dups, l["duplicate"].(bool))
		}
		if want := []bool{false, true, true, false}; !equal(dups, want) {
			t.Fatalf("duplicate flags %v, want %v", dups, want)
		}
	})
	t.Run("by the signed webhook-id, not a forged X-Message-Id", func(t *testing.T) {
		h, logs := testHandler(t, map[string]string{"RECEIVER_SHARED_SECRET": "new", "RECEIVER_STANDARD_WEBHOOKS": "true"})
		hdr := standardHeaders("m-1", testNow.Unix(), testBody, "new")
		post(h, testBody, hdr)
		hdr["X-Message-Id"] = "forged"
		if w := post(h, testBody, hdr); w.Code != 200 {
			t.Fatalf("status %d", w.Code)
		}
		lines := logs.lines(t)
		if lines[1]["duplicate"] != true || lines[1]["message_id"] != "m-1" {
			t.Fatalf("replay with a new X-Message-Id not caught: %v", lines[1])
		}
	})
	t.Run("by the body's messageId when no header names one", func(t *testing.T) {
		h, logs := testHandler(t, map[string]string{})
		post(h, testBody, nil)
		post(h, testBody, nil)
		if l := logs.lines(t); l[0]["duplicate"] != false || l[1]["duplicate"] != true || l[1]["message_id"] != "m-1" {
			t.Fatalf("log lines %v", l)
		}
	})
}

func equal(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReceiverIDSetForgetsOldest(t *testing.T) {
	s := newIDSet(2)
	for _, step := range []struct {
		id  string
		new bool
	}{{"a", true}, {"b", true}, {"a", false}, {"c", true}, {"b", false}, {"a", true}, {"c", false}, {"b", true}} {
		if got := s.Add(step.id); got != step.new {
			t.Fatalf("Add(%q) = %v, want %v", step.id, got, step.new)
		}
	}
	if len(s.ids) != 2 || len(s.ring) != 2 {
		t.Fatalf("the set grew past its bound: %d ids, ring %d", len(s.ids), len(s.ring))
	}
}

func TestReceiverRefusesWhatIsNotAWebhook(t *testing.T) {
	h, _ := testHandler(t, map[string]string{"RECEIVER_SHARED_SECRET": "s3cret"})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/webhook", nil))
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "POST" {
		t.Fatalf("GET: %d, Allow %q", w.Code, w.Header().Get("Allow"))
	}
	big := bytes.Repeat([]byte("x"), maxBodyBytes+1)
	if w := post(h, big, map[string]string{"X-Signature": schemas.XSignature("s3cret", big)}); w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("body over %d bytes: %d", maxBodyBytes, w.Code)
	}
	notJSON := []byte("not json")
	if w := post(h, notJSON, map[string]string{"X-Signature": schemas.XSignature("s3cret", notJSON)}); w.Code != http.StatusBadRequest {
		t.Fatalf("signed non-JSON body: %d", w.Code)
	}
}

// TestReceiverServer runs the whole server over HTTP: /healthz and a webhook on any path.
func TestReceiverServer(t *testing.T) {
	logs := &syncBuffer{}
	cfg := testConfig(t, map[string]string{"RECEIVER_SHARED_SECRET": "dev-secret"})
	srv := httptest.NewServer(newServer(cfg, zerolog.New(logs)).Handler())
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /healthz: %d", resp.StatusCode)
	}
	for _, path := range []string{"/webhook", "/any/other/path"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(testBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Signature", schemas.XSignature("dev-secret", testBody))
		req.Header.Set("X-Message-Id", "id"+path)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
	}
	if n := len(logs.lines(t)); n != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", n, logs)
	}
}

func TestReceiverConfig(t *testing.T) {
	cfg := testConfig(t, map[string]string{})
	if cfg.Addr != "127.0.0.1:9000" || cfg.TimestampTolerance != 5*time.Minute || cfg.DedupSize != 100000 || cfg.Delay != 0 || cfg.verifyMode() != verifyNone {
		t.Fatalf("defaults: %+v", cfg)
	}
	for _, tc := range []struct {
		environ map[string]string
		err     string
	}{
		{map[string]string{"RECEIVER_STANDARD_WEBHOOKS": "true"}, "RECEIVER_STANDARD_WEBHOOKS needs RECEIVER_SHARED_SECRET"},
		{map[string]string{"RECEIVER_PREVIOUS_SHARED_SECRET": "old"}, "RECEIVER_PREVIOUS_SHARED_SECRET needs RECEIVER_SHARED_SECRET"},
		{map[string]string{"RECEIVER_STANDARD_WEBHOOKS": "maybe"}, "RECEIVER_STANDARD_WEBHOOKS"},
		{map[string]string{"RECEIVER_TIMESTAMP_TOLERANCE": "0s"}, "RECEIVER_TIMESTAMP_TOLERANCE"},
		{map[string]string{"RECEIVER_TIMESTAMP_TOLERANCE": "5"}, "RECEIVER_TIMESTAMP_TOLERANCE"},
		{map[string]string{"RECEIVER_DEDUP_SIZE": "0"}, "RECEIVER_DEDUP_SIZE"},
		{map[string]string{"RECEIVER_DEDUP_SIZE": "many"}, "RECEIVER_DEDUP_SIZE"},
		{map[string]string{"RECEIVER_DELAY": "-1s"}, "RECEIVER_DELAY"},
		{map[string]string{"RECEIVER_DELAY": "slow"}, "RECEIVER_DELAY"},
	} {
		if _, err := loadConfig(tc.environ); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: error %v, want one naming %s", tc.environ, err, tc.err)
		}
	}
}

// TestReceiverDelay: RECEIVER_DELAY answers each webhook that much later.
func TestReceiverDelay(t *testing.T) {
	h, _ := testHandler(t, map[string]string{"RECEIVER_DELAY": "150ms"})
	start := time.Now()
	if w := post(h, testBody, nil); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("answered after %v, want at least RECEIVER_DELAY (150ms)", took)
	}
}
