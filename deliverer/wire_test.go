package deliverer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The deliverer writes webhooks.attempts with its own encoder (appendAttemptRecord, fast on the
// hot path), but the record is schemas.AttemptRecord: the console decodes it with schemas.

// TestAttemptRecordRoundTrip: what appendAttemptRecord writes decodes with
// schemas.DecodeAttemptRecord into the record it stands for, holds no member the type lacks,
// and is byte for byte what encoding/json writes of that record: the same fields, in the same
// order, with the same omissions.
func TestAttemptRecordRoundTrip(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	at := schemas.FormatTimestamp(now)
	for _, c := range []struct {
		name string
		d    delivery
		res  urlResult
		lim  hostLimit
		out  outcome
		want schemas.AttemptRecord
	}{
		{"failure, host paused", delivery{destID: "hooks", messageID: "m\"1\a\u00e9", attempt: 3},
			urlResult{URL: "https://user:s3cret@x.example.com/a?b=c&token=abc123", Status: 503, Class: Status5xx, Latency: 12345 * time.Microsecond, Host: "x.example.com:443"},
			hostLimit{limit: 32, paused: 5 * time.Second}, outcome{},
			schemas.AttemptRecord{DestinationID: "hooks", MessageID: "m\"1\a\u00e9", URL: "https://xxxxx:xxxxx@x.example.com/a?b=xxxxx&token=xxxxx", Attempt: 3,
				Status: 503, LatencyMs: 12.345, ErrorClass: schemas.ClassStatus5xx, Error: "status_5xx: HTTP 503 from x.example.com:443",
				ConcurrencyLimit: 32, PausedForMs: 5000, At: at}},
		{"success", delivery{destID: "hooks", messageID: "m-2", attempt: 1},
			urlResult{URL: "https://x.example.com/in", Status: 200, Class: Success, Latency: 250 * time.Microsecond},
			hostLimit{limit: 16}, outcome{},
			schemas.AttemptRecord{DestinationID: "hooks", MessageID: "m-2", URL: "https://x.example.com/in", Attempt: 1, Status: 200, LatencyMs: 0.25,
				ErrorClass: schemas.ClassOK, ConcurrencyLimit: 16, At: at}},
		{"test delivery", delivery{destID: "hooks", messageID: "t-1", attempt: 1, test: true},
			urlResult{URL: "https://x.example.com/in", Status: 204, Class: Success, Latency: time.Millisecond},
			hostLimit{}, outcome{},
			schemas.AttemptRecord{DestinationID: "hooks", MessageID: "t-1", URL: "https://x.example.com/in", Attempt: 1, Status: 204, LatencyMs: 1,
				ErrorClass: schemas.ClassOK, Test: true, At: at}},
		{"dropped unsent", delivery{destID: "hooks", messageID: "m-3", attempt: 2},
			urlResult{Class: Deleted, Err: errDeleted},
			hostLimit{}, outcome{},
			schemas.AttemptRecord{DestinationID: "hooks", MessageID: "m-3", Attempt: 2, ErrorClass: schemas.ClassDeleted,
				Error: "deleted: " + errDeleted.Error(), At: at}},
		{"a message, retried, with the answer", summarized(delivery{destID: "hooks", messageID: "m-4", attempt: 2, msgType: "track", firstAttemptAt: now.Add(-time.Minute),
			body: []byte(`{"version":1,"type":"track","messageId":"m-4","userId":"user-5","anonymousId":42,"event":"Order \"Completed\"","receivedAt":"2026-01-02T03:00:00.000Z","properties":{"userId":"no"}}`)}),
			urlResult{URL: "https://x.example.com/in", Status: 500, Class: Status5xx, Latency: time.Millisecond, Host: "x.example.com:443",
				answer: answerOf(map[string]string{"Content-Type": "text/plain", "X-Request-Id": "r-1"}, "boom: \"user-5\" \xff")},
			hostLimit{limit: 8}, outcome{nextAttemptAt: now.Add(10 * time.Second)},
			schemas.AttemptRecord{DestinationID: "hooks", MessageID: "m-4", URL: "https://x.example.com/in", Attempt: 2, Status: 500, LatencyMs: 1,
				ErrorClass: schemas.ClassStatus5xx, Error: "status_5xx: HTTP 500 from x.example.com:443", ConcurrencyLimit: 8, At: at,
				Type: "track", Event: `Order "Completed"`, UserID: "user-5", AnonymousID: "42", ReceivedAt: "2026-01-02T03:00:00.000Z",
				NextAttemptAt:   schemas.FormatTimestamp(now.Add(10 * time.Second)),
				ResponseHeaders: map[string]string{"Content-Type": "text/plain", "X-Request-Id": "r-1"}, ResponseBody: "boom: \"user-5\" \ufffd"}},
		{"a page, dead-lettered, no receivedAt in the body", summarized(delivery{destID: "hooks", messageID: "m-5", attempt: 1, firstAttemptAt: now.Add(-time.Hour),
			body: []byte(`{"type":"page","messageId":"m-5","anonymousId":"a-1","name":"Pricing"}`)}),
			urlResult{URL: "https://x.example.com/in", Status: 410, Class: Status4xx, Latency: time.Millisecond, Host: "x.example.com:443", answer: answerOf(nil, "")},
			hostLimit{limit: 8}, outcome{deadLettered: "status_4xx"},
			schemas.AttemptRecord{DestinationID: "hooks", MessageID: "m-5", URL: "https://x.example.com/in", Attempt: 1, Status: 410, LatencyMs: 1,
				ErrorClass: schemas.ClassStatus4xx, Error: "status_4xx: HTTP 410 from x.example.com:443", ConcurrencyLimit: 8, At: at,
				Type: "page", Event: "Pricing", AnonymousID: "a-1", ReceivedAt: schemas.FormatTimestamp(now.Add(-time.Hour)), DeadLettered: "status_4xx"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := appendAttemptRecord(nil, &c.d, &c.res, c.lim, c.out, now)
			got, err := schemas.DecodeAttemptRecord(b)
			if err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("decoded\n%+v\nwant\n%+v", got, c.want)
			}
			strict := json.NewDecoder(bytes.NewReader(b))
			strict.DisallowUnknownFields()
			if err := strict.Decode(new(schemas.AttemptRecord)); err != nil {
				t.Errorf("%s: a member schemas.AttemptRecord does not have: %v", b, err)
			}
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false) // the deliverer writes & < > as they are: both are JSON
			if err := enc.Encode(c.want); err != nil || !bytes.Equal(b, bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
				t.Errorf("written\n%s\nencoding/json writes\n%s", b, want.Bytes())
			}
		})
	}
}

// summarized is d with its summary read (delivery.summarize).
func summarized(d delivery) delivery {
	d.summarize()
	return d
}

// answerOf is an answer with these headers and body, as a client keeps them.
func answerOf(headers map[string]string, body string) *answer {
	a := newAnswer()
	for k, v := range headers {
		a.addHeader([]byte(k), []byte(v))
	}
	a.endHeaders()
	a.body = append(a.body, body...)
	return a
}

// TestClassifierClassesAreSchemas: every class the deliverer gives an outcome is one of
// schemas.Classes, which the console counts by name: the classifier's answers to every status
// and to each kind of error, the regulations' drops, an unavailable destination; and no class
// of the package's source is made from a string of its own (a constant, a conversion), so a new
// class has to be added to schemas.
func TestClassifierClassesAreSchemas(t *testing.T) {
	known := schemas.Classes()
	check := func(what string, c Class) {
		t.Helper()
		if !slices.Contains(known, c) {
			t.Errorf("%s: class %q is not in schemas.Classes %v", what, c, known)
		}
	}
	now := time.Now()
	for status := 100; status < 600; status++ {
		c, _ := Classify(status, nil, nil, now)
		check(fmt.Sprintf("HTTP %d", status), c)
	}
	for _, err := range []error{
		context.DeadlineExceeded,
		&url.Error{Op: "Post", URL: "u", Err: &net.OpError{Op: "dial", Err: timeoutErr{}}},
		&url.Error{Op: "Post", URL: "u", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}},
		&net.DNSError{Err: "no such host", Name: "x"},
		fmt.Errorf("dial: %w", ErrBlockedAddress),
		&requestError{errors.New("bad header")},
		&invalidURLError{errors.New("bad url")},
		errors.New("anything else"),
	} {
		check(fmt.Sprintf("error %v", err), classifyError(err))
	}
	for _, reason := range []string{platform.ForgetDeleted, platform.ForgetSuppressed} {
		check("regulations' "+reason, classOf(reason))
	}
	check("unavailable destination", Unavailable)

	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, v := range n.Values {
					if lit, ok := v.(*ast.BasicLit); ok && isClassType(n.Type) {
						t.Errorf("%s: %s = %s: a class of its own; use a schemas.Class constant", fset.Position(n.Pos()), n.Names[i].Name, lit.Value)
					}
				}
			case *ast.CallExpr:
				if isClassType(n.Fun) {
					t.Errorf("%s: a Class converted from a string: use a schemas.Class constant", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
}

// isClassType reports whether e names the class type: Class or schemas.ErrorClass.
func isClassType(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "Class"
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "schemas" && e.Sel.Name == "ErrorClass"
	}
	return false
}
