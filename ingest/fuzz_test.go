package ingest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzHandler posts arbitrary bodies to every endpoint: the handler never panics, and answers
// only 200 (with a success body), 400, 401 or 413; a 200 always means the records were
// acknowledged by the embedded broker.
func FuzzHandler(f *testing.F) {
	for _, s := range []string{
		`{"userId":"u","event":"E"}`, `{"batch":[{"type":"track","userId":"u","event":"E"},{"type":"x"}]}`,
		`{"batch":[]}`, `{"writeKey":"` + testKey + `","userId":"u","event":"E"}`, `{}`, `[]`, `{"batch":[{"type":"alias","userId":"a","previousId":"b"}],"context":{"ip":"1"}}`,
	} {
		for _, path := range []string{"/v1/track", "/v1/batch", "/v1/identify", "/v1/alias"} {
			f.Add(path, []byte(s))
		}
	}
	h := newHarness(f)
	handler := h.svc.Handler()
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		switch path {
		case "/v1/track", "/v1/batch", "/v1/identify", "/v1/alias", "/v1/page", "/v1/screen", "/v1/group", "/v1/import":
		default:
			path = "/v1/batch"
		}
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.SetBasicAuth(testKey, "")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		switch rec.Code {
		case 200:
			if !bytes.HasPrefix(rec.Body.Bytes(), []byte(`{"success":true`)) {
				t.Fatalf("200 with body %s", rec.Body.Bytes())
			}
		case 400, 401, 413:
			if !bytes.HasPrefix(rec.Body.Bytes(), []byte(`{"code":`)) {
				t.Fatalf("%d with body %s", rec.Code, rec.Body.Bytes())
			}
		default:
			t.Fatalf("status %d for %s %q: %s", rec.Code, path, body, rec.Body.Bytes())
		}
	})
}
