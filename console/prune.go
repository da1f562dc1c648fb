package console

import (
	"context"
	"time"
)

// pruneEvery is how often the views drop what belongs to deleted objects.
const pruneEvery = time.Minute

// runPrune drops, every pruneEvery, the views' entries of destinations and sources the config no
// longer has (their delivery log, counters, DLQ list, recent events): a deleted object's history
// does not stay in memory for the life of the process.
func (s *Service) runPrune(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pruneEvery):
		}
		s.prune()
	}
}

func (s *Service) prune() {
	s.sessions.prune(s.now())
	snap := s.deps.Store.Snapshot()
	if snap.Version() == 0 {
		return // not loaded: everything would look deleted
	}
	hasDestination := func(id string) bool { _, ok := snap.DestinationByID(id); return ok }
	s.attempts.Prune(hasDestination)
	s.messages.Prune(hasDestination)
	s.health.Prune(hasDestination)
	s.dlq.Prune(hasDestination)
	s.pending.Prune(hasDestination)
	s.events.Prune(func(id string) bool { _, ok := snap.SourceByID(id); return ok }) // but a watched one
}
