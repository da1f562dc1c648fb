package schemas

import (
	"encoding/json"
	"testing"
	"time"
)

// benchMessage is a realistic ~400-byte track call, as analytics.js or analytics-go send it.
var benchMessage = []byte(`{"type":"track","messageId":"ajs-next-1706262420573-2f9b","anonymousId":"5f0a4b2c-9d1e-4c3b-8a7f-1e2d3c4b5a69","userId":"user_829301","event":"Order Completed","properties":{"orderId":"ord_58213","total":129.99,"currency":"USD","coupon":"WINTER","items":3},"context":{"library":{"name":"analytics.js","version":"next-1.64.0"},"page":{"path":"/checkout","url":"https://shop.example.com/checkout"},"locale":"en-US"},"timestamp":"2026-01-26T09:47:00.573Z","sentAt":"2026-01-26T09:47:00.580Z"}`)

// BenchmarkDecodeValidateEncode is the per-message work of ingest: decode, validate, enrich
// (receivedAt, timestamp, context.ip) and encode the canonical JSON.
func BenchmarkDecodeValidateEncode(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMessage)))
	now := time.Now()
	buf := make([]byte, 0, 1024)
	for b.Loop() {
		m, err := DecodeMessage(benchMessage)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Validate(); err != nil {
			b.Fatal(err)
		}
		m.ReceivedAt = now
		m.OriginalTimestamp = m.Timestamp
		m.Timestamp = now.Add(m.OriginalTimestamp.Sub(m.SentAt))
		if err := m.SetContextIPIfAbsent("203.0.113.7"); err != nil {
			b.Fatal(err)
		}
		buf = m.AppendJSON(buf[:0])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkStdlibDecodeEncode is the same decode and encode with encoding/json into a struct of
// json.RawMessage fields, for comparison.
func BenchmarkStdlibDecodeEncode(b *testing.B) {
	type stdMessage struct {
		Type, MessageID, AnonymousID, UserID, Event string
		Properties, Context                         json.RawMessage
		Timestamp, SentAt                           time.Time
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchMessage)))
	for b.Loop() {
		var m stdMessage
		if err := json.Unmarshal(benchMessage, &m); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(&m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkRoutingView is the per-message work of the router: read the routing fields and
// write the delivered body.
func BenchmarkRoutingView(b *testing.B) {
	m, _ := DecodeMessage(benchMessage)
	event := m.AppendJSON(nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(event)))
	buf := make([]byte, 0, 1024)
	for b.Loop() {
		v, err := DecodeRoutingView(event)
		if err != nil {
			b.Fatal(err)
		}
		buf = AppendWebhookBodyFromEvent(buf[:0], event, &v)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
