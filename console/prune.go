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
	s.attempts.mu.Lock()
	for id := range s.attempts.dests {
		if _, ok := snap.DestinationByID(id); !ok {
			delete(s.attempts.dests, id)
		}
	}
	s.attempts.mu.Unlock()
	s.dlq.mu.Lock()
	for id := range s.dlq.dests {
		if _, ok := snap.DestinationByID(id); !ok {
			delete(s.dlq.dests, id)
		}
	}
	s.dlq.mu.Unlock()
	s.events.mu.Lock()
	for id, se := range s.events.sources {
		if _, ok := snap.SourceByID(id); !ok && len(se.watchers) == 0 {
			delete(s.events.sources, id)
		}
	}
	s.events.mu.Unlock()
}
