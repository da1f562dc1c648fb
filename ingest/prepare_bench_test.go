package ingest

import (
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// BenchmarkPrepare is decode + validate + enrich + encode of one realistic ~400-byte track call
// as it arrives in a batch (batch-level context merged, sentAt known, peer IP added): the
// per-message work of ingest without HTTP and Kafka.
//
//	go test -run '^$' -bench Prepare -benchmem -cpu 1 ./ingest
func BenchmarkPrepare(b *testing.B) {
	s := &Service{cfg: DefaultConfig()}
	src := &schemas.Source{ID: "web"}
	raw := []byte(`{"type":"track","event":"Order Completed","userId":"user-48213","anonymousId":"8f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b","timestamp":"2026-11-23T10:00:00.123Z","properties":{"orderId":"o-99812","total":129.99,"revenue":119.99,"currency":"USD","products":[{"sku":"sku-1","price":64.99,"quantity":2}]},"context":{"userAgent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7)","locale":"en-US","page":{"path":"/checkout"}},"_metadata":{"bundled":["Segment.io"]}}`)
	now := time.Date(2026, 11, 23, 10, 0, 1, 0, time.UTC)
	env := &envelope{receivedAt: now, sentAt: now.Add(-200 * time.Millisecond), ip: "203.0.113.9",
		context: []byte(`{"library":{"name":"analytics-node","version":"3.1.0"}}`)}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, rej := s.prepare(raw, src, env); rej != nil {
			b.Fatal(rej.reason)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
