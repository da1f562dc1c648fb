package deliverer

import (
	"context"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// Parking: a retry-tier record whose endpoint is behind an open circuit breaker or paused by a
// Retry-After waits in memory, still uncommitted in its tier partition, until the endpoint may
// be tried again — instead of being written to another tier each time it comes due while the
// breaker stays open (docs/delivery.md#parked-records-wait-for-their-endpoint).
//
// The tier partition is not paused: the records behind a parked one are dispatched when they
// come due, so a healthy endpoint's retries in the same partition are not held back. Only the
// partition's commit waits for the parked record (offsets are committed up to the lowest
// unfinished record): a restart or a rebalance reads it again, and it is parked again. What that
// costs is bounded: a parked record is handed on to a tier as before (deferTo) once more than
// MaxPollRecords records of its partition were read after it, so at most one poll's worth of a
// partition is kept behind it, and one poll's worth is read again after a crash. Records of
// webhooks.deliveries are never parked (their partitions carry every destination's first
// attempts): the first refusal still defers them to a tier, once.

// parkTick is how often parked records are looked at: released when their endpoint may be
// tried, dead-lettered when their window ends, handed on when their partition moved on.
const parkTick = 100 * time.Millisecond

// parkedRec is one parked record.
type parkedRec struct {
	r        *kgo.Record
	p        *pending
	reason   string    // why it was refused: refusedBreaker or refusedPaused
	deadline time.Time // first-attempt-at + RETRY_WINDOW: dead-lettered then if still parked
	destID   string    // its destination
	exempt   bool      // a delete notice or a test: never dropped for a regulation (regulations.go)
}

// parking holds the parked records by the endpoint hosts (unitOf keys) they wait for.
type parking struct {
	byUnits map[string][]*parkedRec // key: the destination's units, joined by "\n"
	n       int
}

// park keeps d (refused for reason) in memory until one of its destination's hosts may be tried,
// and says whether it did. Only records of a retry tier that is tracked are parked, refused by
// a breaker or a pause, within their window and with their partition not too far ahead.
func (s *Service) park(d delivery, p *pending, dest *schemas.Destination, reason string, now time.Time) bool {
	if (reason != refusedBreaker && reason != refusedPaused) || !s.isTier[d.r.Topic] || p.gen == 0 {
		return false
	}
	deadline := d.firstAttemptAt.Add(s.cfg.RetryWindow)
	if !now.Before(deadline) || s.tooFarBehind(d.r) {
		return false
	}
	var units []string
	for _, e := range dest.Settings.Webhooks {
		units = append(units, unitOf(dest, e.URL))
	}
	key := strings.Join(units, "\n")
	s.parkMu.Lock()
	defer s.parkMu.Unlock()
	// Checked under parkMu: onLost ends the generation before dropParked, so a record of a
	// partition revoked meanwhile is either refused here or dropped there.
	if s.track.genOf(partKey{d.r.Topic, d.r.Partition}) != p.gen {
		return false
	}
	s.parked.byUnits[key] = append(s.parked.byUnits[key], &parkedRec{r: d.r, p: p, reason: reason, deadline: deadline,
		destID: d.destID, exempt: d.notice || d.test})
	s.parked.n++
	return true
}

// tooFarBehind says whether more than MaxPollRecords records of r's partition were read after r.
func (s *Service) tooFarBehind(r *kgo.Record) bool {
	newest, ok := s.track.newest(partKey{r.Topic, r.Partition})
	return ok && newest-r.Offset > int64(s.cfg.MaxPollRecords)
}

// parkLoop looks at the parked records every parkTick until ctx is done. It runs in a goroutine
// s.wg counts (Run spawns it).
func (s *Service) parkLoop(ctx context.Context) {
	t := time.NewTicker(parkTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.sweepParked(ctx, s.now())
		}
	}
}

// sweepParked releases the parked records of every destination one of whose hosts may be tried
// again (they are dispatched again: one becomes the breaker's trial, the others are parked again
// until its answer), drops those whose user was deleted or suppressed meanwhile
// (regulations.go), dead-letters those whose window ended, and hands on to a tier those whose
// partition moved more than MaxPollRecords records past them.
func (s *Service) sweepParked(ctx context.Context, now time.Time) {
	var release, expired, evicted, forgotten []*parkedRec
	var waits []time.Duration
	var classes []Class
	s.parkMu.Lock()
	for key, recs := range s.parked.byUnits {
		wait, blocked := time.Duration(0), true
		for _, u := range strings.Split(key, "\n") {
			w, b := s.hosts.blockedFor(u, now)
			blocked = blocked && b
			wait = max(wait, w)
		}
		if !blocked {
			release = append(release, recs...)
			s.parked.n -= len(recs)
			delete(s.parked.byUnits, key)
			continue
		}
		kept := recs[:0]
		for _, pr := range recs {
			why := s.regs.Forgets(pr.r, pr.destID, pr.exempt)
			switch {
			case why != "":
				forgotten = append(forgotten, pr)
				classes = append(classes, classOf(why))
			case !now.Before(pr.deadline):
				expired = append(expired, pr)
			case s.tooFarBehind(pr.r):
				evicted = append(evicted, pr)
				waits = append(waits, wait)
			case s.isAutoDisabled(pr.destID):
				release = append(release, pr) // dispatch parks it on webhooks.parked (autodisable.go)
			default:
				kept = append(kept, pr)
			}
		}
		s.parked.keep(key, recs, kept)
	}
	s.parkMu.Unlock()
	for i, pr := range forgotten {
		d := parseDelivery(pr.r, now)
		s.drop(&d, pr.p, classes[i])
	}
	for _, pr := range expired {
		s.toDLQ(parseDelivery(pr.r, now), pr.p, "retry_window_expired", 0, "no attempt may start more than RETRY_WINDOW after the first")
	}
	for i, pr := range evicted {
		s.deferTo(parseDelivery(pr.r, now), pr.p, pr.reason, waits[i])
	}
	if len(release) > 0 {
		// In a goroutine of its own: dispatch may wait for the global bound, or for room in a
		// host's queue, and the sweep must not.
		s.spawn(func() {
			for _, pr := range release {
				if ctx.Err() != nil {
					return // not finished: delivered again after a restart
				}
				s.dispatch(ctx, pr.r, pr.p)
			}
		})
	}
}

// dropParked forgets the parked records of the partitions given (revoked or lost): their next
// owner reads them again, since they are not committed.
func (s *Service) dropParked(parts map[string][]int32) {
	s.parkMu.Lock()
	defer s.parkMu.Unlock()
	for key, recs := range s.parked.byUnits {
		kept := recs[:0]
		for _, pr := range recs {
			if !contains(parts[pr.r.Topic], pr.r.Partition) {
				kept = append(kept, pr)
			}
		}
		s.parked.keep(key, recs, kept)
	}
}

// keep makes kept (a prefix of recs, filtered in place) the parked records of key, and forgets
// the others. s.parkMu is held.
func (pk *parking) keep(key string, recs, kept []*parkedRec) {
	clear(recs[len(kept):])
	pk.n -= len(recs) - len(kept)
	if len(kept) == 0 {
		delete(pk.byUnits, key)
	} else {
		pk.byUnits[key] = kept
	}
}

// parkedCount is the number of parked records.
func (s *Service) parkedCount() int {
	s.parkMu.Lock()
	defer s.parkMu.Unlock()
	return s.parked.n
}

// blockedFor says whether host refuses every request now — its breaker open (or half-open, its
// trial in flight) or paused by a Retry-After — and for how long at least.
func (h *hosts) blockedFor(host string, now time.Time) (wait time.Duration, blocked bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.m[host]
	if st == nil {
		return 0, false
	}
	if now.Before(st.pausedUntil) {
		wait, blocked = st.pausedUntil.Sub(now), true
	}
	switch st.brk.state {
	case breakerOpen:
		if left := st.brk.remaining(now); left > 0 {
			wait, blocked = max(wait, left), true
		}
	case breakerHalfOpen:
		wait, blocked = max(wait, st.brk.period), true
	}
	return wait, blocked
}
