package console

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The source debugger's reader: tracking.events (accepted) and tracking.rejected (with the
// reason), read as they are written into views.Events (per source the last RecentEvents of
// each, and the watchers of its Server-Sent Events streams). At start the console reads the last EventsBackfill records of each
// partition again, to refill the recent events.

// sourceOf is the record's source id (HeaderSourceID), shared through in; "" for none.
func sourceOf(r *kgo.Record, in interner) string {
	for _, h := range r.Headers {
		if h.Key == schemas.HeaderSourceID {
			return in.Get(h.Value)
		}
	}
	return ""
}

// runEvents keeps the debugger's view of tracking.events and tracking.rejected.
func (s *Service) runEvents(ctx context.Context) error {
	if !waitReady(ctx, s.forget.ready) {
		return nil // the rules first: nothing of a deleted user is read back, even for a moment
	}
	var batch []views.Record
	var sealed opener     // the batch's sealed records, opened: Add copies what it keeps
	sources := interner{} // the source ids, read in every record
	return s.runView(ctx, "events", s.ready.events, platform.TopicReaderConfig{
		Topics: []string{s.cfg.EventsTopic, s.cfg.RejectedTopic}, Start: platform.StartLast(s.cfg.EventsBackfill),
		Apply: func(r *kgo.Record) {
			src := sourceOf(r, sources)
			if src == "" {
				return // a rejected message of no known source
			}
			rejected := r.Topic == s.cfg.RejectedTopic
			if !rejected && !s.checksViolations(src) {
				// Kept sealed, opened only when shown (views.Events).
				key, ok := s.sealedWith(r)
				if !ok {
					return // sealed with a shredded key: its user was deleted
				}
				batch = append(batch, views.Record{Source: src, R: r, SealedWith: key})
				return
			}
			if r = sealed.open(s, r); r == nil {
				return // sealed with a shredded key: its user was deleted
			}
			batch = append(batch, views.Record{Source: src, R: r, Rejected: rejected})
			if !rejected {
				s.checkViolations(src, r) // docs/console.md#violations
			}
		},
	}, func() {
		if len(batch) == 0 {
			return
		}
		dropped := s.events.Add(batch, func(p views.Record) bool { return s.forgets(p.R, p.Rejected) })
		if len(dropped) > 0 {
			s.metrics.forgotten.WithLabelValues("events").Add(float64(len(dropped)))
			s.forget.forgetMessages(dropped)
			s.dropAttempts(dropped) // of a message read late, after the purge
		}
		clear(batch)
		batch = batch[:0]
		sealed.reset()
	})
}

// forgets reports whether the console forgets the event r (docs/console.md#what-the-console-forgets):
// it is a deleted or suppressed user's (event.userID), and the user's rule hides it.
func (s *Service) forgets(r *kgo.Record, rejected bool) bool {
	if s.forget.ruled.Load() == 0 {
		return false
	}
	user := r.Key
	if rejected {
		if id, ok := views.MessageUser(r.Value); ok {
			user = id
		}
	}
	return s.forget.hides(string(user), r.Timestamp)
}
