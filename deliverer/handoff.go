package deliverer

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// Handing records on to a retry tier or the DLQ (docs/delivery.md#retry-tiers).

// tierFor picks the tier for a wanted delay: the shortest tier at least that long, else the
// longest.
func (s *Service) tierFor(delay time.Duration) int {
	best := -1
	for i, d := range s.tierDelays {
		if d >= delay && (best < 0 || d < s.tierDelays[best]) {
			best = i
		}
	}
	if best >= 0 {
		return best
	}
	longest := 0
	for i, d := range s.tierDelays {
		if d > s.tierDelays[longest] {
			longest = i
		}
	}
	return longest
}

// toTier hands the record to a retry tier: due after the tier's delay, with the attempt number
// it will make there.
func (s *Service) toTier(ctx context.Context, d delivery, p *pending, attempt, tier int, lastError string, lastStatus int) {
	due := s.now().Add(s.tierDelays[tier])
	rec := s.derived(d.r, s.tierTopics[tier], map[string]string{
		schemas.HeaderAttempt:        strconv.Itoa(attempt),
		schemas.HeaderFirstAttemptAt: schemas.FormatTimestamp(d.firstAttemptAt),
		schemas.HeaderDueAt:          schemas.FormatTimestamp(due),
		schemas.HeaderLastError:      lastError,
		schemas.HeaderLastStatus:     strconv.Itoa(lastStatus),
	})
	s.metrics.retried.WithLabelValues(d.destID, s.tierTopics[tier]).Inc()
	s.handOff(ctx, rec, p)
}

// toDLQ hands the record to the dead-letter queue with its reason.
func (s *Service) toDLQ(ctx context.Context, d delivery, p *pending, reason string, lastStatus int, lastError string) {
	rec := s.derived(d.r, s.cfg.DLQTopic, map[string]string{
		schemas.HeaderReason:         reason,
		schemas.HeaderLastStatus:     strconv.Itoa(lastStatus),
		schemas.HeaderLastError:      lastError,
		schemas.HeaderAttempt:        strconv.Itoa(d.attempt),
		schemas.HeaderFirstAttemptAt: schemas.FormatTimestamp(d.firstAttemptAt),
	})
	s.metrics.dlq.WithLabelValues(d.destID, reason).Inc()
	s.logger.Warn().Str("destination", d.destID).Str("message_id", d.messageID).Str("reason", reason).
		Int("last_status", lastStatus).Str("last_error", lastError).Msg("delivery dead-lettered")
	s.handOff(ctx, rec, p)
}

// derived copies r to topic with headers replaced or added.
func (s *Service) derived(r *kgo.Record, topic string, set map[string]string) *kgo.Record {
	out := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		if _, ok := set[h.Key]; !ok && h.Key != schemas.HeaderDueAt {
			out.Headers = append(out.Headers, h)
		}
	}
	for _, k := range []string{schemas.HeaderAttempt, schemas.HeaderFirstAttemptAt, schemas.HeaderDueAt, schemas.HeaderReason, schemas.HeaderLastStatus, schemas.HeaderLastError} {
		if v, ok := set[k]; ok {
			out.Headers = append(out.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
	}
	return out
}

// handOff produces rec and finishes p once Kafka acknowledged it, retrying until then. If the
// service stops first, p stays unfinished and the record is delivered again after a restart.
func (s *Service) handOff(ctx context.Context, rec *kgo.Record, p *pending) {
	s.wg.Add(1)
	var try func()
	try = func() {
		s.cl.Produce(context.WithoutCancel(ctx), rec, func(_ *kgo.Record, err error) {
			if err == nil {
				s.track.finish(p)
				s.wg.Done()
				return
			}
			s.logger.Warn().Err(err).Str("topic", rec.Topic).Msg("handing a delivery on; retrying")
			if ctx.Err() != nil {
				s.wg.Done()
				return
			}
			time.AfterFunc(time.Second, try)
		})
	}
	try()
}
