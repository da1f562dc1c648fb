package console_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// BenchmarkReplayDryRun: the dry-run count of POST /v1/replays over 1,000,000 small retained
// tracking.events records on the embedded broker, every one of the range read, opened (plain
// here), filtered by a member scan; a tenth match (docs/benchmarks.md#replay). The records are
// produced once, before the timer.
//
//	go test -run '^$' -bench ReplayDryRun -benchtime 1x -count 3 ./console/
func BenchmarkReplayDryRun(b *testing.B) {
	const n = 1_000_000
	h := newHarness(b, nil)
	start := time.Now().Add(-time.Hour)
	batch := make([]*kgo.Record, 0, 10_000)
	for i := range n {
		msg := fmt.Sprintf("m-%07d", i)
		event := "Page Viewed"
		if i%10 == 0 {
			event = "Order Completed"
		}
		batch = append(batch, &kgo.Record{Topic: schemas.TopicEvents, Key: fmt.Appendf(nil, "u-%d", i%5000), Timestamp: start.Add(time.Duration(i) * time.Microsecond),
			Value:   fmt.Appendf(nil, `{"type":"track","messageId":"%s","userId":"u-%d","event":"%s","timestamp":"2026-11-27T03:00:00.000Z","receivedAt":"2026-11-27T03:00:00.012Z","properties":{"n":%d}}`, msg, i%5000, event, i),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("web")}, {Key: schemas.HeaderMessageID, Value: []byte(msg)}, {Key: schemas.HeaderType, Value: []byte("track")}}})
		if len(batch) == cap(batch) {
			h.env.Produce(batch...)
			batch = batch[:0]
		}
	}
	body := map[string]any{"destinationId": "file-hooks", "from": schemas.FormatTimestamp(start.Add(-time.Second)), "dryRun": true, "filter": map[string]any{"event": "Order Completed"}}
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		r := h.do(http.MethodPost, "/v1/replays", body)
		if r.Status != http.StatusOK || r.Data(b)["matched"] != float64(n/10) {
			b.Fatalf("dry run: %d %s", r.Status, r.Body)
		}
		b.ReportMetric(time.Since(t0).Seconds(), "s/count")
	}
}
