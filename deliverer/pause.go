package deliverer

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// Holding retry-tier records until they are due (docs/delivery.md#retry-tiers).
//
// A tier partition whose next record is not due yet is paused (PauseFetchPartitions), and the
// records of it already read — at most one poll's worth — are held in memory; a timer
// dispatches them when the first is due, then holds the rest again or resumes the partition.
// The partition is not rewound: franz-go's SetOffsets stops the consumer's fetch session, which
// throws away every partition's fetches in flight and buffered, so rewinding the tiers many
// times a second (any endpoint being retried) delayed every other destination's records by
// hundreds of milliseconds. Held records are not tracked yet, so their offsets are not
// committed: a restart or a rebalance reads them again.

// held is a paused tier partition's records read and not due yet, in offset order.
type held struct {
	recs    []*kgo.Record
	gen     uint64 // the assignment they were fetched under (tracker)
	timer   *time.Timer
	dropped bool // the partition was revoked: dispatch no more of recs
}

// dispatchDue dispatches recs of tier partition k, fetched under generation gen, while they are
// due and holds the rest. It is called by the poll loop (from nil), or by the timer of from, a
// hold of k whose goroutine s.wg counts; that stops when the hold is dropped.
func (s *Service) dispatchDue(ctx context.Context, k partKey, recs []*kgo.Record, gen uint64, from *held) {
	for i, r := range recs {
		if ctx.Err() != nil || from.isDropped(&s.mu) {
			return
		}
		due := headerTime(r, schemas.HeaderDueAt)
		if !due.IsZero() {
			// The header keeps the due time to the millisecond, truncated: the record is due at
			// the end of that millisecond, not before (else a record due when its endpoint's
			// Retry-After pause ends could find the pause not quite over).
			due = due.Add(time.Millisecond)
		}
		if now := s.now(); due.After(now) {
			s.hold(ctx, k, recs[i:], gen, due)
			return
		} else if !due.IsZero() {
			s.metrics.lateness.WithLabelValues(r.Topic).Observe(now.Sub(due).Seconds())
		}
		s.dispatch(ctx, r, s.track.add(r, gen))
	}
}

// hold pauses partition k and keeps recs (fetched under generation gen, not due before due)
// until then — unless that assignment of k has ended: then they are left to its next owner
// (onLost ends the generation before it drops the holds, so a hold made meanwhile is dropped).
func (s *Service) hold(ctx context.Context, k partKey, recs []*kgo.Record, gen uint64, due time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.track.genOf(k) != gen {
		return
	}
	s.cl.PauseFetchPartitions(map[string][]int32{k.topic: {k.part}})
	h := &held{recs: recs, gen: gen}
	s.wg.Add(1) // the timer's run; Done by it, or by whoever stops the timer first
	h.timer = time.AfterFunc(time.Until(due), func() {
		defer s.wg.Done()
		s.dispatchDue(ctx, k, h.recs, h.gen, h)
		s.mu.Lock()
		resume := s.held[k] == h // neither dropped nor held again
		if resume {
			delete(s.held, k)
		}
		s.mu.Unlock()
		if resume && ctx.Err() == nil {
			s.cl.ResumeFetchPartitions(map[string][]int32{k.topic: {k.part}})
		}
	})
	s.held[k] = h
}

// dropHeld forgets the held records of the partitions given (nil: all) and stops their timers;
// the partitions are read again from their committed offsets by whoever owns them next.
func (s *Service) dropHeld(parts map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, h := range s.held {
		if parts != nil && !contains(parts[k.topic], k.part) {
			continue
		}
		h.dropped = true
		if h.timer.Stop() {
			s.wg.Done() // its run never comes
		}
		delete(s.held, k)
	}
}

// isDropped says whether h (nil: none) was dropped.
func (h *held) isDropped(mu *sync.Mutex) bool {
	if h == nil {
		return false
	}
	mu.Lock()
	defer mu.Unlock()
	return h.dropped
}

func headerTime(r *kgo.Record, key string) time.Time {
	for _, h := range r.Headers {
		if h.Key == key {
			t, _ := schemas.ParseTimestamp(string(h.Value))
			return t
		}
	}
	return time.Time{}
}
