package console_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// The API description, console/openapi.yaml, is checked against the handlers: the document is
// a valid OpenAPI 3.1 document (kin-openapi, whose request and response validation uses JSON
// Schema 2020-12 for 3.1 documents); every route of the console is in it and nothing else;
// and every route is called (successes and the main errors), each request and answer
// validated against it, so the description cannot drift from the code.

// oasLoad loads and validates the embedded description.
func oasLoad(t testing.TB) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(console.OpenAPI)
	if err != nil {
		t.Fatalf("loading openapi.yaml: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi.yaml is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("openapi.yaml is not valid: %v", err)
	}
	return doc
}

// oasOperations is every operation of doc as "METHOD /path".
func oasOperations(doc *openapi3.T) []string {
	var ops []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	slices.Sort(ops)
	return ops
}

// oasRoutePattern matches a route pattern of net/http's ServeMux under /v1/ in the source.
var oasRoutePattern = regexp.MustCompile(`"(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) (/v1/[^"]*)"`)

// TestOpenAPIRoutes: the routes registered in the package's source are exactly the
// operations of openapi.yaml (a new route without a description fails here).
func TestOpenAPIRoutes(t *testing.T) {
	doc := oasLoad(t)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range oasRoutePattern.FindAllStringSubmatch(string(b), -1) {
			routes = append(routes, m[1]+" "+m[2])
		}
	}
	slices.Sort(routes)
	if len(routes) < 30 {
		t.Fatalf("found only %d routes in the source: %v", len(routes), routes)
	}
	ops := oasOperations(doc)
	for _, r := range routes {
		if !slices.Contains(ops, r) {
			t.Errorf("route %s is not in openapi.yaml", r)
		}
	}
	for _, op := range ops {
		if !slices.Contains(routes, op) {
			t.Errorf("openapi.yaml describes %s, which is no route of the console", op)
		}
	}
}

// oasClient calls the console and validates every request and answer against the
// description.
type oasClient struct {
	t      *testing.T
	h      *harness
	doc    *openapi3.T
	router routers.Router
	// seen are the statuses answered per operation ("METHOD /path").
	seen map[string]map[int]bool
}

func newOASClient(t *testing.T, h *harness) *oasClient {
	doc := oasLoad(t)
	doc.Servers = openapi3.Servers{{URL: h.srv.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &oasClient{t: t, h: h, doc: doc, router: router, seen: map[string]map[int]bool{}}
}

// oasBearer is the bearer scheme's check for request validation.
func oasBearer(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecurityScheme == nil || in.SecurityScheme.Type != "http" || in.SecurityScheme.Scheme != "bearer" {
		return fmt.Errorf("unexpected security scheme %s", in.SecuritySchemeName)
	}
	if scheme, token, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " "); scheme != "Bearer" || token == "" {
		return errors.New("no bearer token")
	}
	return nil
}

// oasRequest is one call.
type oasRequest struct {
	method, path string
	body         any // nil: none; a string: as is; else JSON
	headers      []string
	token        string // "" : testToken; "-": none
	// request: "valid" (the description must accept the request), "invalid" (it must reject
	// it: the description is as strict as the handler) or "any".
	request string
	// stream: an SSE answer: only the status and headers are read.
	stream bool
}

func (c *oasClient) newRequest(ctx context.Context, r oasRequest) *http.Request {
	c.t.Helper()
	var body []byte
	switch b := r.body.(type) {
	case nil:
	case string:
		body = []byte(b)
	case []byte:
		body = b
	default:
		var err error
		if body, err = json.Marshal(b); err != nil {
			c.t.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.h.srv.URL+r.path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if r.body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	switch r.token {
	case "":
		req.Header.Set("Authorization", "Bearer "+testToken)
	case "-":
	default:
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	for i := 0; i+1 < len(r.headers); i += 2 {
		req.Header.Set(r.headers[i], r.headers[i+1])
	}
	return req
}

// call sends r, validates the request and the answer, and fails unless the answer is status
// (0: any).
func (c *oasClient) call(status int, r oasRequest) response {
	c.t.Helper()
	if r.request == "" {
		r.request = "valid"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	what := r.method + " " + r.path

	// The request, against the description.
	vreq := c.newRequest(ctx, r)
	route, params, err := c.router.FindRoute(vreq)
	if err != nil {
		c.t.Fatalf("%s: not in openapi.yaml: %v", what, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: oasBearer, MultiError: true}}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	switch {
	case r.request == "valid" && reqErr != nil:
		c.t.Errorf("%s: openapi.yaml rejects the request: %v", what, reqErr)
	case r.request == "invalid" && reqErr == nil:
		c.t.Errorf("%s: openapi.yaml accepts the request, which the console refuses", what)
	}

	// The answer.
	req := c.newRequest(ctx, r)
	resp, err := c.h.srv.Client().Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
	defer resp.Body.Close()
	var body []byte
	if r.stream {
		body = make([]byte, 64)
		n, _ := io.ReadAtLeast(resp.Body, body, 1)
		body = body[:n]
	} else if body, err = io.ReadAll(resp.Body); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
	if status != 0 && resp.StatusCode != status {
		c.t.Fatalf("%s: status %d, want %d: %s", what, resp.StatusCode, status, body)
	}
	op := route.Method + " " + route.Path
	if c.seen[op] == nil {
		c.seen[op] = map[int]bool{}
	}
	c.seen[op][resp.StatusCode] = true
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: r.stream}}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		c.t.Errorf("%s: the answer %d does not match openapi.yaml: %v\n%s", what, resp.StatusCode, err, body)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// ok calls a valid request that must answer status.
func (c *oasClient) ok(status int, method, path string, body any, headers ...string) response {
	c.t.Helper()
	return c.call(status, oasRequest{method: method, path: path, body: body, headers: headers})
}

// bad calls a request the description must reject too, answered status.
func (c *oasClient) bad(status int, method, path string, body any, headers ...string) response {
	c.t.Helper()
	return c.call(status, oasRequest{method: method, path: path, body: body, headers: headers, request: "invalid"})
}

// schema validates v against a schema of the description.
func (c *oasClient) schema(name string, v any) {
	c.t.Helper()
	ref := c.doc.Components.Schemas[name]
	if ref == nil {
		c.t.Fatalf("no schema %s", name)
	}
	if err := ref.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		c.t.Errorf("%v does not match schema %s: %v", v, name, err)
	}
}

// oasField is an error answer's field.
func oasField(t testing.TB, r response) string {
	f, _ := r.JSON(t)["field"].(string)
	return f
}

// TestOpenAPI: every route, its successes and main errors, through the validating client.
func TestOpenAPI(t *testing.T) {
	h := newHarnessWith(t, servicetest.Options{ConfigEncryptionKey: testEncryptionKey}, func(c *console.Config) { c.TestTimeout = 500 * time.Millisecond })
	c := newOASClient(t, h)

	// Every operation: 401 without the token or with another one, and, with the token, an
	// answer of its own (the route exists: no 404 or 405 of the router) for ids that do not
	// exist and no body, which the description must describe too.
	for _, op := range oasOperations(c.doc) {
		method, path, _ := strings.Cut(op, " ")
		path = strings.NewReplacer("{id}", "no-such-id", "{sourceId}", "no-such-source", "{messageId}", "no-such-message").Replace(path)
		// (A wrong token is a bearer token to the description: only the console knows it.)
		for token, request := range map[string]string{"-": "invalid", "wrong-token-0123456789": "any"} {
			r := c.call(http.StatusUnauthorized, oasRequest{method: method, path: path, token: token, request: request})
			if r.JSON(t)["code"] != "unauthorized" {
				t.Errorf("%s: %s", op, r.Body)
			}
		}
		r := c.call(0, oasRequest{method: method, path: path, request: "any"})
		if r.Status == http.StatusMethodNotAllowed {
			t.Errorf("%s: the console has no such route: %s", op, r.Body)
		}
		if r.Status != http.StatusNotFound {
			continue
		}
		if msg, _ := r.JSON(t)["message"].(string); strings.HasPrefix(msg, "no endpoint") {
			t.Errorf("%s: the console has no such route: %s", op, r.Body)
		}
	}

	// Sources.
	c.ok(200, "GET", "/v1/sources", nil)
	created := c.ok(201, "POST", "/v1/sources", map[string]any{"id": "app", "name": "App", "trackingPlan": map[string]any{"blockedEvents": []string{"Debug"}}})
	if created.Data(t)["writeKey"] == nil {
		t.Fatalf("no write key: %s", created.Body)
	}
	c.ok(409, "POST", "/v1/sources", map[string]any{"id": "app"})
	if f := oasField(t, c.bad(400, "POST", "/v1/sources", map[string]any{"id": "x", "nme": "typo"})); f != "nme" {
		t.Errorf("field %q, want nme", f)
	}
	c.bad(400, "POST", "/v1/sources", map[string]any{"id": "Not An Id"})
	c.bad(400, "POST", "/v1/sources", map[string]any{"id": "x", "writeKey": "wk_mine_0123456789"})
	c.bad(400, "POST", "/v1/sources", "[]")
	c.ok(413, "POST", "/v1/sources", `{"id":"big","name":"`+strings.Repeat("a", 4<<20)+`"}`)
	got := c.ok(200, "GET", "/v1/sources/app", nil)
	c.ok(200, "GET", "/v1/sources/web", nil)
	c.ok(404, "GET", "/v1/sources/nope", nil)
	c.ok(200, "PATCH", "/v1/sources/app", map[string]any{"name": "App 2", "version": 99}, "If-Match", got.Header.Get("ETag"))
	c.ok(200, "PATCH", "/v1/sources/app", map[string]any{"trackingPlan": nil}, "Content-Type", "application/merge-patch+json")
	c.ok(409, "PATCH", "/v1/sources/app", map[string]any{"name": "App 3"}, "If-Match", `"1"`)
	c.ok(409, "PATCH", "/v1/sources/web", map[string]any{"name": "Web"})
	c.ok(404, "PATCH", "/v1/sources/nope", map[string]any{"name": "x"})
	c.bad(400, "PATCH", "/v1/sources/app", map[string]any{"writeKey": "wk_mine_0123456789"})
	c.bad(400, "PATCH", "/v1/sources/app", map[string]any{"name": 3})
	c.ok(200, "POST", "/v1/sources/app/rotate-key", map[string]any{"overlap": "1h"})
	c.ok(200, "POST", "/v1/sources/app/rotate-key", nil)
	c.ok(400, "POST", "/v1/sources/app/rotate-key", map[string]any{"overlap": "soon"})
	c.bad(400, "POST", "/v1/sources/app/rotate-key", map[string]any{"overlapp": "1h"})
	c.ok(404, "POST", "/v1/sources/nope/rotate-key", nil)
	c.ok(409, "POST", "/v1/sources/web/rotate-key", nil)
	c.ok(200, "POST", "/v1/sources/web/rotate-key?takeOver=true", map[string]any{"overlap": "0s"})

	// The source debugger: the live stream (its data validated against Event) and the recent events.
	c.ok(404, "GET", "/v1/sources/nope/events/live", nil)
	c.ok(404, "GET", "/v1/sources/nope/events/recent", nil)
	c.ok(200, "GET", "/v1/sources/app/events/recent", nil)
	func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := c.newRequest(sctx, oasRequest{method: "GET", path: "/v1/sources/app/events/live"})
		resp, err := c.h.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("live: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		h.env.Produce(
			&kgo.Record{Topic: schemas.TopicEvents, Key: []byte("u1"), Value: []byte(`{"type":"track","event":"Order Completed","userId":"u1","messageId":"m-1"}`),
				Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("app")}, {Key: schemas.HeaderMessageID, Value: []byte("m-1")}, {Key: schemas.HeaderType, Value: []byte("track")}}},
			&kgo.Record{Topic: schemas.TopicRejected, Key: []byte("u2"), Value: []byte(`{"type":"track"`),
				Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("app")}, {Key: schemas.HeaderReason, Value: []byte("malformed JSON")}}},
		)
		sc := bufio.NewScanner(resp.Body)
		for events := 0; events < 2 && sc.Scan(); {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var v any
				if err := json.Unmarshal([]byte(data), &v); err != nil {
					t.Fatal(err)
				}
				c.schema("Event", v)
				events++
			}
		}
	}()
	c.call(200, oasRequest{method: "GET", path: "/v1/sources/app/events/live", stream: true})
	servicetest.Eventually(t, 10*time.Second, "recent events", func() bool {
		return len(c.ok(200, "GET", "/v1/sources/app/events/recent", nil).JSON(t)["data"].([]any)) == 2
	})

	// Destinations.
	c.ok(200, "GET", "/v1/destinations", nil)
	c.ok(201, "POST", "/v1/destinations", map[string]any{"id": "hooks", "type": "webhooks", "name": "Hooks", "enabled": false, "sources": []string{"app"},
		"settings": map[string]any{"webhooks": []any{map[string]any{"url": "http://127.0.0.1:9/x", "headers": map[string]string{"X-Team": "growth"}}},
			"sharedSecret": "s3cret", "previousSharedSecret": "old", "standardWebhooks": true, "maxRequestsPerSecond": 10, "maxConcurrency": 2}})
	c.ok(201, "POST", "/v1/destinations", map[string]any{"id": "bare", "type": "webhooks", "sources": []string{},
		"settings": map[string]any{"webhooks": []any{map[string]any{"url": "https://hooks.example.com/a"}}}})
	c.ok(409, "POST", "/v1/destinations", map[string]any{"id": "hooks", "type": "webhooks", "settings": map[string]any{"webhooks": []any{map[string]any{"url": "http://127.0.0.1:9/x"}}}})
	six := make([]any, 6)
	for i := range six {
		six[i] = map[string]any{"url": fmt.Sprintf("http://127.0.0.1:9/%d", i)}
	}
	if f := oasField(t, c.bad(400, "POST", "/v1/destinations", map[string]any{"id": "many", "type": "webhooks", "settings": map[string]any{"webhooks": six}})); f != "settings.webhooks[5]" {
		t.Errorf("field %q, want settings.webhooks[5]", f)
	}
	c.bad(400, "POST", "/v1/destinations", map[string]any{"id": "hook2", "type": "webhook", "settings": map[string]any{"webhooks": six[:1]}})
	c.ok(400, "POST", "/v1/destinations", map[string]any{"id": "hook3", "type": "webhooks", "sources": []string{"ghost"}, "settings": map[string]any{"webhooks": six[:1]}})
	d := c.ok(200, "GET", "/v1/destinations/hooks", nil)
	if st := d.Data(t)["settings"].(map[string]any); st["hasSharedSecret"] != true || st["sharedSecret"] != nil {
		t.Errorf("settings: %v", st)
	}
	c.ok(404, "GET", "/v1/destinations/nope", nil)
	c.ok(200, "PATCH", "/v1/destinations/hooks", map[string]any{"name": "Order hooks", "settings": map[string]any{"hasSharedSecret": true, "previousSharedSecret": nil}}, "If-Match", d.Header.Get("ETag"))
	c.ok(409, "PATCH", "/v1/destinations/hooks", map[string]any{"name": "x"}, "If-Match", d.Header.Get("ETag"))
	c.ok(409, "PATCH", "/v1/destinations/file-hooks", map[string]any{"name": "x"})
	c.ok(404, "PATCH", "/v1/destinations/nope", map[string]any{"name": "x"})
	c.bad(400, "PATCH", "/v1/destinations/hooks", map[string]any{"enabled": "yes"})
	c.ok(200, "PUT", "/v1/destinations/hooks/sources/web", nil)
	c.ok(400, "PUT", "/v1/destinations/hooks/sources/ghost", nil)
	c.ok(404, "PUT", "/v1/destinations/nope/sources/web", nil)
	c.ok(409, "PUT", "/v1/destinations/file-hooks/sources/app", nil)
	c.ok(200, "DELETE", "/v1/destinations/hooks/sources/web", nil)
	c.ok(409, "DELETE", "/v1/destinations/hooks/sources/web", nil, "If-Match", `"1"`)
	c.ok(404, "DELETE", "/v1/destinations/nope/sources/web", nil)
	c.ok(409, "DELETE", "/v1/destinations/file-hooks", nil)

	// The delivery log and stats, from webhooks.attempts records.
	now := time.Now().UTC()
	attempt := func(msg string, n, status int, class string, test bool) *kgo.Record {
		v := map[string]any{"destinationId": "hooks", "messageId": msg, "url": "http://127.0.0.1:9/x", "attempt": n, "status": status,
			"latencyMs": 12.5, "errorClass": class, "at": schemas.FormatTimestamp(now), "test": test,
			"type": "track", "event": "Order Completed", "userId": "user-5", "receivedAt": schemas.FormatTimestamp(now.Add(-time.Second)),
			"responseHeaders": map[string]string{"Content-Type": "text/plain"}, "responseBody": "answer " + class}
		if class != "ok" {
			v["error"] = "HTTP 500"
			v["nextAttemptAt"] = schemas.FormatTimestamp(now.Add(time.Minute))
		}
		b, _ := json.Marshal(v)
		return &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("hooks"), Value: b}
	}
	h.env.Produce(attempt("m-1", 1, 500, "status_5xx", false), attempt("m-1", 2, 200, "ok", false), attempt("m-2", 1, 204, "ok", true))
	servicetest.Eventually(t, 10*time.Second, "attempts", func() bool {
		return len(c.ok(200, "GET", "/v1/destinations/hooks/attempts", nil).JSON(t)["data"].([]any)) == 3
	})
	page := c.ok(200, "GET", "/v1/destinations/hooks/attempts?status=success&limit=1", nil).JSON(t)
	if page["nextCursor"] == nil {
		t.Fatalf("no nextCursor: %v", page)
	}
	c.ok(200, "GET", "/v1/destinations/hooks/attempts?status=success&limit=1&cursor="+page["nextCursor"].(string), nil)
	c.ok(200, "GET", "/v1/destinations/hooks/attempts?status=status_5xx", nil)
	c.bad(400, "GET", "/v1/destinations/hooks/attempts?status=bogus", nil)
	c.bad(400, "GET", "/v1/destinations/hooks/attempts?limit=0", nil)
	c.bad(400, "GET", "/v1/destinations/hooks/attempts?cursor=abc", nil)
	c.ok(404, "GET", "/v1/destinations/nope/attempts", nil)
	c.ok(200, "GET", "/v1/messages/m-1/attempts", nil)
	c.ok(404, "GET", "/v1/messages/nope/attempts", nil)
	// The messages: m-1 (a 500, then a 200) is one delivered message; the test delivery is none.
	msgs := c.ok(200, "GET", "/v1/destinations/hooks/messages", nil).JSON(t)["data"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["status"] != "delivered" || len(msgs[0].(map[string]any)["attempts"].([]any)) != 2 {
		t.Fatalf("messages %v", msgs)
	}
	c.ok(200, "GET", "/v1/destinations/hooks/messages?userId=user-5&event=Order+Completed&type=track&status=delivered&since=1h&limit=1", nil)
	c.ok(200, "GET", "/v1/destinations/hooks/messages?messageId=m-1&anonymousId=a&since="+schemas.FormatTimestamp(now.Add(-time.Hour)), nil)
	c.ok(200, "GET", "/v1/destinations/hooks/messages?cursor=1", nil)
	c.bad(400, "GET", "/v1/destinations/hooks/messages?status=bogus", nil)
	c.bad(400, "GET", "/v1/destinations/hooks/messages?limit=0", nil)
	c.bad(400, "GET", "/v1/destinations/hooks/messages?cursor=abc", nil)
	c.ok(400, "GET", "/v1/destinations/hooks/messages?since=yesterday", nil)
	c.ok(404, "GET", "/v1/destinations/nope/messages", nil)
	c.ok(200, "GET", "/v1/messages/m-1", nil)
	c.ok(404, "GET", "/v1/messages/nope", nil)
	c.ok(200, "GET", "/v1/destinations/hooks/stats", nil)
	c.ok(200, "GET", "/v1/destinations/hooks/stats?window=24h", nil)
	c.ok(200, "GET", "/v1/destinations/bare/stats", nil)
	c.bad(400, "GET", "/v1/destinations/hooks/stats?window=7d", nil)
	c.ok(404, "GET", "/v1/destinations/nope/stats", nil)
	h.env.Produce(&kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("hooks"),
		Value: schemas.AppendFilteredRecord(nil, "hooks", "m-off", schemas.FilterIntegrationsOff, []byte(schemas.FormatTimestamp(now)))})
	servicetest.Eventually(t, 10*time.Second, "the funnel", func() bool {
		return c.ok(200, "GET", "/v1/destinations/hooks/overview", nil).JSON(t)["data"].(map[string]any)["received"] == float64(2)
	})
	c.ok(200, "GET", "/v1/destinations/hooks/overview?window=24h", nil)
	c.ok(200, "GET", "/v1/destinations/bare/overview", nil)
	c.bad(400, "GET", "/v1/destinations/hooks/overview?window=7d", nil)
	c.ok(404, "GET", "/v1/destinations/nope/overview", nil)
	c.ok(200, "GET", "/v1/destinations/hooks/stats", nil) // with messages, its URL and a filtered one

	// The DLQ: one dead letter, listed, replayed, listed as replayed.
	h.env.Produce(&kgo.Record{Topic: schemas.TopicDLQ, Key: []byte("hooks:u1"), Value: []byte(`{"type":"track","event":"Order Completed","userId":"u1"}`),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("hooks")}, {Key: schemas.HeaderMessageID, Value: []byte("m-dead")},
			{Key: schemas.HeaderReason, Value: []byte("retries exhausted")}, {Key: schemas.HeaderLastStatus, Value: []byte("500")},
			{Key: schemas.HeaderLastError, Value: []byte("HTTP 500")}, {Key: schemas.HeaderAttempt, Value: []byte("8")},
			{Key: schemas.HeaderFirstAttemptAt, Value: []byte(schemas.FormatTimestamp(now.Add(-time.Hour)))}}})
	servicetest.Eventually(t, 10*time.Second, "the dead letter", func() bool {
		return len(c.ok(200, "GET", "/v1/destinations/hooks/dlq", nil).JSON(t)["data"].([]any)) == 1
	})
	c.bad(400, "GET", "/v1/destinations/hooks/dlq?limit=5000", nil)
	c.bad(400, "GET", "/v1/destinations/hooks/dlq?cursor=x", nil)
	c.ok(404, "GET", "/v1/destinations/nope/dlq", nil)
	c.bad(400, "POST", "/v1/destinations/hooks/dlq/replay", map[string]any{"messageIds": []string{""}})
	c.ok(400, "POST", "/v1/destinations/hooks/dlq/replay", map[string]any{"url": "ftp://example.com/x"})
	c.ok(404, "POST", "/v1/destinations/nope/dlq/replay", nil)
	if n := c.ok(200, "POST", "/v1/destinations/hooks/dlq/replay", map[string]any{"messageIds": []string{"m-dead"}}).Data(t)["replayed"]; n != float64(1) {
		t.Errorf("replayed %v, want 1", n)
	}
	c.ok(200, "POST", "/v1/destinations/hooks/dlq/replay", nil)
	c.ok(200, "GET", "/v1/destinations/hooks/dlq?replayed=true&limit=10", nil)

	// Pending retries: one message waiting in a tier, listed, retried now.
	h.env.Produce(&kgo.Record{Topic: schemas.RetryTopic(time.Second), Key: []byte("hooks:u1"), Value: []byte(`{"type":"track","event":"Order Completed","userId":"u1"}`),
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("hooks")}, {Key: schemas.HeaderMessageID, Value: []byte("m-waiting")},
			{Key: schemas.HeaderType, Value: []byte("track")}, {Key: schemas.HeaderAttempt, Value: []byte("2")},
			{Key: schemas.HeaderFirstAttemptAt, Value: []byte(schemas.FormatTimestamp(now))}, {Key: schemas.HeaderDueAt, Value: []byte(schemas.FormatTimestamp(now.Add(time.Hour)))},
			{Key: schemas.HeaderLastError, Value: []byte("status_5xx: HTTP 503 from hooks.example.com:443")}, {Key: schemas.HeaderLastStatus, Value: []byte("503")}}})
	servicetest.Eventually(t, 10*time.Second, "the waiting message", func() bool {
		return len(c.ok(200, "GET", "/v1/destinations/hooks/pending", nil).JSON(t)["data"].([]any)) == 1
	})
	c.ok(200, "GET", "/v1/destinations/hooks/pending?limit=1&cursor=0", nil)
	c.bad(400, "GET", "/v1/destinations/hooks/pending?limit=5000", nil)
	c.bad(400, "GET", "/v1/destinations/hooks/pending?cursor=x", nil)
	c.ok(404, "GET", "/v1/destinations/nope/pending", nil)
	c.bad(400, "POST", "/v1/destinations/hooks/retry", map[string]any{"messageIds": []string{""}})
	c.ok(404, "POST", "/v1/destinations/nope/retry", nil)
	if n := c.ok(202, "POST", "/v1/destinations/hooks/retry", map[string]any{"messageIds": []string{"m-waiting", "m-unknown"}}).Data(t)["sent"]; n != float64(1) {
		t.Errorf("retried now %v, want 1", n)
	}
	c.ok(202, "POST", "/v1/destinations/hooks/retry", nil)
	c.ok(200, "GET", "/v1/destinations/hooks/pending", nil)

	// The event tester: refused while the destination is disabled; then "pending" results
	// (no deliverer runs here).
	c.ok(409, "POST", "/v1/destinations/hooks/test", nil)
	c.ok(200, "PATCH", "/v1/destinations/hooks", map[string]any{"enabled": true})
	c.ok(200, "POST", "/v1/destinations/hooks/test", map[string]any{"type": "identify"})
	c.ok(200, "POST", "/v1/destinations/hooks/test", nil)
	c.bad(400, "POST", "/v1/destinations/hooks/test", map[string]any{"type": "nope"})
	c.ok(404, "POST", "/v1/destinations/nope/test", nil)
	// The filters' tester (TestDestinationFiltersAPI has more).
	c.ok(200, "POST", "/v1/destinations/hooks/filters/test", map[string]any{"message": map[string]any{"type": "track", "event": "E"}})
	c.bad(400, "POST", "/v1/destinations/hooks/filters/test", map[string]any{})
	c.ok(404, "POST", "/v1/destinations/nope/filters/test", map[string]any{"message": map[string]any{}})

	// Computed traits and audiences.
	c.ok(200, "GET", "/v1/computed-traits", nil)
	c.ok(201, "POST", "/v1/computed-traits", map[string]any{"id": "orders", "name": "Orders 30 days", "source": "app", "realtime": true,
		"count": map[string]any{"event": "Order Completed", "within": "720h", "where": []any{map[string]any{"property": "total", "gte": 10}}}})
	c.ok(201, "POST", "/v1/computed-traits", map[string]any{"id": "ltv", "name": "LTV", "source": "app", "sum": map[string]any{"event": "Order Completed", "property": "total"}})
	c.ok(409, "POST", "/v1/computed-traits", map[string]any{"id": "ltv", "name": "LTV 2", "source": "app", "last": map[string]any{"event": "x", "property": "y"}})
	c.bad(400, "POST", "/v1/computed-traits", map[string]any{"id": "two", "name": "Two", "source": "app", "count": map[string]any{"event": "x"}, "sum": map[string]any{"event": "x", "property": "y"}})
	c.ok(400, "POST", "/v1/computed-traits", map[string]any{"id": "bad", "name": "Bad", "source": "app", "count": map[string]any{"event": "x", "property": "y"}})
	tr := c.ok(200, "GET", "/v1/computed-traits/ltv", nil)
	c.ok(404, "GET", "/v1/computed-traits/nope", nil)
	c.ok(200, "PATCH", "/v1/computed-traits/ltv", map[string]any{"avg": map[string]any{"event": "Order Completed", "property": "total", "within": "24h"}}, "If-Match", tr.Header.Get("ETag"))
	c.ok(409, "PATCH", "/v1/computed-traits/ltv", map[string]any{"name": "x"}, "If-Match", tr.Header.Get("ETag"))
	c.ok(404, "PATCH", "/v1/computed-traits/nope", map[string]any{"name": "x"})
	c.bad(400, "PATCH", "/v1/computed-traits/ltv", map[string]any{"avg": "yes"})

	// Tracking plans, and a source's violations.
	c.ok(200, "GET", "/v1/tracking-plans", nil)
	c.ok(201, "POST", "/v1/tracking-plans", map[string]any{"id": "shop", "name": "Shop", "rules": map[string]any{"events": []any{
		map[string]any{"name": "Order Completed", "properties": map[string]any{"type": "object", "required": []string{"total"}}}}}})
	c.ok(409, "POST", "/v1/tracking-plans", map[string]any{"id": "shop"})
	if f := oasField(t, c.ok(400, "POST", "/v1/tracking-plans", map[string]any{"id": "bad", "rules": map[string]any{"identify": map[string]any{"type": "objekt"}}})); f != "rules.identify" {
		t.Errorf("field %q, want rules.identify", f) // a schema that does not compile
	}
	c.bad(400, "POST", "/v1/tracking-plans", map[string]any{"id": "bad", "rules": map[string]any{"events": []any{map[string]any{"nam": "x"}}}})
	tp := c.ok(200, "GET", "/v1/tracking-plans/shop", nil)
	c.ok(404, "GET", "/v1/tracking-plans/nope", nil)
	c.ok(200, "PATCH", "/v1/tracking-plans/shop", map[string]any{"rules": map[string]any{"identify": map[string]any{"type": "object"}}}, "If-Match", tp.Header.Get("ETag"))
	c.ok(409, "PATCH", "/v1/tracking-plans/shop", map[string]any{"name": "x"}, "If-Match", tp.Header.Get("ETag"))
	c.ok(404, "PATCH", "/v1/tracking-plans/nope", map[string]any{"name": "x"})
	c.ok(200, "PATCH", "/v1/sources/app", map[string]any{"trackingPlan": map[string]any{"planId": "shop", "allowUnplannedTrackEvents": false}})
	c.ok(409, "DELETE", "/v1/tracking-plans/shop", nil) // the source names it
	c.ok(200, "GET", "/v1/sources/app/violations", nil)
	c.ok(404, "GET", "/v1/sources/nope/violations", nil)
	c.ok(200, "PATCH", "/v1/sources/app", map[string]any{"trackingPlan": nil})
	c.ok(204, "DELETE", "/v1/tracking-plans/shop", nil)

	c.ok(200, "GET", "/v1/audiences", nil)
	c.ok(201, "POST", "/v1/audiences", map[string]any{"id": "buyers", "name": "Big Buyers", "source": "app", "realtime": true,
		"rule": map[string]any{"all": []any{
			map[string]any{"event": "Order Completed", "atLeast": 2, "within": "720h", "where": []any{map[string]any{"property": "total", "gt": 10}}},
			map[string]any{"computedTrait": "orders", "gte": 1},
			map[string]any{"not": map[string]any{"trait": "plan", "in": []any{"free", "trial"}}},
		}}})
	c.ok(409, "POST", "/v1/audiences", map[string]any{"id": "buyers", "name": "Other", "source": "app", "rule": map[string]any{"event": "x"}})
	c.ok(400, "POST", "/v1/audiences", map[string]any{"id": "buyers2", "name": "big-buyers", "source": "app", "rule": map[string]any{"event": "x"}})
	c.ok(400, "POST", "/v1/audiences", map[string]any{"id": "empty", "name": "Empty", "source": "app", "rule": map[string]any{}})
	c.bad(400, "POST", "/v1/audiences", map[string]any{"id": "norule", "name": "No rule", "source": "app"})
	au := c.ok(200, "GET", "/v1/audiences/buyers", nil)
	c.ok(404, "GET", "/v1/audiences/nope", nil)
	c.ok(200, "PATCH", "/v1/audiences/buyers", map[string]any{"realtime": false, "rule": map[string]any{"any": []any{map[string]any{"trait": "plan", "equals": "pro"}, map[string]any{"computedTrait": "orders", "gte": 3}}}}, "If-Match", au.Header.Get("ETag"))
	c.ok(409, "PATCH", "/v1/audiences/buyers", map[string]any{"name": "x"}, "If-Match", au.Header.Get("ETag"))
	c.ok(404, "PATCH", "/v1/audiences/nope", map[string]any{"name": "x"})
	c.bad(400, "PATCH", "/v1/audiences/buyers", map[string]any{"realtime": "no"})
	c.ok(409, "DELETE", "/v1/computed-traits/orders", nil)
	c.ok(409, "DELETE", "/v1/sources/app", nil)

	// The config file: export (validated as a Config), dry runs, conflicts, errors, import.
	c.ok(200, "GET", "/v1/openapi.yaml", nil)
	exported := c.ok(200, "GET", "/v1/config", nil)
	c.ok(200, "PUT", "/v1/config?dryRun=true", string(exported.Body), "Content-Type", "application/yaml")
	c.ok(200, "PUT", "/v1/config", string(exported.Body), "Content-Type", "application/yaml")
	c.ok(200, "POST", "/v1/config/reencrypt", nil)
	c.ok(200, "PUT", "/v1/config?dryRun=true", `{"sources":[{"id":"web","writeKeyHash":"sha256:`+strings.Repeat("0", 64)+`"}]}`)
	// (web was taken over above; file-hooks is still the file's, and needs web.)
	fileHooks := `{"sources":[{"id":"web","writeKey":"wk_test_web_0123456789"}],"destinations":[{"id":"file-hooks","type":"webhooks","name":"Changed","sources":["web"],"settings":{"webhooks":[{"url":"http://127.0.0.1:9/file"}]}}]}`
	if code := c.ok(409, "PUT", "/v1/config?dryRun=true", fileHooks).JSON(t)["code"]; code != "managed_by_file" {
		t.Errorf("code %v, want managed_by_file", code)
	}
	c.ok(200, "PUT", "/v1/config?dryRun=true&takeOver=true", fileHooks)
	if code := c.ok(409, "PUT", "/v1/config?dryRun=true", `{}`).JSON(t)["code"]; code != "in_use" {
		t.Errorf("code %v, want in_use", code)
	}
	c.ok(400, "PUT", "/v1/config", "sources:\n  - id: x\n    writeKey: a b\n", "Content-Type", "application/yaml")
	c.bad(400, "PUT", "/v1/config", "sources: [", "Content-Type", "application/yaml")
	c.bad(400, "PUT", "/v1/config", `{"sourcez":[]}`)

	// The audit trail (docs/console.md#audit-trail).
	c.ok(200, "GET", "/v1/audit?action=source.&limit=2", nil)
	c.ok(400, "GET", "/v1/audit?since=yesterday", nil)
	c.ok(200, "GET", "/v1/audit/export?kind=source", nil)
	c.ok(400, "GET", "/v1/audit/export?until=soon", nil)

	// Regulations.
	c.ok(200, "GET", "/v1/regulations", nil)
	reg := c.ok(200, "POST", "/v1/regulations", map[string]any{"regulationType": "SUPPRESS_WITH_DELETE", "subjectType": "USER_ID", "subjectIds": []string{"u1", "u2"}, "sourceIds": []string{"app"}})
	id := reg.Data(t)["regulateId"].(string)
	c.ok(200, "POST", "/v1/regulations", map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": []string{"u3"}})
	c.bad(400, "POST", "/v1/regulations", map[string]any{"regulationType": "DELETE_EVERYTHING", "subjectType": "USER_ID", "subjectIds": []string{"u1"}})
	c.bad(400, "POST", "/v1/regulations", map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": []string{}})
	c.bad(400, "POST", "/v1/regulations", map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": []string{"u1"}, "extra": 1})
	if f := oasField(t, c.ok(400, "POST", "/v1/regulations", map[string]any{"regulationType": "DELETE_ONLY", "subjectType": "USER_ID", "subjectIds": []string{"u1"}, "sourceIds": []string{"ghost"}})); f != "sourceIds[0]" {
		t.Errorf("field %q, want sourceIds[0]", f)
	}
	c.ok(200, "GET", "/v1/regulations/"+id, nil)
	c.ok(404, "GET", "/v1/regulations/nope", nil)
	status := func(user string) *kgo.Record {
		b, _ := json.Marshal(schemas.DeletionStatus{RequestID: id, UserID: user, Kind: "SUPPRESS_WITH_DELETE", Notices: 1, ProcessedAt: schemas.FormatTimestamp(time.Now())})
		return &kgo.Record{Topic: schemas.TopicDeletionsStatus, Key: []byte(id), Value: b}
	}
	h.env.Produce(status("u1"), status("u2"), audiencesReport(id, "u1"), audiencesReport(id, "u2"))
	servicetest.Eventually(t, 10*time.Second, "the regulation finished", func() bool {
		return c.ok(200, "GET", "/v1/regulations/"+id, nil).Data(t)["overallStatus"] == "FINISHED"
	})
	page = c.ok(200, "GET", "/v1/regulations?limit=1", nil).JSON(t)
	if page["nextCursor"] == nil {
		t.Fatalf("no nextCursor: %v", page)
	}
	c.ok(200, "GET", "/v1/regulations?limit=1&cursor="+page["nextCursor"].(string), nil)
	c.bad(400, "GET", "/v1/regulations?limit=x", nil)

	// Replays (docs/delivery.md#replay): of three messages of the source app (u1 is deleted above).
	from := schemas.FormatTimestamp(time.Now().Add(-time.Hour))
	for i := range 3 {
		msg := fmt.Sprintf("m-r%d", i)
		h.env.Produce(&kgo.Record{Topic: schemas.TopicEvents, Key: []byte("u9"), Value: []byte(`{"type":"track","event":"Order Completed","userId":"u9","messageId":"` + msg + `"}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("app")}, {Key: schemas.HeaderMessageID, Value: []byte(msg)}, {Key: schemas.HeaderType, Value: []byte("track")}}})
	}
	c.ok(201, "POST", "/v1/destinations", map[string]any{"id": "again", "type": "webhooks", "sources": []string{"app"},
		"settings": map[string]any{"webhooks": []any{map[string]any{"url": "http://127.0.0.1:9/again"}}}})
	if n := c.ok(200, "POST", "/v1/replays", map[string]any{"destinationId": "again", "from": from, "dryRun": true, "filter": map[string]any{"type": "track", "event": "Order Completed", "userId": "u9", "sourceId": "app"}}).Data(t)["matched"]; n != float64(3) {
		t.Errorf("dry run matched %v, want 3", n)
	}
	var started []string
	for range 4 { // as many as may run at once, each for two seconds
		started = append(started, c.ok(201, "POST", "/v1/replays", map[string]any{"destinationId": "again", "from": from, "maxPerSecond": 1, "url": "https://hooks.example.com/replay"}).Data(t)["replayId"].(string))
	}
	c.ok(409, "POST", "/v1/replays", map[string]any{"destinationId": "again", "from": from})
	c.ok(400, "POST", "/v1/replays", map[string]any{"destinationId": "again", "from": from, "to": "2020-01-01T00:00:00Z"})
	c.bad(400, "POST", "/v1/replays", map[string]any{"destinationId": "again", "from": from, "filter": map[string]any{"colour": "red"}})
	c.ok(200, "GET", "/v1/replays", nil)
	c.ok(200, "GET", "/v1/replays?destinationId=again", nil)
	c.ok(200, "GET", "/v1/replays/"+started[0], nil)
	for _, id := range started {
		c.ok(200, "DELETE", "/v1/replays/"+id, nil)
	}
	c.ok(200, "POST", "/v1/replays/"+started[0]+"/cancel", nil)
	c.ok(404, "GET", "/v1/replays/nope", nil)
	c.ok(204, "DELETE", "/v1/destinations/again", nil)

	// Deletes, dependents first.
	c.ok(409, "DELETE", "/v1/audiences/buyers", nil, "If-Match", `"1"`)
	c.ok(204, "DELETE", "/v1/audiences/buyers", nil)
	c.ok(404, "DELETE", "/v1/audiences/buyers", nil)
	c.ok(204, "DELETE", "/v1/computed-traits/orders", nil)
	c.ok(204, "DELETE", "/v1/computed-traits/ltv", nil, "If-Match", "*")
	c.ok(204, "DELETE", "/v1/destinations/hooks", nil)
	c.ok(204, "DELETE", "/v1/destinations/bare", nil)
	c.ok(204, "DELETE", "/v1/sources/app", nil)
	c.ok(404, "DELETE", "/v1/sources/app", nil)

	// Users and API tokens (docs/console.md#users-roles-and-tokens).
	c.ok(200, "GET", "/v1/users", nil)
	c.ok(201, "PUT", "/v1/users/Ana@Example.com", map[string]any{"role": "viewer"})
	user := c.ok(200, "PUT", "/v1/users/ana@example.com", map[string]any{"email": "ANA@example.com", "role": "editor", "pii": true}, "If-Match", "*")
	c.ok(200, "GET", "/v1/users/ana@example.com", nil)
	c.ok(409, "PUT", "/v1/users/ana@example.com", map[string]any{"role": "viewer"}, "If-Match", `"1"`)
	c.bad(400, "PUT", "/v1/users/ana@example.com", map[string]any{"role": "owner"})
	c.bad(400, "PUT", "/v1/users/ana@example.com", map[string]any{"role": "viewer", "admin": true})
	c.ok(400, "GET", "/v1/users/not-an-email", nil)
	c.ok(404, "GET", "/v1/users/bob@example.com", nil)
	c.ok(204, "DELETE", "/v1/users/ana@example.com", nil, "If-Match", user.Header.Get("ETag"))
	c.ok(404, "DELETE", "/v1/users/ana@example.com", nil)
	tok := c.ok(201, "POST", "/v1/tokens", map[string]any{"name": "ci", "role": "viewer"}).Data(t)
	c.bad(400, "POST", "/v1/tokens", map[string]any{"name": "ci", "role": "owner"})
	c.ok(200, "GET", "/v1/tokens", nil)
	c.call(403, oasRequest{method: "POST", path: "/v1/tokens", body: map[string]any{"name": "x", "role": "viewer"}, token: tok["secret"].(string)})
	c.ok(204, "DELETE", "/v1/tokens/"+tok["id"].(string), nil)
	c.ok(404, "DELETE", "/v1/tokens/"+tok["id"].(string), nil)

	// Outside the described operations: 405 and 404 answer the error body.
	for _, tt := range []struct {
		method, path string
		status       int
	}{{"PUT", "/v1/sources", 405}, {"POST", "/v1/config", 405}, {"GET", "/v1/nope", 404}} {
		r := h.do(tt.method, tt.path, nil)
		expect(t, r, tt.status)
		var v any
		if err := json.Unmarshal(r.Body, &v); err != nil {
			t.Fatal(err)
		}
		c.schema("Error", v)
		if tt.status == 405 && r.Header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tt.method, tt.path)
		}
	}

	// Every operation answered a success, and every status it answered is described (checked
	// above); the described statuses never seen are listed.
	for _, op := range oasOperations(c.doc) {
		method, path, _ := strings.Cut(op, " ")
		success := false
		for st := range c.seen[op] {
			success = success || st/100 == 2
		}
		if !success {
			t.Errorf("%s: no success was checked", op)
		}
		var unseen []string
		for st := range c.doc.Paths.Find(path).GetOperation(method).Responses.Map() {
			var n int
			if _, err := fmt.Sscan(st, &n); err == nil && !c.seen[op][n] && n != 500 && n != 503 && n != 413 {
				unseen = append(unseen, st)
			}
		}
		if len(unseen) > 0 {
			slices.Sort(unseen)
			t.Logf("%s: statuses not exercised: %v", op, unseen)
		}
	}
}
