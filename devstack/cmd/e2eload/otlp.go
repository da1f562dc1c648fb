package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpSink is an OTLP/HTTP trace receiver (protobuf, POST /v1/traces) that counts the spans it
// is sent: the collector of a span-export measurement (docs/benchmarks.md#tracing-overhead).
type otlpSink struct {
	srv            *http.Server
	exports, spans atomic.Int64
	bad            atomic.Int64
}

func startOTLPSink(addr string) (*otlpSink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-otlp-addr: %w", err)
	}
	o := &otlpSink{}
	ok, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	o.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		var req collectortrace.ExportTraceServiceRequest
		if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			o.bad.Add(1)
			http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
			return
		}
		var n int64
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += int64(len(ss.Spans))
			}
		}
		o.exports.Add(1)
		o.spans.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(ok)
	})}
	go func() { _ = o.srv.Serve(ln) }()
	return o, nil
}

func (o *otlpSink) report() string {
	return fmt.Sprintf("otlp sink: %d spans in %d exports, %d refused", o.spans.Load(), o.exports.Load(), o.bad.Load())
}

func (o *otlpSink) close() { _ = o.srv.Close() }
