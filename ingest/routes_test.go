package ingest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tributary-cdp/tributary/schemas"
)

// spellings returns every path a route answers at: long and short, each with and without a
// trailing slash.
func spellings(rt route) []string {
	out := []string{"/v1/" + rt.path, "/v1/" + rt.path + "/"}
	if rt.short != "" {
		out = append(out, "/v1/"+rt.short, "/v1/"+rt.short+"/")
	}
	return out
}

// TestEveryPathSpellingAndContentType: each endpoint answers at its long and short path, with
// and without a trailing slash, whatever the Content-Type (analytics.js sends text/plain), and
// writes what the long form writes: single calls take their type from the path.
func TestEveryPathSpellingAndContentType(t *testing.T) {
	h := newHarness(t)
	contentTypes := []string{"application/json", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", ""}
	want := map[string]string{} // userId → type it must arrive with
	for _, rt := range routes {
		for _, path := range spellings(rt) {
			for i, ct := range contentTypes {
				user := fmt.Sprintf("%s|%d", path, i)
				// The body's type differs from the path's: the path decides for single calls.
				msg := fmt.Sprintf(`{"type":"track","event":"E","userId":%q,"previousId":"p","groupId":"g"}`, user)
				body, typ := msg, rt.callType
				if rt.callType == "" {
					body, typ = `{"batch":[`+msg+`]}`, schemas.TypeTrack
				}
				want[user] = typ
				t.Run(fmt.Sprintf("%s %q", path, ct), func(t *testing.T) {
					status, resp := h.post(path, []byte(body), map[string]string{"Content-Type": ct, "Authorization": basic(testKey)["Authorization"]})
					if status != 200 || resp != `{"success":true}` {
						t.Errorf("got %d %s", status, resp)
					}
				})
			}
		}
	}
	got := map[string]string{}
	for _, r := range consume(t, h.brokers, schemas.TopicEvents, len(want)) {
		m := decodeValue(t, r)
		got[m["userId"].(string)] = m["type"].(string)
		if header(r, schemas.HeaderSourceID) != "web" {
			t.Errorf("%s: source %q", r.Key, header(r, schemas.HeaderSourceID))
		}
	}
	for user, typ := range want {
		if got[user] != typ {
			t.Errorf("%s: type %q, want %q", user, got[user], typ)
		}
	}
}

// TestShortPathsKeepEveryRuleOfTheLongOnes: limits, errors and enrichment are the long path's.
func TestShortPathsKeepEveryRuleOfTheLongOnes(t *testing.T) {
	h := newHarness(t)
	big := `{"userId":"u","event":"E","properties":{"x":"` + strings.Repeat("a", schemas.MaxMessageBytes) + `"}}`
	hugeBatch := `{"batch":[{"type":"track","userId":"u","event":"E","properties":{"x":"` + strings.Repeat("a", schemas.MaxBatchBytes) + `"}}]}`
	for _, tc := range []struct {
		name, path, body string
		headers          map[string]string
		status           int
		want             string
	}{
		{"single over 32 KB", "/v1/t", big, basic(testKey), 413, `{"code":"payload_too_large","message":"the body is larger than 32768 bytes"}`},
		{"batch over 500 KB", "/v1/b/", hugeBatch, basic(testKey), 413, `{"code":"payload_too_large","message":"the body is larger than 512000 bytes"}`},
		{"invalid call", "/v1/t/", `{"userId":"u"}`, basic(testKey), 400, `{"code":"invalid_message","message":"event: required"}`},
		{"malformed JSON", "/v1/i", `{"userId":`, basic(testKey), 400, `{"code":"invalid_json","message":"invalid JSON at byte 10: unexpected end of input"}`},
		{"unknown key", "/v1/p", `{"userId":"u"}`, basic("nope"), 401, `{"code":"unauthorized","message":"missing or unknown write key: send it as the HTTP Basic user name"}`},
		{"no key", "/v1/import/", `{"batch":[]}`, nil, 401, `{"code":"unauthorized","message":"missing or unknown write key: send it as the HTTP Basic user name"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := h.post(tc.path, []byte(tc.body), tc.headers)
			if status != tc.status || body != tc.want {
				t.Errorf("got %d %s\nwant %d %s", status, body, tc.status, tc.want)
			}
		})
	}
	t.Run("GET", func(t *testing.T) {
		resp := do(t, http.MethodGet, h.srv.URL+"/v1/t/", nil)
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST, OPTIONS" || !strings.Contains(resp.body, `"code":"method_not_allowed"`) {
			t.Errorf("got %d %v %s", resp.StatusCode, resp.Header, resp.body)
		}
	})

	// What analytics.js sends: text/plain, the key in the body and as Basic, its own
	// context.userAgent, which is kept as sent; context.ip comes from the peer.
	body := `{"type":"track","event":"Clicked","anonymousId":"anon-1","writeKey":"` + testKey + `","context":{"userAgent":"Mozilla/5.0 (Test)","page":{"path":"/pricing"},"library":{"name":"analytics.js","version":"next-1.84.3"}},"sentAt":"2026-11-23T10:00:00.000Z"}`
	status, resp := h.post("/v1/t", []byte(body), map[string]string{"Content-Type": "text/plain", "Authorization": basic(testKey)["Authorization"], "X-Retry-Count": "1", "User-Agent": "Go-http-client/1.1"})
	if status != 200 {
		t.Fatalf("analytics.js-like call: %d %s", status, resp)
	}
	m := decodeValue(t, consume(t, h.brokers, schemas.TopicEvents, 1)[0])
	ctx, _ := m["context"].(map[string]any)
	page, _ := ctx["page"].(map[string]any)
	if m["type"] != "track" || m["anonymousId"] != "anon-1" || ctx["userAgent"] != "Mozilla/5.0 (Test)" || ctx["ip"] != "127.0.0.1" || page["path"] != "/pricing" || m["receivedAt"] == nil || m["writeKey"] != nil {
		t.Errorf("message %v", m)
	}
}

// TestUnknownPathsAnswerJSON404: never the router's plain text.
func TestUnknownPathsAnswerJSON404(t *testing.T) {
	h := newHarness(t)
	n := 0
	for _, path := range []string{"/", "/v1", "/v1/", "/v1/trak", "/v1/track/extra", "/v2/track", "/v1/x", "/v1/projects/" + testKey, "/v1/projects/" + testKey + "/settings/extra", "/v1/m"} {
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodOptions} {
			t.Run(method+" "+path, func(t *testing.T) {
				resp := do(t, method, h.srv.URL+path, nil)
				want := `{"code":"not_found","message":"no endpoint at ` + path + ` (see docs/ingest.md#endpoints)"}`
				if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" || resp.body != want {
					t.Errorf("got %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.body)
				}
			})
			n++
		}
	}
	if got := testutil.ToFloat64(h.svc.metrics.requests.WithLabelValues("unknown", "404")); got != float64(n) {
		t.Errorf("counted %v unknown paths, want %d", got, n)
	}
}

type answer struct {
	*http.Response
	body string
}

// do sends one request with the given headers and reads the whole answer.
func do(t *testing.T, method, url string, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp, strings.TrimSpace(string(b))}
}
