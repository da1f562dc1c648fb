package console

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/schemas"
)

// The views' apply paths, one record per op: what a view spends on each record it reads, Kafka
// left out (docs/benchmarks.md#console).
//
//	go test -run '^$' -bench 'AttemptsApply|EventsApply' -benchtime 2000x -count 3 ./console/

// benchAttemptRecords are webhooks.attempts records as the deliverer writes them
// (deliverer/attempts.go appendAttemptRecord): 20 destinations, 1 in 10 a failure with its
// error text, 1 in 100 of those with quotes in it.
func benchAttemptRecords(n int) []*kgo.Record {
	now := time.Now().UTC()
	out := make([]*kgo.Record, n)
	for i := range out {
		dest := "dest-" + strconv.Itoa(i%20)
		b := append([]byte(`{"destinationId":`), schemas.AppendJSONString(nil, dest)...)
		b = append(b, `,"messageId":`...)
		b = schemas.AppendJSONString(b, fmt.Sprintf("0b7c5a2e-4f1d-4c8e-9a53-%012d", i))
		b = append(b, `,"url":`...)
		b = schemas.AppendJSONString(b, "https://hooks.example.com/"+dest+"?token=xxxxx")
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(1+i%3), 10)
		status, class, msg := 200, "ok", ""
		switch {
		case i%1000 == 0:
			status, class, msg = 0, "timeout", `timeout: Post "https://hooks.example.com/`+dest+`": context deadline exceeded`
		case i%10 == 0:
			status, class, msg = 503, "status_5xx", "status_5xx: HTTP 503 from hooks.example.com"
		}
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(status), 10)
		b = append(b, `,"latencyMs":`...)
		b = strconv.AppendFloat(b, float64(5000+i%200000)/1000, 'f', -1, 64)
		b = append(b, `,"errorClass":`...)
		b = schemas.AppendJSONString(b, class)
		if msg != "" {
			b = append(b, `,"error":`...)
			b = schemas.AppendJSONString(b, msg)
		}
		b = append(b, `,"concurrencyLimit":16,"at":"`...)
		b = schemas.AppendTimestamp(b, now.Add(time.Duration(i)*time.Millisecond))
		b = append(b, `"}`...)
		out[i] = &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte(dest), Value: b, Timestamp: now}
	}
	return out
}

// BenchmarkAttemptsApply: one webhooks.attempts record read into the delivery log.
func BenchmarkAttemptsApply(b *testing.B) {
	recs := benchAttemptRecords(1000)
	l, dec := views.NewAttempts(1000, time.Hour), newAttemptDecoder()
	one := make([]attempt, 1)
	for _, r := range recs { // the rings and minute counters allocated: measure the steady state
		one[0], _ = dec.attempt(r)
		l.Add(one, nil)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		a, ok := dec.attempt(recs[i%len(recs)])
		if !ok {
			b.Fatal("skipped")
		}
		one[0] = a
		l.Add(one, nil)
	}
}

// benchMessage is a track call as ingest writes it to tracking.events (about 600 bytes).
func benchMessage(i int) []byte {
	return fmt.Appendf(nil, `{"type":"track","event":"Order Completed","userId":"user-%d","anonymousId":"6f1c2b9e-0d4a-4c1f-8d2e-%012d",`+
		`"messageId":"0b7c5a2e-4f1d-4c8e-9a53-%012d","properties":{"orderId":"o-%d","revenue":42.5,"currency":"EUR","products":[{"sku":"A-1","price":19.9,"quantity":1},{"sku":"B-2","price":22.6,"quantity":1}]},`+
		`"context":{"ip":"203.0.113.7","library":{"name":"analytics.js","version":"5.2.0"},"userAgent":"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36","locale":"fr-FR"},`+
		`"integrations":{},"timestamp":"2026-11-27T03:00:00.000Z","originalTimestamp":"2026-11-27T03:00:00.000Z","sentAt":"2026-11-27T03:00:00.010Z","receivedAt":"2026-11-27T03:00:00.012Z"}`,
		i%5000, i, i, i)
}

// benchEventRecords are tracking.events records as ingest writes them (ingest/process.go: the
// message, the source, message id and type headers), or with rejected, tracking.rejected
// records (the message as sent, the reason and the source only).
func benchEventRecords(n int, rejected bool) []*kgo.Record {
	now := time.Now()
	out := make([]*kgo.Record, n)
	for i := range out {
		src := "source-" + strconv.Itoa(i%10)
		r := &kgo.Record{Topic: schemas.TopicEvents, Value: benchMessage(i), Timestamp: now}
		if rejected {
			r.Topic = schemas.TopicRejected
			r.Headers = []kgo.RecordHeader{{Key: schemas.HeaderReason, Value: []byte("invalid_message: event: required")}, {Key: schemas.HeaderSourceID, Value: []byte(src)}}
		} else {
			r.Headers = []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte(src)},
				{Key: schemas.HeaderMessageID, Value: fmt.Appendf(nil, "0b7c5a2e-4f1d-4c8e-9a53-%012d", i)}, {Key: schemas.HeaderType, Value: []byte("track")}}
		}
		out[i] = r
	}
	return out
}

// BenchmarkEventsApply: one tracking.events (accepted) or tracking.rejected (rejected) record
// read into the debugger's view.
func BenchmarkEventsApply(b *testing.B) {
	for _, rejected := range []bool{false, true} {
		name := "accepted"
		if rejected {
			name = "rejected"
		}
		b.Run(name, func(b *testing.B) {
			recs := benchEventRecords(1000, rejected)
			l, sources := views.NewEvents(100), interner{}
			one := make([]views.Record, 1)
			for _, r := range recs { // the rings' buffers allocated: measure the steady state
				one[0] = views.Record{Source: sourceOf(r, sources), R: r, Rejected: rejected}
				l.Add(one, nil)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r := recs[i%len(recs)]
				src := sourceOf(r, sources)
				one[0] = views.Record{Source: src, R: r, Rejected: rejected}
				l.Add(one, nil)
			}
		})
	}
}

// benchSummarizedRecords are benchAttemptRecords with what the deliverer writes of the message
// after "at" (deliverer/attempts.go appendSummary): type, event, userId, anonymousId and
// receivedAt, as on every POST of a message since they were added.
func benchSummarizedRecords(n int) []*kgo.Record {
	recs := benchAttemptRecords(n)
	for i, r := range recs {
		v := r.Value[:len(r.Value)-1]
		v = fmt.Appendf(v, `,"type":"track","event":"Order Completed","userId":"user-%d","anonymousId":"6f1c2b9e-0d4a-4c1f-8d2e-%012d","receivedAt":"2026-11-27T03:00:00.012Z"}`, i%5000, i)
		r.Value = v
	}
	return recs
}

// BenchmarkAttemptDecode: one webhooks.attempts record of a message decoded, as the console's
// reader does before any view takes it.
func BenchmarkAttemptDecode(b *testing.B) {
	recs := benchSummarizedRecords(1000)
	dec := newAttemptDecoder()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := dec.attempt(recs[i%len(recs)]); !ok {
			b.Fatal("skipped")
		}
	}
}
