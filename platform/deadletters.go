package platform

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// The dead-letter queue: listing it and replaying it (docs/delivery.md#dead-letters-and-replay).
// `deliverer dlq list`, `deliverer replay` and the console share this code.

// ReplayFilter selects the messages of the DLQ to list or replay, each by its newest dead letter
// (see DeadLetter.MessageKey). Zero fields select every message not replayed yet.
type ReplayFilter struct {
	// DestinationID selects one destination's messages.
	DestinationID string
	// MessageIDs, when not empty, selects only the messages whose id is listed.
	MessageIDs []string
	// Since and Until bound the time the message's newest dead letter was dead-lettered (its
	// Kafka timestamp).
	Since, Until time.Time
	// Again also selects messages whose newest dead letter was replayed before (by default
	// such a message is left alone, so that running the same replay twice sends nothing twice).
	Again bool
}

// ReplayOptions are how ReplayDeadLetters replays.
type ReplayOptions struct {
	// DryRun replays nothing and returns what would be replayed.
	DryRun bool
	// URL, when set, sends each replayed record to this URL only, instead of its destination's
	// webhooks (header schemas.HeaderURL): signed with the destination's secret, with the
	// static headers of its first webhook entry. It must pass schemas.CheckWebhookURL. Empty:
	// the destination's webhooks as configured at delivery time (a dead letter that had been
	// replayed to a URL before goes back to them).
	URL string
	// Skipped, when set, is called for each selected dead letter that is not replayed because
	// its user is deleted or suppressed (reason: ForgetDeleted or ForgetSuppressed; see
	// ReplayTopics.Suppressions), dry run or not.
	Skipped func(d DeadLetter, reason string)
}

// ReplayTopics are the topics of a replay: normally schemas.TopicDLQ, TopicDeliveries and
// TopicDLQReplayed, and the regulations' schemas.TopicSuppressions and TopicDeletionsStatus.
type ReplayTopics struct {
	DLQ, Deliveries, Replayed string
	// Suppressions and DeletionsStatus, when Suppressions is set, are read to their end before
	// a replay: a dead letter its user's regulation forgets (Regulations.Forgets) is skipped,
	// not replayed (docs/delivery.md#deleted-and-suppressed-users). Empty: nothing is skipped.
	Suppressions, DeletionsStatus string
}

// DefaultReplayTopics are the product's topics.
var DefaultReplayTopics = ReplayTopics{DLQ: schemas.TopicDLQ, Deliveries: schemas.TopicDeliveries, Replayed: schemas.TopicDLQReplayed,
	Suppressions: schemas.TopicSuppressions, DeletionsStatus: schemas.TopicDeletionsStatus}

// DeadLetter is one record of the DLQ, as `deliverer dlq list` and the console show it.
type DeadLetter struct {
	Partition     int32     `json:"partition"`
	Offset        int64     `json:"offset"`
	At            time.Time `json:"at"` // when it was dead-lettered
	DestinationID string    `json:"destinationId"`
	MessageID     string    `json:"messageId"`
	Reason        string    `json:"reason"`
	LastStatus    string    `json:"lastStatus,omitempty"`
	LastError     string    `json:"lastError,omitempty"`
	// FirstAttemptAt is when its first delivery attempt was due (header first-attempt-at);
	// zero when the record has no such header.
	FirstAttemptAt time.Time `json:"firstAttemptAt,omitzero"`
	// Attempts is the number of its last attempt (header attempt): the attempts made, or one
	// more when it was dead-lettered before that attempt started (destination deleted,
	// window over); 0 when the record has no such header.
	Attempts int `json:"attempts,omitempty"`
	// URL is the URL it was replayed to before (header url); empty: the destination's
	// webhooks.
	URL string `json:"url,omitempty"`
	// ReplayedAt is when it was last replayed; zero: never.
	ReplayedAt time.Time `json:"replayedAt,omitzero"`

	record *kgo.Record
}

// markerKey is a dead letter's key in TopicDLQReplayed (schemas.ReplayMarkKey).
func (d DeadLetter) markerKey() string { return schemas.ReplayMarkKey(d.Partition, d.Offset) }

// A message's dead letters are one (docs/delivery.md#dead-letters-and-replay): each replay of a
// message that fails again adds a dead letter of it, so the DLQ may hold several records of one
// (destination, message id). Only the newest stands for the message: it is listed, counted and
// replayed; the older ones are superseded. A replay marks them replayed beside the one it sends,
// so that replaying a message by id sends one copy each time, never one per record.

// MessageKey identifies the message a dead letter is of: its destination and message id. A dead
// letter without a message id stands for itself alone.
func (d DeadLetter) MessageKey() string {
	if d.MessageID == "" {
		return "\x00" + d.markerKey()
	}
	return d.DestinationID + "\x00" + d.MessageID
}

// Supersedes reports whether d is a newer dead letter than old (of the same message): a later
// offset in the same partition, else a later Kafka timestamp.
func (d DeadLetter) Supersedes(old DeadLetter) bool {
	if d.Partition == old.Partition {
		return d.Offset > old.Offset
	}
	if !d.At.Equal(old.At) {
		return d.At.After(old.At)
	}
	return d.Partition > old.Partition
}

// ListDeadLetters returns the messages of the DLQ that match f, one dead letter per message (its
// newest: see MessageKey), ordered by partition and offset, each with when it was last replayed.
// It reads both topics to the end offsets it finds (no consumer group: it runs beside the
// deliverers).
func ListDeadLetters(ctx context.Context, kafka KafkaSettings, logger zerolog.Logger, topics ReplayTopics, f ReplayFilter) ([]DeadLetter, error) {
	replayed, err := readMarkers(ctx, kafka, logger, topics.Replayed)
	if err != nil {
		return nil, err
	}
	msgs, err := readMessages(ctx, kafka, logger, topics.DLQ, f, replayed)
	if err != nil {
		return nil, err
	}
	return msgs.selected(f), nil
}

// ReplayDeadLetters re-enqueues the messages of the DLQ that match f into the deliveries topic,
// each once (its newest dead letter: see MessageKey), with a fresh retry window: attempt 1,
// first-attempt-at now, and no reason, last-status, last-error, due-at or deferrals headers (nor
// url, unless o.URL sets it); once Kafka acknowledged them, it marks them replayed
// (TopicDLQReplayed), and with them the older dead letters of the same messages (superseded), so
// that the next replay leaves them alone unless f.Again. A dead letter of a user deleted after
// its message was accepted, or of a suppressed user, is skipped (with topics.Suppressions set):
// neither replayed nor marked, and told to o.Skipped; a delete notice is never skipped.
// o.DryRun replays nothing and returns what it would replay. It returns what it replayed. A crash between the re-enqueue and the mark
// replays those again next time (at least once, as every delivery). The DLQ itself is not
// changed.
//
// It reads the DLQ twice: once for the headers, to find each message's newest dead letter, then
// for the bodies of those it replays, a poll at a time, so that its memory does not grow with
// the bodies of the DLQ.
func ReplayDeadLetters(ctx context.Context, kafka KafkaSettings, logger zerolog.Logger, topics ReplayTopics, f ReplayFilter, o ReplayOptions) ([]DeadLetter, error) {
	if o.URL != "" {
		if err := schemas.CheckWebhookURL(o.URL); err != nil {
			return nil, fmt.Errorf("replay URL: %w", err)
		}
	}
	replayed, err := readMarkers(ctx, kafka, logger, topics.Replayed)
	if err != nil {
		return nil, err
	}
	msgs, err := readMessages(ctx, kafka, logger, topics.DLQ, f, replayed)
	if err != nil {
		return nil, err
	}
	chosen := msgs.selected(f)
	if len(chosen) == 0 {
		return chosen, nil
	}
	var regs *Regulations
	if topics.Suppressions != "" {
		if regs, err = readRegulations(ctx, kafka, logger, topics); err != nil {
			return nil, err
		}
	}
	if o.DryRun && regs == nil {
		return chosen, nil
	}
	want := make(map[string]bool, len(chosen))
	for _, d := range chosen {
		want[d.markerKey()] = true
	}
	var producer *kgo.Client
	if !o.DryRun {
		if producer, err = NewKafkaClient(kafka, logger, kgo.RequiredAcks(kgo.AllISRAcks())); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		defer producer.Close()
	}
	var done, batch []DeadLetter
	apply := func(r *kgo.Record) {
		d := deadLetter(r)
		if !want[d.markerKey()] {
			return
		}
		delete(want, d.markerKey()) // once, even if the topic were read twice
		if regs != nil {
			if why := regs.Forgets(r, d.DestinationID, IsDeleteNotice(r)); why != "" {
				if o.Skipped != nil {
					d.record = nil
					o.Skipped(d, why)
				}
				return
			}
		}
		batch = append(batch, d)
	}
	// Each poll's messages are re-enqueued, then marked, before the next poll.
	polled := func(bool) error {
		if len(batch) == 0 {
			return nil
		}
		if o.DryRun {
			for i := range batch {
				batch[i].record = nil
			}
			done, batch = append(done, batch...), batch[:0]
			return nil
		}
		// A replayed message's retry window starts as it is re-enqueued, not when the replay
		// began: reading the DLQ again may take a while.
		now := time.Now()
		nowText := schemas.FormatTimestamp(now)
		out := make([]*kgo.Record, 0, len(batch))
		marks := make([]*kgo.Record, 0, len(batch))
		mark := func(key string, d DeadLetter, supersededBy string) {
			v := schemas.ReplayMark{ReplayedAt: nowText, DestinationID: d.DestinationID, MessageID: d.MessageID, URL: schemas.RedactURL(o.URL), SupersededBy: supersededBy}
			marks = append(marks, &kgo.Record{Topic: topics.Replayed, Key: []byte(key), Value: v.Record()})
		}
		for _, d := range batch {
			out = append(out, redelivery(d.record, topics.Deliveries, nowText, o.URL))
			mark(d.markerKey(), d, "")
			for _, older := range msgs.older[d.MessageKey()] {
				mark(older, d, d.markerKey())
			}
		}
		if err := producer.ProduceSync(ctx, out...).FirstErr(); err != nil {
			return fmt.Errorf("producing to %s: %w", topics.Deliveries, err)
		}
		if err := producer.ProduceSync(ctx, marks...).FirstErr(); err != nil {
			return fmt.Errorf("marking the dead letters replayed (%s): %w; they are re-enqueued, and a replay would send them again", topics.Replayed, err)
		}
		for i := range batch {
			batch[i].ReplayedAt = now
			batch[i].record = nil
		}
		done, batch = append(done, batch...), batch[:0]
		return nil
	}
	err = readDLQ(ctx, kafka, logger, topics.DLQ, apply, polled)
	if o.DryRun {
		slices.SortFunc(done, func(a, b DeadLetter) int {
			return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
		})
	}
	return done, err
}

// readRegulations reads the regulations of topics to their end.
func readRegulations(ctx context.Context, kafka KafkaSettings, logger zerolog.Logger, topics ReplayTopics) (*Regulations, error) {
	regs, err := NewRegulations(RegulationsConfig{Kafka: kafka, SuppressionsTopic: topics.Suppressions,
		StatusTopic: topics.DeletionsStatus, Once: true, Logger: logger})
	if err == nil {
		err = regs.Run(ctx)
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("replay: reading the regulations (tributary-init creates their topics): %w", err)
	}
	return regs, nil
}

// messages are the DLQ's messages, as readMessages found them.
type messages struct {
	// newest is each message's newest dead letter (headers only), by MessageKey.
	newest map[string]DeadLetter
	// older lists, by MessageKey, the marker keys of the message's older dead letters that are
	// not marked replayed: a replay marks them superseded.
	older map[string][]string
}

// readMessages reads the DLQ's headers and returns its messages of f's destination and message
// ids (f's other fields apply to each message's newest dead letter: see selected).
func readMessages(ctx context.Context, kafka KafkaSettings, logger zerolog.Logger, topic string, f ReplayFilter, replayed map[string]time.Time) (messages, error) {
	m := messages{newest: map[string]DeadLetter{}, older: map[string][]string{}}
	ids := f.ids()
	err := readDLQ(ctx, kafka, logger, topic, func(r *kgo.Record) {
		d := DeadLetterOf(r)
		if (f.DestinationID != "" && d.DestinationID != f.DestinationID) || (ids != nil && !ids[d.MessageID]) {
			return
		}
		d.ReplayedAt = replayed[d.markerKey()]
		k := d.MessageKey()
		cur, ok := m.newest[k]
		if ok && !d.Supersedes(cur) {
			cur, d = d, cur // d is the older one
		}
		if ok && cur.ReplayedAt.IsZero() {
			m.older[k] = append(m.older[k], cur.markerKey())
		}
		m.newest[k] = d
	}, nil)
	return m, err
}

// selected returns the messages whose newest dead letter passes f, ordered by partition and
// offset.
func (m messages) selected(f ReplayFilter) []DeadLetter {
	matches := f.matcher()
	var out []DeadLetter
	for _, d := range m.newest {
		if matches(d) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b DeadLetter) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	return out
}

// redelivery is a dead letter as a new webhooks.deliveries record; url, when set, is its
// HeaderURL.
func redelivery(r *kgo.Record, topic, now, url string) *kgo.Record {
	rec := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		switch h.Key {
		case schemas.HeaderAttempt, schemas.HeaderFirstAttemptAt, schemas.HeaderDueAt,
			schemas.HeaderReason, schemas.HeaderLastStatus, schemas.HeaderLastError, schemas.HeaderDeferrals,
			schemas.HeaderURL:
		default:
			rec.Headers = append(rec.Headers, h)
		}
	}
	rec.Headers = append(rec.Headers,
		kgo.RecordHeader{Key: schemas.HeaderAttempt, Value: []byte("1")},
		kgo.RecordHeader{Key: schemas.HeaderFirstAttemptAt, Value: []byte(now)})
	if url != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: schemas.HeaderURL, Value: []byte(url)})
	}
	return rec
}

// DeadLetterOf reads one webhooks.dlq record's headers (not its body, which it does not keep):
// for a view of the DLQ that follows the topic (the console's).
func DeadLetterOf(r *kgo.Record) DeadLetter {
	d := deadLetter(r)
	d.record = nil
	return d
}

// MarkerKey is the key of a dead letter's replay mark in TopicDLQReplayed: "partition:offset".
func (d DeadLetter) MarkerKey() string { return d.markerKey() }

func deadLetter(r *kgo.Record) DeadLetter {
	d := DeadLetter{Partition: r.Partition, Offset: r.Offset, At: r.Timestamp, record: r}
	for _, h := range r.Headers {
		switch h.Key {
		case schemas.HeaderDestinationID:
			d.DestinationID = string(h.Value)
		case schemas.HeaderMessageID:
			d.MessageID = string(h.Value)
		case schemas.HeaderReason:
			d.Reason = string(h.Value)
		case schemas.HeaderLastStatus:
			d.LastStatus = string(h.Value)
		case schemas.HeaderLastError:
			d.LastError = string(h.Value)
		case schemas.HeaderURL:
			d.URL = schemas.RedactURL(string(h.Value))
		case schemas.HeaderFirstAttemptAt:
			if t, err := schemas.ParseTimestamp(string(h.Value)); err == nil {
				d.FirstAttemptAt = t
			}
		case schemas.HeaderAttempt:
			if n, err := strconv.Atoi(string(h.Value)); err == nil && n > 0 {
				d.Attempts = n
			}
		}
	}
	return d
}

// readMarkers returns when each replayed dead letter ("partition:offset") was last replayed.
func readMarkers(ctx context.Context, kafka KafkaSettings, logger zerolog.Logger, topic string) (map[string]time.Time, error) {
	marks := map[string]time.Time{}
	reader, err := NewTopicReader(TopicReaderConfig{
		Kafka: kafka, Topic: topic, NoWait: true, ReadCommitted: true, Logger: logger,
		Apply: func(r *kgo.Record) {
			if m, err := schemas.DecodeReplayMark(r.Value); err == nil {
				if at, err := schemas.ParseTimestamp(m.ReplayedAt); err == nil && at.After(marks[string(r.Key)]) {
					marks[string(r.Key)] = at
				}
			}
		},
	})
	if err == nil {
		err = reader.Run(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s (tributary-init creates it): %w", topic, err)
	}
	return marks, ctx.Err()
}

// readDLQ reads the DLQ to the end offsets it finds (partitions whose dead letters all
// expired count as read), calling apply per record and polled after each poll.
func readDLQ(ctx context.Context, kafka KafkaSettings, logger zerolog.Logger, topic string, apply func(*kgo.Record), polled func(bool) error) error {
	reader, err := NewTopicReader(TopicReaderConfig{
		Kafka: kafka, Topic: topic, NoWait: true, ReadCommitted: true, Logger: logger,
		Apply:  apply,
		Polled: polled,
	})
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if err := reader.Run(ctx); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	select {
	case <-reader.Ready():
		return nil
	default: // stopped before the end
		return ctx.Err()
	}
}

// matcher returns f's test of a dead letter.
func (f ReplayFilter) matcher() func(DeadLetter) bool {
	ids := f.ids()
	return func(d DeadLetter) bool { return f.matches(d, ids) }
}

// ids returns the set of f.MessageIDs; nil: no such filter.
func (f ReplayFilter) ids() map[string]bool {
	if len(f.MessageIDs) == 0 {
		return nil
	}
	ids := make(map[string]bool, len(f.MessageIDs))
	for _, id := range f.MessageIDs {
		ids[id] = true
	}
	return ids
}

// matches reports whether d passes f; ids is the set of f.MessageIDs (nil: no such filter).
func (f ReplayFilter) matches(d DeadLetter, ids map[string]bool) bool {
	switch {
	case f.DestinationID != "" && d.DestinationID != f.DestinationID:
		return false
	case ids != nil && !ids[d.MessageID]:
		return false
	case !f.Since.IsZero() && d.At.Before(f.Since):
		return false
	case !f.Until.IsZero() && d.At.After(f.Until):
		return false
	case !f.Again && !d.ReplayedAt.IsZero():
		return false
	}
	return true
}
