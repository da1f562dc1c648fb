package deliverer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tributary-cdp/tributary/platform"
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
func (s *Service) toTier(d delivery, p *pending, attempt, tier int, lastError string, lastStatus int) {
	if s.dropIfForgotten(&d, p) {
		return // its user was deleted or suppressed meanwhile: it is not kept for a retry
	}
	due := s.now().Add(s.tierDelays[tier])
	set := map[string]string{
		schemas.HeaderAttempt:        strconv.Itoa(attempt),
		schemas.HeaderFirstAttemptAt: schemas.FormatTimestamp(d.firstAttemptAt),
		schemas.HeaderDueAt:          schemas.FormatTimestamp(due),
		schemas.HeaderLastError:      lastError,
		schemas.HeaderLastStatus:     strconv.Itoa(lastStatus),
	}
	if d.deferrals > 0 {
		set[schemas.HeaderDeferrals] = strconv.Itoa(d.deferrals)
	}
	rec := s.derived(d.r, s.tierTopics[tier], set)
	if tr := s.deps.Tracer; tr.Enabled() { // docs/operations.md#tracing
		span, _ := tr.Start(platform.TraceFromRecord(d.r), "retry tier hand-off", platform.SpanProducer)
		if span.Recording() {
			span.SetAttributes(attribute.String("messaging.destination.name", s.tierTopics[tier]), attribute.String("tributary.destination.id", d.destID),
				attribute.Int("tributary.attempt", attempt))
		}
		span.End()
	}
	s.orderTiered(&d, p, tier)
	s.metrics.retried.WithLabelValues(d.destID, s.tierTopics[tier]).Inc()
	s.handOff(rec, p)
}

// deferTo hands a record on unsent (its endpoint at its limit with a full queue, paused, or
// behind an open breaker) to the tier that covers wait and the record's deferrals: the first
// deferral waits for the shortest tier, each next one for the next longer tier, so a record of
// an endpoint that cannot keep up is rewritten a few times (at most once per tier), not every
// few seconds. Its attempt number is unchanged, and RETRY_WINDOW bounds it: a deferral that
// would come due after the window ends goes to the longest tier that comes due before, or, if
// none does, to the DLQ at once (it could only be dead-lettered when due).
func (s *Service) deferTo(d delivery, p *pending, reason string, wait time.Duration) {
	d.deferrals++
	tier := s.tierFor(max(wait, deferDelay(s.tierDelays, d.deferrals)))
	now, deadline := s.now(), d.firstAttemptAt.Add(s.cfg.RetryWindow)
	if now.Add(s.tierDelays[tier]).After(deadline) {
		fit := -1
		for i, delay := range s.tierDelays {
			if !now.Add(delay).After(deadline) && (fit < 0 || delay > s.tierDelays[fit]) {
				fit = i
			}
		}
		if fit < 0 {
			s.toDLQ(d, p, "retry_window_expired", 0, reason+": no attempt could start within RETRY_WINDOW")
			return
		}
		tier = fit
	}
	s.metrics.deferred.WithLabelValues(d.destID, reason).Inc()
	s.toTier(d, p, d.attempt, tier, reason, 0)
}

// deferDelay is the delay of the n-th shortest distinct tier (n from 1), or of the longest.
func deferDelay(tiers []time.Duration, n int) time.Duration {
	delays := slices.Clone(tiers)
	slices.Sort(delays)
	delays = slices.Compact(delays)
	return delays[max(1, min(n, len(delays)))-1]
}

// toDLQ hands the record to the dead-letter queue with its reason.
func (s *Service) toDLQ(d delivery, p *pending, reason string, lastStatus int, lastError string) {
	if s.dropIfForgotten(&d, p) {
		return // its user was deleted or suppressed: it is not kept for a replay
	}
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
	s.handOff(rec, p)
}

// derived copies r to topic with headers replaced or added.
func (s *Service) derived(r *kgo.Record, topic string, set map[string]string) *kgo.Record {
	out := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		if _, ok := set[h.Key]; !ok && h.Key != schemas.HeaderDueAt {
			out.Headers = append(out.Headers, h)
		}
	}
	for _, k := range []string{schemas.HeaderAttempt, schemas.HeaderFirstAttemptAt, schemas.HeaderDueAt, schemas.HeaderReason, schemas.HeaderLastStatus, schemas.HeaderLastError, schemas.HeaderDeferrals} {
		if v, ok := set[k]; ok {
			out.Headers = append(out.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
	}
	return out
}

// handOff produces rec and finishes p once Kafka acknowledged it. The common case costs one
// asynchronous Produce and no goroutine: its callback finishes p. Only when that produce fails
// (Kafka unreachable for handOffTimeout, or an error) does a goroutine retry it with
// platform.RetryUntil until Kafka acknowledges it. Everything runs under s.grace: when the
// shutdown deadline passes (or the client is closed), p stays unfinished, so its offset is not
// committed and the record is delivered again after a restart.
//
// It must be called by the poll loop or by work s.wg counts (see spawn): it adds to s.wg.
func (s *Service) handOff(rec *kgo.Record, p *pending) {
	s.wg.Add(1)
	s.cl.Produce(s.grace, rec, func(_ *kgo.Record, err error) {
		switch {
		case err == nil:
			s.track.finish(p)
			s.wg.Done()
		case s.grace.Err() != nil || errors.Is(err, kgo.ErrClientClosed):
			s.wg.Done() // stopped: unfinished, delivered again after a restart
		default:
			// The callback runs on the client's goroutine: the retry gets its own, which takes
			// over this hand-off's count in s.wg.
			go func() {
				defer s.wg.Done()
				s.retryHandOff(rec, p, err)
			}()
		}
	})
}

// retryHandOff produces a copy of rec until Kafka acknowledges it, then finishes p; it gives up
// (p unfinished) at the shutdown deadline.
func (s *Service) retryHandOff(rec *kgo.Record, p *pending, first error) {
	what := "producing to " + rec.Topic
	s.logger.Warn().Err(first).Str("topic", rec.Topic).Msg(what + "; retrying")
	err := platform.RetryUntil(s.grace, s.logger, what, func(ctx context.Context) error {
		again := &kgo.Record{Topic: rec.Topic, Key: rec.Key, Value: rec.Value, Headers: rec.Headers}
		if err := s.cl.ProduceSync(ctx, again).FirstErr(); err != nil {
			return fmt.Errorf("producing to %s: %w", rec.Topic, err)
		}
		return nil
	})
	if err == nil {
		s.track.finish(p)
	}
}
