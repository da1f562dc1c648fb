package console

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The delivery log's reader: webhooks.attempts into views.Attempts (per destination the last
// AttemptsPerDestination attempts and per-minute counters over StatsWindow), views.Messages
// (per destination the last MessagesPerDestination messages with their attempts and answers)
// and views.Health (what became of each message). At start the console reads the attempts of
// the last StatsWindow again, so a restarted console shows the same log, messages and stats. A
// record sealed with its user's data key (docs/security.md#crypto-shredding) is opened first;
// one whose key was shredded is not read: its user was deleted.

// runAttempts keeps the delivery log: webhooks.attempts from StatsWindow ago, then as written.
func (s *Service) runAttempts(ctx context.Context) error {
	// The rules and the recent events first: the attempts of a forgotten message are not read
	// back (docs/console.md#what-the-console-forgets).
	if !waitReady(ctx, s.forget.ready, s.ready.events) {
		return nil
	}
	var batch []attempt
	var sealed opener // the batch's sealed records, opened: the views copy what they keep
	var events []views.HealthEvent
	dec := newAttemptDecoder()
	return s.runView(ctx, "attempts", s.ready.attempts, platform.TopicReaderConfig{
		Topic: s.cfg.AttemptsTopic, Start: platform.StartAfter(s.now().Add(-s.cfg.StatsWindow)),
		Apply: func(r *kgo.Record) {
			if r = sealed.open(s, r); r == nil {
				return // sealed with a shredded key: its user was deleted
			}
			s.replayRuns.observe(r.Value) // a replay's progress (replay.go)
			a, ok := dec.attempt(r)
			if !ok {
				s.metrics.attemptsSkipped.Inc()
				return
			}
			batch = append(batch, a)
		},
	}, func() {
		if len(batch) == 0 {
			return
		}
		s.messages.Add(batch, s.messageForgotten)
		forgotten := s.attempts.Add(batch, s.forget.messageForgotten)
		if forgotten > 0 {
			s.metrics.forgotten.WithLabelValues("attempts").Add(float64(forgotten))
		}
		for i := range batch {
			events = append(events, healthEventOf(&batch[i]))
		}
		s.health.Add(events, s.forget.messageForgotten)
		clear(events)
		events = events[:0]
		s.metrics.attemptsRead.Add(float64(len(batch)))
		clear(batch)
		batch = batch[:0]
		sealed.reset()
	})
}

// attemptNames are the JSON names of schemas.AttemptRecord's fields, in their order (the order
// the deliverer writes them).
var attemptNames = []string{"destinationId", "messageId", "url", "attempt", "status", "latencyMs", "errorClass", "error", "concurrencyLimit", "pausedForMs", "test", "at",
	"type", "event", "userId", "anonymousId", "receivedAt", "nextAttemptAt", "deadLettered", "responseHeaders", "responseBody",
	"reason", "filter", "replayId"}

// attemptFields are those members as read: the strings alias the record. The log keeps no
// concurrencyLimit nor pausedForMs; they are read to refuse a record as
// schemas.DecodeAttemptRecord would.
type attemptFields struct {
	destinationID, messageID, url, errorClass, err, at []byte
	reason, filter, replayID                           []byte
	attempt, status, concurrencyLimit, pausedForMs     int
	latencyMs                                          float64
	test                                               bool

	typ, event, userID, anonymousID, receivedAt, nextAttemptAt, deadLettered, responseBody []byte
	responseHeaders                                                                        map[string]string
}

// decodeAttemptFields reads b's attemptNames into f as schemas.DecodeAttemptRecord
// (json.Unmarshal) reads them (console/decode.go); errUnsure for a record it leaves to
// json.Unmarshal.
func decodeAttemptFields(b []byte, f *attemptFields) error {
	next := 0 // the deliverer writes them in attemptNames' order
	err := schemas.EachMember(b, func(key, v []byte) error {
		i, err := fieldIndexFrom(key, attemptNames, next)
		if i >= 0 {
			next = i + 1
		}
		switch i {
		case 0:
			return decodeString(v, &f.destinationID)
		case 1:
			return decodeString(v, &f.messageID)
		case 2:
			return decodeString(v, &f.url)
		case 3:
			return decodeInt(v, &f.attempt)
		case 4:
			return decodeInt(v, &f.status)
		case 5:
			return decodeFloat(v, &f.latencyMs)
		case 6:
			return decodeString(v, &f.errorClass)
		case 7:
			return decodeString(v, &f.err)
		case 8:
			return decodeInt(v, &f.concurrencyLimit)
		case 9:
			return decodeInt(v, &f.pausedForMs)
		case 10:
			return decodeBool(v, &f.test)
		case 11:
			return decodeString(v, &f.at)
		case 12:
			return decodeString(v, &f.typ)
		case 13:
			return decodeString(v, &f.event)
		case 14:
			return decodeString(v, &f.userID)
		case 15:
			return decodeString(v, &f.anonymousID)
		case 16:
			return decodeString(v, &f.receivedAt)
		case 17:
			return decodeString(v, &f.nextAttemptAt)
		case 18:
			return decodeString(v, &f.deadLettered)
		case 19:
			return decodeStringMap(v, &f.responseHeaders)
		case 20:
			return decodeString(v, &f.responseBody)
		case 21:
			return decodeString(v, &f.reason)
		case 22:
			return decodeString(v, &f.filter)
		case 23:
			return decodeString(v, &f.replayID)
		}
		return err
	})
	if err != nil && !errors.Is(err, errWrongType) {
		return errUnsure // the scanner refused it, or a key it cannot match
	}
	return err
}

// attemptDecoder reads webhooks.attempts records into attempts. Not safe for concurrent use:
// the view's goroutine owns it.
type attemptDecoder struct {
	names interner          // destination ids and error classes
	urls  map[string]string // a URL as written → as shown (schemas.RedactURL)
}

func newAttemptDecoder() *attemptDecoder {
	return &attemptDecoder{names: interner{}, urls: map[string]string{}}
}

// attempt reads one record; false for a record that cannot be read.
func (d *attemptDecoder) attempt(r *kgo.Record) (attempt, bool) {
	var f attemptFields
	switch err := decodeAttemptFields(r.Value, &f); {
	case errors.Is(err, errUnsure):
		return attemptOf(r)
	case err != nil || len(f.destinationID) == 0:
		return attempt{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(f.at))
	if err != nil {
		at = r.Timestamp
	}
	a := attempt{At: at.UTC(), DestinationID: d.names.Get(f.destinationID), MessageID: string(f.messageID), URL: d.redacted(f.url),
		Attempt: f.attempt, Status: f.status, LatencyMs: f.latencyMs, ErrorClass: d.names.Get(f.errorClass), Test: f.test,
		MessageFacts: views.MessageFacts{Type: d.names.Get(f.typ), Event: d.names.Get(f.event), UserID: string(f.userID), AnonymousID: string(f.anonymousID),
			ReceivedAt: timestamp(f.receivedAt), NextAttemptAt: timestamp(f.nextAttemptAt), DeadLettered: d.names.Get(f.deadLettered),
			ResponseHeaders: f.responseHeaders, ResponseBody: string(f.responseBody)}}
	if len(f.err) > 0 {
		a.Error = string(f.err)
	}
	if len(f.reason) > 0 {
		a.Reason = d.names.Get(f.reason)
	}
	if len(f.filter) > 0 {
		a.Filter = d.names.Get(f.filter)
	}
	return a, true
}

// timestamp reads a timestamp member (schemas.FormatTimestamp, or any RFC 3339 time); zero
// when absent or unreadable.
func timestamp(b []byte) time.Time {
	if len(b) == 0 {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// redacted is schemas.RedactURL(string(u)), remembered: a destination's URLs repeat in every
// attempt.
func (d *attemptDecoder) redacted(u []byte) string {
	if s, ok := d.urls[string(u)]; ok {
		return s
	}
	if len(d.urls) >= views.MaxInterned {
		clear(d.urls)
	}
	s := schemas.RedactURL(string(u)) // the deliverer redacts it already
	d.urls[string(u)] = s
	return s
}

// attemptOf reads one webhooks.attempts record with schemas.DecodeAttemptRecord; false for a
// record that cannot be read.
func attemptOf(r *kgo.Record) (attempt, bool) {
	rec, err := schemas.DecodeAttemptRecord(r.Value)
	if err != nil || rec.DestinationID == "" {
		return attempt{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, rec.At)
	if err != nil {
		at = r.Timestamp
	}
	return attempt{At: at.UTC(), DestinationID: rec.DestinationID, MessageID: rec.MessageID, URL: schemas.RedactURL(rec.URL), // the deliverer redacts it already
		Attempt: rec.Attempt, Status: rec.Status, LatencyMs: rec.LatencyMs, ErrorClass: string(rec.ErrorClass), Error: rec.Error, Test: rec.Test,
		MessageFacts: views.MessageFacts{Type: rec.Type, Event: rec.Event, UserID: rec.UserID, AnonymousID: rec.AnonymousID,
			ReceivedAt: timestamp([]byte(rec.ReceivedAt)), NextAttemptAt: timestamp([]byte(rec.NextAttemptAt)), DeadLettered: rec.DeadLettered,
			ResponseHeaders: rec.ResponseHeaders, ResponseBody: rec.ResponseBody},
		Reason: string(rec.Reason), Filter: rec.Filter}, true
}

// healthEventOf is what the health view reads of an attempt record.
func healthEventOf(a *attempt) views.HealthEvent {
	return views.HealthEvent{DestinationID: a.DestinationID, MessageID: a.MessageID, At: a.At, URL: a.URL, Attempt: a.Attempt,
		Class: a.ErrorClass, Error: a.Error, Reason: a.Reason, Filter: a.Filter, Test: a.Test, ReceivedAt: a.ReceivedAt}
}
