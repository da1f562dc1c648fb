package deliverer

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tributary-cdp/tributary/schemas"
)

// The deliverer's HTTP cost per webhook: one POST as an attempt makes it (signed, two static
// headers) to a loopback endpoint that answers 200 at once (docs/benchmarks.md#deliverer-and-the-whole-pipeline).
//
//	go test -run '^$' -bench Post -benchmem -benchtime 20000x -count 3 ./deliverer/
//
// BenchmarkPost: to a net/http endpoint, through the deliverer's client (the lean HTTP/1.1
// path); its allocations include the endpoint's own. BenchmarkPostLeanEndpoint: the same to a
// fasthttp endpoint, which allocates nothing: what is left is the client's.
// BenchmarkPostNetHTTP: that endpoint through net/http, the client every POST used before.
func BenchmarkPost(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	benchmarkPost(b, testHTTPClient(b, nil), srv.URL)
}

func BenchmarkPostLeanEndpoint(b *testing.B) {
	benchmarkPost(b, testHTTPClient(b, nil), fasthttpEndpoint(b))
}

func BenchmarkPostNetHTTP(b *testing.B) {
	benchmarkPost(b, testHTTPClient(b, nil).std, fasthttpEndpoint(b))
}

func benchmarkPost(b *testing.B, client poster, url string) {
	dest := &schemas.Destination{ID: "d", Settings: schemas.DestinationSettings{SharedSecret: "s3cret",
		Webhooks: []schemas.Webhook{{URL: url + "/hook", Headers: map[string]string{"X-Team": "growth", "X-Env": "prod"}}}}}
	body := []byte(`{"version":1,"type":"track","messageId":"m-1","userId":"u-1","event":"Order Completed","properties":{"total":42.5,"currency":"EUR"},"context":{"library":{"name":"analytics.js","version":"2.11.1"}},"timestamp":"2026-01-02T03:04:05.678Z"}`)
	rq := &request{dest: dest, entries: dest.Settings.Webhooks, messageID: "m-1", body: body}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res := post(context.Background(), client, 5*time.Second, rq, time.Now())
			if res[0].Class != Success {
				b.Fatal(res[0].Err)
			}
			res[0].answer.release() // as an attempt does once it logged the POST
		}
	})
}

// fasthttpEndpoint is a loopback endpoint answering 200 without allocating; its URL.
func fasthttpEndpoint(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(*fasthttp.RequestCtx) {}}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown(); <-done })
	return "http://" + ln.Addr().String()
}

// BenchmarkAttemptRecord: what the attempt log costs per POST once the answer is read. "bare":
// the record as it was before it said what the message is (no summary, no answer kept);
// "message and answer": the message's summary read from its body (schemas.SummarizeBody) and
// the record written with it, the outcome and the answer kept (three headers, an 11-byte body),
// pooled as an attempt does (docs/benchmarks.md#deliverer-attempt-records).
//
//	go test -run '^$' -bench AttemptRecord -benchmem -count 3 ./deliverer/
func BenchmarkAttemptRecord(b *testing.B) {
	body := []byte(`{"version":1,"type":"track","messageId":"3233246d-622a-461c-9c55-012a6b336ec8","userId":"user-5","anonymousId":"a-9","event":"Order Completed","timestamp":"2026-01-02T03:04:05.678Z","receivedAt":"2026-01-02T03:04:05.900Z","properties":{"total":42.5,"currency":"EUR","products":[{"sku":"a-1","price":20},{"sku":"b-2","price":22.5}]},"context":{"library":{"name":"analytics.js","version":"2.11.1"},"ip":"203.0.113.9","userAgent":"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36"}}`)
	now := time.Now()
	newDelivery := func() delivery {
		return delivery{destID: "order-hooks", messageID: "3233246d-622a-461c-9c55-012a6b336ec8", attempt: 1, msgType: "track", body: body, firstAttemptAt: now}
	}
	b.Run("bare", func(b *testing.B) {
		res := urlResult{URL: "https://hooks.example.com/in", Host: "hooks.example.com:443", Status: 200, Class: Success, Latency: time.Millisecond}
		b.ReportAllocs()
		for b.Loop() {
			d := newDelivery()
			if v := appendAttemptRecord(make([]byte, 0, 288), &d, &res, hostLimit{limit: 32}, outcome{}, now); len(v) == 0 {
				b.Fatal("empty")
			}
		}
	})
	b.Run("message and answer", func(b *testing.B) {
		res := urlResult{URL: "https://hooks.example.com/in", Host: "hooks.example.com:443", Status: 200, Class: Success, Latency: time.Millisecond}
		b.ReportAllocs()
		for b.Loop() {
			d := newDelivery()
			d.summarize()
			res.answer = newAnswer()
			res.answer.addHeader([]byte("Content-Type"), []byte("application/json"))
			res.answer.addHeader([]byte("Date"), []byte("Fri, 27 Nov 2026 10:00:00 GMT"))
			res.answer.addHeader([]byte("Content-Length"), []byte("11"))
			res.answer.endHeaders()
			res.answer.body = append(res.answer.body, `{"ok":true}`...)
			size := 288 + len(res.answer.headers) + len(res.answer.body)
			if v := appendAttemptRecord(make([]byte, 0, size), &d, &res, hostLimit{limit: 32}, outcome{}, now); len(v) == 0 {
				b.Fatal("empty")
			}
			res.answer.release()
		}
	})
}
