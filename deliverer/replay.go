package deliverer

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
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
// (without a consumer group, so it can run beside the deliverer and be repeated), and returns
// how many records it re-enqueued once Kafka acknowledged all of them. The DLQ itself is not
// changed; the console remembers what was replayed.
func Replay(ctx context.Context, kafka platform.KafkaSettings, logger zerolog.Logger, dlqTopic, deliveriesTopic string, f ReplayFilter) (int, error) {
	cl, err := platform.NewKafkaClient(kafka, logger,
		kgo.ConsumeTopics(dlqTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return 0, fmt.Errorf("replay: %w", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, dlqTopic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("replay: listing %s offsets: %w", dlqTopic, err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	now := schemas.FormatTimestamp(time.Now())
	n := 0
	var produceErr error
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return n, err
		}
		fs.EachError(func(_ string, p int32, err error) {
			logger.Warn().Err(err).Int32("partition", p).Msg("replay: fetching the DLQ")
		})
		var out []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			if !f.matches(r) {
				return
			}
			rec := &kgo.Record{Topic: deliveriesTopic, Key: r.Key, Value: r.Value}
			for _, h := range r.Headers {
				switch h.Key {
				case schemas.HeaderAttempt, schemas.HeaderFirstAttemptAt, schemas.HeaderDueAt,
					schemas.HeaderReason, schemas.HeaderLastStatus, schemas.HeaderLastError:
				default:
					rec.Headers = append(rec.Headers, h)
				}
			}
			rec.Headers = append(rec.Headers,
				kgo.RecordHeader{Key: schemas.HeaderAttempt, Value: []byte("1")},
				kgo.RecordHeader{Key: schemas.HeaderFirstAttemptAt, Value: []byte(now)})
			out = append(out, rec)
		})
		if len(out) > 0 {
			if produceErr = cl.ProduceSync(ctx, out...).FirstErr(); produceErr != nil {
				return n, fmt.Errorf("replay: producing to %s: %w", deliveriesTopic, produceErr)
			}
			n += len(out)
		}
	}
	return n, nil
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
