package deliverer

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// ReplayFilter selects dead letters to replay. Zero fields select everything.
type ReplayFilter struct {
	// DestinationID selects one destination's records.
	DestinationID string
	// Since and Until bound the time the record was dead-lettered (its Kafka timestamp).
	Since, Until time.Time
}

// Replay re-enqueues the dead letters of dlqTopic that match f into deliveriesTopic, each with a
// fresh retry window: attempt 1, first-attempt-at now, and no reason, last-status, last-error
// or due-at headers. It reads the DLQ from its start to the end offsets it finds when called
// (a platform.TopicReader without a consumer group, so it can run beside the deliverer and be
// repeated; partitions whose dead letters all expired count as read), and returns how many
// records it re-enqueued once Kafka acknowledged all of them. The DLQ itself is not changed;
// the console remembers what was replayed.
func Replay(ctx context.Context, kafka platform.KafkaSettings, logger zerolog.Logger, dlqTopic, deliveriesTopic string, f ReplayFilter) (int, error) {
	producer, err := platform.NewKafkaClient(kafka, logger, kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return 0, fmt.Errorf("replay: %w", err)
	}
	defer producer.Close()
	now := schemas.FormatTimestamp(time.Now())
	var (
		n   int
		out []*kgo.Record
	)
	reader, err := platform.NewTopicReader(platform.TopicReaderConfig{
		Kafka:  kafka,
		Topic:  dlqTopic,
		NoWait: true,
		Opts:   []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())},
		Logger: logger,
		Apply: func(r *kgo.Record) {
			if !f.matches(r) {
				return
			}
			rec := &kgo.Record{Topic: deliveriesTopic, Key: r.Key, Value: r.Value}
			for _, h := range r.Headers {
				switch h.Key {
				case schemas.HeaderAttempt, schemas.HeaderFirstAttemptAt, schemas.HeaderDueAt,
					schemas.HeaderReason, schemas.HeaderLastStatus, schemas.HeaderLastError, schemas.HeaderDeferrals:
				default:
					rec.Headers = append(rec.Headers, h)
				}
			}
			rec.Headers = append(rec.Headers,
				kgo.RecordHeader{Key: schemas.HeaderAttempt, Value: []byte("1")},
				kgo.RecordHeader{Key: schemas.HeaderFirstAttemptAt, Value: []byte(now)})
			out = append(out, rec)
		},
		// Each poll's matches are produced before the next poll.
		Polled: func(bool) error {
			if len(out) == 0 {
				return nil
			}
			if err := producer.ProduceSync(ctx, out...).FirstErr(); err != nil {
				return fmt.Errorf("producing to %s: %w", deliveriesTopic, err)
			}
			n += len(out)
			out = out[:0]
			return nil
		},
	})
	if err != nil {
		return 0, fmt.Errorf("replay: %w", err)
	}
	if err := reader.Run(ctx); err != nil {
		return n, fmt.Errorf("replay: %w", err)
	}
	select {
	case <-reader.Ready():
		return n, nil
	default: // stopped before the end
		return n, ctx.Err()
	}
}

func (f ReplayFilter) matches(r *kgo.Record) bool {
	if f.DestinationID != "" {
		dest := ""
		for _, h := range r.Headers {
			if h.Key == schemas.HeaderDestinationID {
				dest = string(h.Value)
			}
		}
		if dest != f.DestinationID {
			return false
		}
	}
	if !f.Since.IsZero() && r.Timestamp.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && r.Timestamp.After(f.Until) {
		return false
	}
	return true
}
