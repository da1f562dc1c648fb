package deliverer

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestRequestsThatCannotBeSentAreInvalidNotConnectionFailures: a request net/http refuses for
// itself — a messageId or a static header value with a control character, an invalid method —
// is classed invalid_request (permanent, not counted toward the breaker), never connection
// (retried for hours, counted); nothing reaches the endpoint, and the error holds neither the
// header's value nor the URL's query. A refused connection stays a connection failure. Before,
// every one of them was classed connection.
func TestRequestsThatCannotBeSentAreInvalidNotConnectionFailures(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got.Add(1) }))
	defer srv.Close()
	client := testHTTPClient(t, nil)
	secretURL := srv.URL + "/hook?token=s3cret"
	dest := func(headers map[string]string) *schemas.Destination {
		return &schemas.Destination{ID: "d", Settings: schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: secretURL, Headers: headers}}}}
	}
	now := time.Now()
	for _, c := range []struct {
		name      string
		messageID string
		headers   map[string]string
	}{
		{"messageId with a bell", "p1\a", nil},
		{"messageId with CR LF", "x\r\nX-Injected: 1", nil},
		{"static header value with LF", "m1", map[string]string{"Authorization": "Bearer sekr\nit"}},
		{"static header name with a space", "m1", map[string]string{"X Team": "growth"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := dest(c.headers)
			res := post(context.Background(), client, time.Second, &request{dest: d, entries: d.Settings.Webhooks, messageID: c.messageID, body: []byte(`{}`)}, now)[0]
			if res.Class != InvalidRequest || res.Class.Retryable() || outcomeOf(res.Class) != hostUnknown {
				t.Fatalf("class %s (%v), want invalid_request, permanent, not counted", res.Class, res.Err)
			}
			if why := describe(&res); strings.Contains(why, "sekr") || strings.Contains(why, "s3cret") || strings.Contains(why, "Injected") {
				t.Errorf("last-error %q holds a header value or the URL's query", why)
			}
		})
	}
	// Whatever checkRequest does not foresee: an error net/http returns before it asks for a
	// connection is about the request.
	req, _ := http.NewRequest(http.MethodPost, secretURL, nil)
	req.Method = "BAD METHOD"
	_, err := send(client.std.client, req)
	if c, _ := Classify(0, nil, err, now); c != InvalidRequest || !errors.Is(err, ErrInvalidRequest) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("invalid method: %s (%v), want invalid_request without the URL", c, err)
	}
	req, _ = http.NewRequest(http.MethodPost, secretURL, nil)
	req.Header["X-Raw"] = []string{"a\r\nb"} // past checkRequest
	_, err = send(client.std.client, req)
	if c, _ := Classify(0, nil, err, now); c != InvalidRequest {
		t.Errorf("invalid header sent as it is: %s (%v), want invalid_request", c, err)
	}
	if n := got.Load(); n != 0 {
		t.Fatalf("the endpoint received %d requests that could not be sent", n)
	}
	// A connection refused is still a connection failure.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/"
	l.Close()
	req, _ = http.NewRequest(http.MethodPost, closed, nil)
	_, err = send(client.std.client, req)
	if c, _ := Classify(0, nil, err, now); c != ConnError {
		t.Errorf("connection refused: %s (%v), want connection", c, err)
	}
}
