package devstack_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// The webhook POST as the deliverer makes it (four headers, a 400-byte body, read the answer),
// through net/http's client (what the deliverer uses) and through fasthttp's, to a fasthttp
// endpoint on loopback: what a leaner HTTP/1.1 client would save per webhook
// (docs/benchmarks.md#delivery-at-real-world-latency-adaptive-limit-per-host-no-head-of-line-blocking).
//
//	go test -run '^$' -bench WebhookClient -benchtime 3s -count 3 -cpu 2 ./devstack
var clientBenchBody = bytes.Repeat([]byte("x"), 400)

func clientBenchServer(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(c *fasthttp.RequestCtx) {}}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	return "http://" + ln.Addr().String() + "/hook"
}

func BenchmarkWebhookClientNetHTTP(b *testing.B) {
	url := clientBenchServer(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 1024, ForceAttemptHTTP2: true}
	cl := &http.Client{Transport: tr}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(clientBenchBody))
			req.Header.Set("User-Agent", "Tributary/1.0")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Message-Id", "m-1")
			req.Header.Set("X-Signature", "0123456789abcdef0123456789abcdef01234567")
			resp, err := cl.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			cancel()
		}
	})
}

func BenchmarkWebhookClientFastHTTP(b *testing.B) {
	url := clientBenchServer(b)
	cl := &fasthttp.Client{MaxConnsPerHost: 1024, DisableHeaderNamesNormalizing: true, NoDefaultUserAgentHeader: true}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := fasthttp.AcquireRequest()
			resp := fasthttp.AcquireResponse()
			req.SetRequestURI(url)
			req.Header.SetMethod(http.MethodPost)
			req.Header.Set("User-Agent", "Tributary/1.0")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Message-Id", "m-1")
			req.Header.Set("X-Signature", "0123456789abcdef0123456789abcdef01234567")
			req.SetBodyRaw(clientBenchBody)
			if err := cl.DoTimeout(req, resp, 5*time.Second); err != nil {
				b.Fatal(err)
			}
			fasthttp.ReleaseRequest(req)
			fasthttp.ReleaseResponse(resp)
		}
	})
}
