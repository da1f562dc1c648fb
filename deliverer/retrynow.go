package deliverer

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Retry now (docs/delivery.md#retry-now): the console copies a message waiting in a retry tier
// to webhooks.deliveries with the header retry-now, naming the tier record
// (schemas.RetryNowKey). The deliverer sends that copy once, at once, and records the outcome in
// webhooks.retried-now (schemas.RetryNowMark); the tier record, when it comes due, is finished
// unsent if the copy delivered the message, and attempted as before otherwise.
//
// The rule, exactly:
//
//   - The copy is sent only if its "sending" mark is acknowledged by Kafka at least
//     retryNowGuard before the tier record comes due (its due-at); otherwise it is skipped
//     (mark "skipped") and the tier attempts the message as scheduled. A tier record is never
//     taken up before its due-at, and every deliverer follows the marks within that guard, so
//     the tier record's owner sees the "sending" mark before the record is due.
//   - A tier record whose mark is "delivered" is finished unsent; one whose mark is "sending"
//     waits (in memory, uncommitted) for the outcome, at most DELIVERY_TIMEOUT + 2 ×
//     retryNowGuard after the mark was written (a deliverer that stopped mid-POST); with
//     "failed", "skipped" or no mark it is dispatched as any tier record.
//   - One copy at a time per tier record, and none once one delivered it: a second copy (the
//     console's button pressed twice, or the copy read again after a restart) finds the first's
//     mark ("sending" or "delivered") and is skipped. After a failed one, retry now may be asked
//     again.
//   - The copy is never handed to a tier nor the DLQ: a failed retry-now only logs its attempt
//     (with the tier record's attempt number); the message keeps its schedule.
//
// The marks live in Kafka, so the promise holds across restarts: every deliverer reads
// webhooks.retried-now whole before it dispatches anything. In memory, a mark is kept until its
// tier record's window is over (first-attempt-at + RETRY_WINDOW + the longest tier): a tier
// record read later than that is past its window, and dead-lettered, not sent.

// retryNowGuard is how long before its tier record comes due a retry-now copy must have its
// "sending" mark on record to be sent.
const retryNowGuard = time.Second

// retryMark is one tier record's retry-now state.
type retryMark struct {
	state string    // schemas.RetryNow*
	at    time.Time // when it was written
	until time.Time // forgotten after
}

// retryMarks are the retry-now marks: read from webhooks.retried-now, and claimed locally
// before they are written. Safe for concurrent use.
type retryMarks struct {
	mu      sync.Mutex
	m       map[string]retryMark
	changed chan struct{} // closed and replaced at each change
	pruned  time.Time
	keep    time.Duration // how long after it is written a mark is kept, at least
}

func newRetryMarks(keep time.Duration) *retryMarks {
	return &retryMarks{m: map[string]retryMark{}, changed: make(chan struct{}), keep: keep}
}

// set records key's state, written at at (now: the clock, for pruning).
func (rm *retryMarks) set(key, state string, at, now time.Time) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	rm.m[key] = retryMark{state: state, at: at, until: at.Add(rm.keep)}
	close(rm.changed)
	rm.changed = make(chan struct{})
	if now.Sub(rm.pruned) > time.Minute {
		rm.pruned = now
		for k, v := range rm.m {
			if now.After(v.until) {
				delete(rm.m, k)
			}
		}
	}
}

// get returns key's mark, and a channel closed at the next change of any mark.
func (rm *retryMarks) get(key string) (retryMark, bool, <-chan struct{}) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	m, ok := rm.m[key]
	return m, ok, rm.changed
}

// claim records key as "sending" unless a retry-now of it is in progress or delivered it, and
// says whether it did: one copy at a time per tier record, none once one delivered it.
func (rm *retryMarks) claim(key string, now time.Time) bool {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if m, ok := rm.m[key]; ok && (m.state == schemas.RetryNowSending || m.state == schemas.RetryNowDelivered) {
		return false
	}
	rm.m[key] = retryMark{state: schemas.RetryNowSending, at: now, until: now.Add(rm.keep)}
	return true
}

// runMarks reads webhooks.retried-now into s.marks, from its start, and follows it until ctx is
// done; ready is closed once it has read what was there when it started. It creates the topic
// when it is missing (as the keyring does tributary.keys).
func (s *Service) runMarks(ctx context.Context, ready chan<- struct{}) error {
	spec := platform.RetriedNowTopic()
	spec.Name = s.cfg.RetriedNowTopic
	if err := platform.EnsureTopics(ctx, kadm.NewClient(s.cl), s.deps.Kafka.ReplicationFactor, []platform.TopicSpec{spec}); err != nil && ctx.Err() == nil {
		// Without the right to create topics (tributary-init made it), reading still works.
		s.logger.Warn().Err(err).Str("topic", s.cfg.RetriedNowTopic).Msg("ensuring the retry-now topic")
	}
	once := sync.Once{}
	r, err := platform.NewTopicReader(platform.TopicReaderConfig{
		Kafka: s.deps.Kafka, Topic: s.cfg.RetriedNowTopic, ReadCommitted: true, Follow: true, Retry: true,
		Opts:   append([]kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)}, s.deps.KafkaOpts...),
		Logger: s.logger,
		Apply: func(r *kgo.Record) {
			m, err := schemas.DecodeRetryNowMark(r.Value)
			if err != nil || m.State == "" {
				return
			}
			at, err := schemas.ParseTimestamp(m.At)
			if err != nil {
				at = r.Timestamp
			}
			s.marks.set(string(r.Key), m.State, at, s.now())
		},
		Polled: func(caughtUp bool) error {
			if caughtUp {
				once.Do(func() { close(ready) })
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// tierRecordRetried decides a tier record d against its retry-now mark, and says whether it
// took d over: finished unsent (the retry-now delivered it), or waiting for the outcome of a
// retry-now in progress (then dispatched again). It is called holding the global token, which
// it releases when it takes d over.
func (s *Service) tierRecordRetried(ctx context.Context, d *delivery, p *pending) bool {
	key := schemas.RetryNowKey(d.r.Topic, d.r.Partition, d.r.Offset)
	m, ok, changed := s.marks.get(key)
	if !ok {
		return false
	}
	switch m.state {
	case schemas.RetryNowDelivered:
		s.metrics.retryNow.WithLabelValues(d.destID, "tier_skipped").Inc()
		s.logger.Debug().Str("destination", d.destID).Str("message_id", d.messageID).Str("topic", d.r.Topic).
			Msg("tier record finished unsent: the retry-now delivered it")
		s.track.finish(p)
		<-s.sem
		return true
	case schemas.RetryNowSending:
		stale := m.at.Add(s.cfg.Timeout + 2*retryNowGuard)
		if !s.now().Before(stale) {
			return false // its sender stopped mid-POST: at least once, the tier attempts it
		}
		<-s.sem
		s.spawn(func() {
			t := time.NewTimer(stale.Sub(s.now()))
			defer t.Stop()
			select {
			case <-changed:
			case <-t.C:
			case <-ctx.Done():
				return // not finished: read again after a restart
			}
			s.dispatch(ctx, d.r, p)
		})
		return true
	}
	return false
}

// dispatchRetryNow sends a retry-now copy (header retry-now) once, unless its tier record comes
// due within retryNowGuard, was retried now before, or its destination is gone; it is never
// handed to a tier nor the DLQ. It holds the global token, and releases it when it ends.
func (s *Service) dispatchRetryNow(ctx context.Context, d delivery, p *pending, dest *schemas.Destination, ok bool) {
	key := d.retryNow
	now := s.now()
	skip := func(why string, write bool) {
		s.metrics.retryNow.WithLabelValues(d.destID, "skipped").Inc()
		s.logger.Info().Str("destination", d.destID).Str("message_id", d.messageID).Str("tier_record", key).Str("reason", why).
			Msg("retry-now not sent: the message keeps its schedule")
		if write {
			now := s.now()
			s.marks.set(key, schemas.RetryNowSkipped, now, now)
			s.handOff(s.markRecord(key, d, schemas.RetryNowSkipped, why), p)
		} else {
			s.track.finish(p)
		}
	}
	why := ""
	switch {
	case d.dueAt.IsZero():
		why = "the tier record's due time is unknown (no due-at header)"
	case !now.Add(retryNowGuard).Before(d.dueAt):
		why = "its tier record is due within " + retryNowGuard.String() + " (or parked, or being attempted): the tier attempts it"
	case !ok || !dest.IsEnabled():
		why = "destination deleted or disabled"
	case now.After(d.firstAttemptAt.Add(s.cfg.RetryWindow)):
		why = "its retry window is over"
	case d.url != "" && schemas.CheckWebhookURL(d.url) != nil:
		why = "header " + schemas.HeaderURL + ": " + schemas.CheckWebhookURL(d.url).Error()
	case schemas.CheckMessageID(d.messageID) != nil:
		why = "messageId " + schemas.CheckMessageID(d.messageID).Error()
	}
	if why != "" {
		skip(why, false)
		<-s.sem
		return
	}
	if !s.marks.claim(key, now) {
		skip("a retry-now of it is in progress or delivered it", false)
		<-s.sem
		return
	}
	if d.url != "" {
		dest = withURL(dest, d.url)
	}
	s.spawn(func() {
		defer func() { <-s.sem }()
		if err := s.cl.ProduceSync(s.grace, s.markRecord(key, d, schemas.RetryNowSending, "")).FirstErr(); err != nil {
			s.logger.Warn().Err(err).Str("destination", d.destID).Str("message_id", d.messageID).Msg("writing the retry-now mark; not sent, the message keeps its schedule")
			now := s.now()
			s.marks.set(key, schemas.RetryNowSkipped, now, now)
			if s.grace.Err() == nil {
				s.track.finish(p)
			}
			return
		}
		if !s.now().Add(retryNowGuard).Before(d.dueAt) {
			skip("its tier record comes due within "+retryNowGuard.String()+": the tier attempts it", true)
			return
		}
		if lim := s.limiter(dest); lim != nil {
			if err := lim.Wait(ctx); err != nil {
				skip("stopping", true)
				return
			}
		}
		// A user deleted or suppressed since it was read gets nothing.
		if class := s.forgotten(&d); class != "" || (d.key != nil && !d.key.Live()) {
			skip("its user was deleted or suppressed", true)
			return
		}
		// Like a test delivery, a retry-now is sent whatever its hosts' limits, queues, pauses
		// and breakers, and does not feed them: the operator asks for it, typically once the
		// endpoint is back while its breaker still waits.
		results := post(s.grace, s.client, s.cfg.Timeout, s.request(&d, dest, dest.Settings.Webhooks), s.now())
		now := s.now()
		class, _, last := verdict(results)
		var out outcome
		if class != Success { // the message keeps its tier's schedule
			out.nextAttemptAt = d.dueAt
		}
		for i := range results {
			s.logAttempt(&d, &results[i], s.hosts.limit(unitOf(dest, results[i].URL), now), out, now)
		}
		state, reason := schemas.RetryNowDelivered, ""
		if class != Success {
			state = schemas.RetryNowFailed
			if last != nil {
				reason = describe(last)
			}
		} else {
			s.metrics.forDestination(d.destID).delivered.Inc()
			s.metrics.endToEnd.Observe(now.Sub(d.firstAttemptAt).Seconds())
		}
		s.metrics.retryNow.WithLabelValues(d.destID, state).Inc()
		s.marks.set(key, state, now, now)
		s.handOff(s.markRecord(key, d, state, reason), p)
	})
}

// markRecord is the webhooks.retried-now record of tier record key.
func (s *Service) markRecord(key string, d delivery, state, reason string) *kgo.Record {
	m := schemas.RetryNowMark{State: state, DestinationID: d.destID, MessageID: d.messageID, At: schemas.FormatTimestamp(s.now()), Reason: reason}
	if !d.dueAt.IsZero() {
		m.DueAt = schemas.FormatTimestamp(d.dueAt)
	}
	return &kgo.Record{Topic: s.cfg.RetriedNowTopic, Key: []byte(key), Value: m.Record()}
}
