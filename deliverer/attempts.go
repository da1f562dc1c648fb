package deliverer

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// The attempt log webhooks.attempts and the attempt metrics (docs/delivery.md#attempt-log-and-metrics).

// outcome is what became of a delivery after an attempt, as its attempt records say
// (schemas.AttemptRecord's nextAttemptAt and deadLettered): the zero value when it was
// delivered, or is not retried.
type outcome struct {
	nextAttemptAt time.Time // handed to a retry tier, due then
	deadLettered  string    // handed to the DLQ, with this reason
}

// appendAttemptRecord appends one record of webhooks.attempts, a schemas.AttemptRecord: its
// members in the type's order, "error" on failure only, "pausedForMs" only while the endpoint
// pauses its host, "test" on a test delivery only, what the message is once d was summarized
// (delivery.summarize), the outcome's members when set, the answer's when one came. It is
// written by hand (one per POST, on the hot path), and writes what encoding/json writes of the
// type (TestAttemptRecordRoundTrip).
func appendAttemptRecord(b []byte, d *delivery, res *urlResult, lim hostLimit, out outcome, now time.Time) []byte {
	b = append(b, `{"destinationId":`...)
	b = schemas.AppendJSONString(b, d.destID)
	b = append(b, `,"messageId":`...)
	b = schemas.AppendJSONString(b, d.messageID)
	b = append(b, `,"url":`...)
	b = schemas.AppendJSONString(b, redactURL(res.URL)) // no credentials in the log
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(d.attempt), 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(res.Status), 10)
	b = append(b, `,"latencyMs":`...)
	b = strconv.AppendFloat(b, float64(res.Latency.Microseconds())/1000, 'f', -1, 64)
	b = append(b, `,"errorClass":`...)
	b = schemas.AppendJSONString(b, string(res.Class))
	if res.Class != Success {
		b = append(b, `,"error":`...)
		b = schemas.AppendJSONString(b, describe(res))
	}
	b = append(b, `,"concurrencyLimit":`...)
	b = strconv.AppendInt(b, int64(lim.limit), 10)
	if lim.paused > 0 {
		b = append(b, `,"pausedForMs":`...)
		b = strconv.AppendInt(b, lim.paused.Milliseconds(), 10)
	}
	if d.test {
		b = append(b, `,"test":true`...)
	}
	b = append(b, `,"at":"`...)
	b = schemas.AppendTimestamp(b, now)
	b = append(b, '"')
	if d.summarized {
		b = appendSummary(b, d)
	}
	if !out.nextAttemptAt.IsZero() {
		b = append(b, `,"nextAttemptAt":"`...)
		b = schemas.AppendTimestamp(b, out.nextAttemptAt)
		b = append(b, '"')
	}
	if out.deadLettered != "" {
		b = append(b, `,"deadLettered":`...)
		b = schemas.AppendJSONString(b, out.deadLettered)
	}
	b = res.answer.appendTo(b, res.Status)
	if d.replay != "" {
		b = append(b, `,"replayId":`...)
		b = schemas.AppendJSONString(b, d.replay)
	}
	return append(b, '}')
}

// redactedURLs remembers schemas.RedactURL of the webhook URLs, which come from the config and
// are few: the attempt record of every POST names its URL. Past maxRedactedURLs (a config that
// keeps changing its URLs) the others are redacted each time.
var (
	redactedURLs  sync.Map // string → string
	redactedCount atomic.Int32
)

const maxRedactedURLs = 4096

// redactURL is schemas.RedactURL(raw), remembered.
func redactURL(raw string) string {
	if v, ok := redactedURLs.Load(raw); ok {
		return v.(string)
	}
	r := schemas.RedactURL(raw)
	if redactedCount.Load() < maxRedactedURLs {
		if _, loaded := redactedURLs.LoadOrStore(raw, r); !loaded {
			redactedCount.Add(1)
		}
	}
	return r
}

// appendSummary appends what the message is: type, event, userId, anonymousId, receivedAt.
func appendSummary(b []byte, d *delivery) []byte {
	sum := &d.sum
	if d.msgType != "" {
		b = append(b, `,"type":`...)
		b = schemas.AppendJSONString(b, d.msgType)
	} else {
		b = appendMember(b, `,"type":`, sum.Type)
	}
	b = appendMember(b, `,"event":`, sum.Event)
	b = appendMember(b, `,"userId":`, sum.UserID)
	b = appendMember(b, `,"anonymousId":`, sum.AnonymousID)
	n := len(b)
	if b = appendMember(b, `,"receivedAt":`, sum.ReceivedAt); len(b) > n {
		return b
	}
	// No receivedAt in the body: the first attempt's time, which the router sets when it
	// routes the message (the first-attempt-at header).
	b = append(b, `,"receivedAt":"`...)
	b = schemas.AppendTimestamp(b, d.firstAttemptAt)
	return append(b, '"')
}

// appendMember appends name and raw as a JSON string (schemas.AppendSummaryString), nothing
// when raw is absent or not a string nor a number.
func appendMember(b []byte, name string, raw []byte) []byte {
	if raw == nil {
		return b
	}
	n := len(b)
	b = append(b, name...)
	if b, ok := schemas.AppendSummaryString(b, raw); ok {
		return b
	}
	return b[:n]
}

// attemptRecord is the webhooks.attempts record of one POST of d (appendAttemptRecord). For a
// delivery whose body was sealed (docs/security.md#crypto-shredding), a record that holds the
// endpoint's answer (which may repeat the body) is sealed with d's data key, with the
// tributary-key header; one without an answer (an empty 2xx: most POSTs) holds nothing the
// message's record keys and headers do not already carry in clear (its ids, type and event
// name) and stays plain, with the tributary-user-key header naming the key, so that readers
// drop it once the user is deleted as they drop sealed records. Plain otherwise.
func (s *Service) attemptRecord(d *delivery, res *urlResult, lim hostLimit, out outcome, now time.Time) *kgo.Record {
	seal := d.key != nil && res.answer.kept(res.Status)
	head := 0
	if seal {
		head = shred.Headroom
	}
	size := head + 288 + shred.TagSize
	if res.answer != nil {
		size += len(res.answer.headers) + len(res.answer.body) + len(res.answer.body)/8 // escapes
	}
	rec := attemptRecords.get(size)
	b := appendAttemptRecord(rec.Value[:head], d, res, lim, out, now)
	rec.Topic, rec.Key, rec.Value = s.cfg.AttemptsTopic, append(rec.Key[:0], d.destID...), b
	switch {
	case seal:
		rec.Value = d.key.SealReserved(b)
		rec.Headers = append(rec.Headers[:0], kgo.RecordHeader{Key: schemas.HeaderDataKey, Value: d.key.ID()})
	case d.key != nil:
		rec.Headers = append(rec.Headers[:0], kgo.RecordHeader{Key: schemas.HeaderUserKey, Value: d.key.ID()})
	default:
		rec.Headers = rec.Headers[:0]
	}
	return rec
}

// logAttempt counts one POST and writes its attempt record.
func (s *Service) logAttempt(d *delivery, res *urlResult, lim hostLimit, out outcome, now time.Time) {
	dm := s.metrics.forDestination(d.destID)
	dm.attempts(statusClass(res)).Inc()
	dm.latency.Observe(res.Latency.Seconds())
	if lim.limit > 0 { // 0: a test delivery to a host no delivery has used yet
		dm.limit.Set(float64(lim.limit))
	}
	s.cl.Produce(s.grace, s.attemptRecord(d, res, lim, out, now), attemptRecords.put)
}

// attemptRecords are the attempt records' kgo.Records and buffers, used again once produced
// (one per POST: their allocation showed in the whole product's GC). A buffered channel is
// the free list: taking and giving back copy no slice header to the heap, as a sync.Pool of
// slices would. A record grown past maxPooledAttempt (a large answer) is not kept.
var attemptRecords = recordPool{free: make(chan *kgo.Record, 4096)}

// maxPooledAttempt bounds the buffer of a pooled attempt record: the common records are
// a few hundred bytes, one with an answer's 4 KB body about 5 KB.
const maxPooledAttempt = 8 << 10

type recordPool struct{ free chan *kgo.Record }

// get is an empty record whose Value has a capacity of at least size.
func (p recordPool) get(size int) *kgo.Record {
	select {
	case r := <-p.free:
		if cap(r.Value) < size {
			r.Value = make([]byte, 0, size)
		}
		return r
	default:
		return &kgo.Record{Value: make([]byte, 0, size)}
	}
}

// put is the Produce promise of an attempt record: the client is done with r, which is kept
// (its buffers emptied, nothing else held) for the next one.
func (p recordPool) put(r *kgo.Record, _ error) {
	if cap(r.Value) > maxPooledAttempt {
		return
	}
	*r = kgo.Record{Key: r.Key[:0], Value: r.Value[:0], Headers: r.Headers[:0]}
	select {
	case p.free <- r:
	default:
	}
}

// statusClass is the status label of the attempts metric: 2xx, 4xx, 5xx, or the error class.
func statusClass(res *urlResult) string {
	if res.Status > 0 {
		return strconv.Itoa(res.Status/100) + "xx"
	}
	return string(res.Class)
}

// describe is the last-error text of a result; it never holds the URL's query (secrets).
func describe(res *urlResult) string {
	if res.Err != nil {
		var ue interface{ Unwrap() error }
		err := res.Err
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			err = ue.Unwrap() // *url.Error repeats the URL
		}
		return string(res.Class) + ": " + err.Error()
	}
	return fmt.Sprintf("%s: HTTP %d from %s", res.Class, res.Status, res.Host)
}
